"""The pipeline's audio constants, and a sample-indexed buffer (pure).

Every rate and block size the layers share is defined here, once.
"""

from __future__ import annotations

import numpy as np
import soxr

ASR_RATE = 16000  # what the VAD, the echo canceller and Whisper hear
VAD_FRAME = 512  # Silero's frame at ASR_RATE: 32 ms
BLOCK_S = 0.02  # the pump's block: microphone audio in, reply audio out; a barge-in stops within one
ASR_BLOCK = round(BLOCK_S * ASR_RATE)


def resample(audio: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    audio = np.asarray(audio, dtype=np.float32)
    if from_rate == to_rate:
        return audio
    return soxr.resample(audio, from_rate, to_rate, quality="HQ").astype(np.float32)


class AudioBuffer:
    """The last ``max_s`` seconds of a stream, addressed by absolute sample index."""

    def __init__(self, rate: int = ASR_RATE, max_s: float = 120.0) -> None:
        self.rate = rate
        self._data = np.zeros(int(rate * max_s), dtype=np.float32)
        self.end = 0  # absolute index one past the newest sample

    @property
    def start(self) -> int:
        return max(0, self.end - len(self._data))

    def append(self, block: np.ndarray) -> None:
        n = len(block)
        cap = len(self._data)
        if n >= cap:
            self._data[:] = block[-cap:]
        else:
            pos = self.end % cap
            first = min(n, cap - pos)
            self._data[pos : pos + first] = block[:first]
            self._data[: n - first] = block[first:]
        self.end += n

    def slice(self, t0: float, t1: float) -> np.ndarray:
        """Samples between two times (seconds), clipped to what is kept."""
        a = max(self.start, round(t0 * self.rate))
        b = min(self.end, round(t1 * self.rate))
        if b <= a:
            return np.zeros(0, dtype=np.float32)
        cap = len(self._data)
        idx = np.arange(a, b) % cap
        return self._data[idx]
