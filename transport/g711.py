"""G.711 at 8 kHz, mu-law (PCMU: North America, Japan, Twilio) and A-law (PCMA: elsewhere), both
ways, between telephone bytes and the float32 samples the pipeline works in.

The codec is libsndfile's (through ``soundfile``, which the project already uses to read and
write audio files): a maintained implementation, not a hand-written table, ~50 µs for a 20 ms
frame both ways. Checked against Python's deprecated ``audioop`` over every 16-bit value
(tests/unit/test_g711.py): decoding is identical for all 256 codes of each law; encoding picks
the neighbouring code only on values at the exact border of two steps (381 of 65,536 for
mu-law, 127 for A-law), where the standard's rounding is the implementation's to choose.
"""

from __future__ import annotations

import io
from typing import Literal

import numpy as np
import soundfile as sf

G711_RATE = 8000
Law = Literal["ulaw", "alaw"]
_SUBTYPE = {"ulaw": "ULAW", "alaw": "ALAW"}


def encode(samples: np.ndarray, law: Law = "ulaw") -> bytes:
    """float32 mono samples at 8 kHz (clipped to [-1, 1]) -> one G.711 byte per sample.

    Scaled to 16-bit as everywhere in the project (``transport.protocol.float_to_pcm16``), then
    encoded from those integers: the bytes are the G.711 tables' for that PCM.
    """
    if not len(samples):
        return b""
    pcm = (np.clip(samples, -1.0, 32767 / 32768) * 32768.0).astype(np.int16)
    out = io.BytesIO()
    sf.write(out, pcm, G711_RATE, format="RAW", subtype=_SUBTYPE[law])
    return out.getvalue()


def decode(data: bytes, law: Law = "ulaw") -> np.ndarray:
    """G.711 bytes -> float32 mono samples at 8 kHz."""
    if not data:
        return np.zeros(0, dtype=np.float32)
    pcm, _ = sf.read(
        io.BytesIO(data), samplerate=G711_RATE, channels=1, format="RAW", subtype=_SUBTYPE[law], dtype="int16"
    )
    return pcm.astype(np.float32) / 32768.0


class To8k:
    """Streaming downsampling to 8 kHz from a multiple of it (24 kHz: the pipeline's output).

    A windowed-sinc low-pass (cut at 3.8 kHz, Kaiser window, 32 taps a phase) whose state is
    kept across chunks, and every M-th sample: each chunk's ``len / M`` samples come out at once,
    2 ms late. soxr's stream resampler gives its output in bursts of ~60 ms and holds the rest
    back, which at the end of a reply would keep its last words from the caller.
    """

    def __init__(self, rate: int) -> None:
        if rate % G711_RATE:
            raise ValueError(f"{rate} Hz is not a multiple of {G711_RATE} Hz")
        self.m = rate // G711_RATE
        taps = 32 * self.m + 1
        n = np.arange(taps) - (taps - 1) / 2
        cutoff = 3800 / rate
        h = 2 * cutoff * np.sinc(2 * cutoff * n) * np.kaiser(taps, 8.0)
        self._h = (h / h.sum()).astype(np.float32)
        self._history = np.zeros(taps - 1, dtype=np.float32)
        self._phase = 0  # where in the next chunk the next kept sample is

    def __call__(self, samples: np.ndarray) -> np.ndarray:
        buf = np.concatenate([self._history, samples.astype(np.float32, copy=False)])
        filtered = np.convolve(buf, self._h, mode="valid")  # one per input sample
        out = filtered[self._phase :: self.m]
        self._phase = (self._phase - len(samples)) % self.m
        self._history = buf[len(buf) - len(self._history) :]
        return out.astype(np.float32, copy=False)
