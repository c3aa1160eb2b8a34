"""The sounds an agent's ``hold:`` plays while a reply waits on a slow tool (core/hold_sound.py).

``chime``, made here (two soft notes every two seconds: nothing to license or ship), or a sound
file of the agent's (any file soundfile reads; mono, at the output rate), played in a loop for as
long as the reply waits, from where it stopped the last time.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from core.audio import resample

BUILTIN = ("chime",)


class HoldSoundError(ValueError):
    """A hold sound that cannot be played (one line: what and why)."""


class HoldSound:
    """One session's hold sound, taken piece by piece in a loop."""

    def __init__(self, audio: np.ndarray) -> None:
        if not len(audio):
            raise HoldSoundError("the hold sound is empty")
        self._audio = audio.astype(np.float32)
        self._at = 0

    @classmethod
    def of(cls, sound: str, rate: int) -> HoldSound:
        """``sound``: ``chime``, or the path of a sound file. Raises :class:`HoldSoundError`."""
        return cls(_sound(sound, rate))

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` samples of the loop."""
        looped = np.resize(np.roll(self._audio, -self._at), n)
        self._at = (self._at + n) % len(self._audio)
        return looped


@functools.lru_cache(maxsize=8)
def _sound(sound: str, rate: int) -> np.ndarray:
    """A sound's samples, made or read once per process, not at every session's start (each session's
    :class:`HoldSound` keeps its own place in a copy)."""
    return chime(rate) if sound == "chime" else read_sound(Path(sound), rate)


def read_sound(path: Path, rate: int) -> np.ndarray:
    """A sound file as mono float32 at ``rate``. Raises :class:`HoldSoundError`."""
    import soundfile as sf

    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as e:  # soundfile raises LibsndfileError, RuntimeError, TypeError ...
        raise HoldSoundError(f"{path}: not a sound file that can be read ({e})") from None
    if not data.size:
        raise HoldSoundError(f"{path}: the sound is empty")
    return resample(data.mean(axis=1), sr, rate)


def chime(rate: int, period_s: float = 2.0) -> np.ndarray:
    """Two soft notes (E5, then A5 a quarter second later), each fading over 0.4 s, every ``period_s``."""
    out = np.zeros(round(period_s * rate), dtype=np.float32)
    t = np.arange(round(0.4 * rate)) / rate
    for start_s, hz in ((0.0, 659.25), (0.25, 880.0)):
        note = 0.08 * np.sin(2 * np.pi * hz * t) * np.exp(-t / 0.12)
        at = round(start_s * rate)
        out[at : at + len(note)] += note.astype(np.float32)
    return out
