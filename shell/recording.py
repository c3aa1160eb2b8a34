"""A conversation's recording: the person on the left, the assistant as heard on the right, on one timeline.

:class:`RecordingDevice` wraps any device (replay, the sound card, a network client, a phone call)
and keeps what its microphone captured and what its speaker was given. Both are placed on the
session's timeline: sample 0 is the microphone's first sample, and reply audio is placed where the
microphone stood when it was given to the speaker (a replay plays it there; a remote client plays it
its buffer later). Only what the device reports played is kept, so the right channel is what the
person heard: audio flushed from a client's buffer by a barge-in is not in it.

The file is stereo at the session's output rate: the right channel is the reply audio as it was
made, sample for sample (a replay's ``reply.wav``), the left the microphone resampled once, whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soxr

from core.audio import ASR_RATE
from shell.device import AudioDevice, Captured, Played


@dataclass
class _Given:
    """Reply audio given to the speaker: where (output samples on the timeline), for which reply."""

    at: int
    response: int | None
    audio: np.ndarray


@dataclass
class Recording:
    """What :class:`RecordingDevice` kept; :meth:`stereo` makes the file's samples."""

    output_rate: int
    mic: list[np.ndarray] = field(default_factory=list)  # 16 kHz blocks, as captured
    given: list[_Given] = field(default_factory=list)
    played: dict[int | None, int] = field(default_factory=dict)  # samples reported played, per reply

    @property
    def mic_samples(self) -> int:
        return sum(len(b) for b in self.mic)

    def person(self) -> np.ndarray:
        """The microphone at 16 kHz."""
        return np.concatenate(self.mic) if self.mic else np.zeros(0, dtype=np.float32)

    def assistant(self) -> np.ndarray:
        """The reply audio the person heard, at the output rate, on the timeline."""
        left_of: dict[int | None, int] = dict(self.played)  # what of each reply is still to place
        end = max((g.at + len(g.audio) for g in self.given), default=0)
        track = np.zeros(max(end, self._length()), dtype=np.float32)
        for g in self.given:
            n = min(len(g.audio), left_of.get(g.response, 0))
            if n > 0:
                track[g.at : g.at + n] = g.audio[:n]
                left_of[g.response] -= n
        return track

    def stereo(self) -> np.ndarray:
        """``(samples, 2)`` float32 at the output rate: the person left, the assistant right."""
        right = self.assistant()
        left = self.person()
        if self.output_rate != ASR_RATE and len(left):
            left = soxr.resample(left, ASR_RATE, self.output_rate).astype(np.float32)
        n = max(len(left), len(right))
        out = np.zeros((n, 2), dtype=np.float32)
        out[: len(left), 0] = left
        out[: len(right), 1] = right
        return out

    def _length(self) -> int:
        return round(self.mic_samples * self.output_rate / ASR_RATE)

    def save(self, folder: Path, name: str) -> Path:
        """Write the stereo file as ``folder/name.wav`` (``name-2.wav``... if that is taken: a conversation
        resumed later is another file); 16-bit PCM. Returns its path. Blocking."""
        folder.mkdir(parents=True, exist_ok=True)
        path, n = folder / f"{name}.wav", 1
        while path.exists():
            n += 1
            path = folder / f"{name}-{n}.wav"
        self.save_as(path)
        return path

    def save_as(self, path: Path) -> None:
        """Write the stereo file at ``path`` (16-bit PCM), replacing one that is there. Blocking."""
        import soundfile

        soundfile.write(str(path), np.clip(self.stereo(), -1.0, 1.0), self.output_rate, subtype="PCM_16")


class RecordingDevice:
    """``device``, recorded: every call goes through to it, and what it captured and played is kept."""

    def __init__(self, device: AudioDevice, output_rate: int) -> None:
        self.device = device
        self.tick_s = device.tick_s
        self.recording = Recording(output_rate)

    def capture(self) -> Captured | None:
        captured = self.device.capture()
        if captured is not None and len(captured.mic):
            self.recording.mic.append(np.array(captured.mic, dtype=np.float32))
        return captured

    def room(self) -> int:
        return self.device.room()

    def play(self, audio: np.ndarray, response: int | None) -> None:
        if len(audio):
            rec = self.recording
            rec.given.append(_Given(rec._length(), response, np.array(audio, dtype=np.float32)))
        self.device.play(audio, response)

    def played(self) -> list[Played]:
        out = self.device.played()
        for p in out:
            self.recording.played[p.response] = self.recording.played.get(p.response, 0) + p.samples
        return out

    def pause(self) -> None:
        self.device.pause()

    def resume(self) -> None:
        self.device.resume()

    def flush(self) -> None:
        self.device.flush()
