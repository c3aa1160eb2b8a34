"""The pipeline's audio constants, and a sample-indexed buffer (pure).

Every rate and block size the layers share is defined here, once.
"""

from __future__ import annotations

from collections.abc import Iterable

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


def shorten_pauses(
    audio: np.ndarray, t0: float, pauses: Iterable[tuple[float, float]], keep_s: float, rate: int = ASR_RATE
) -> np.ndarray:
    """``audio``, which starts at ``t0`` on the timeline, with every silent stretch of ``pauses``
    ((start, end) in seconds) longer than ``keep_s`` shortened to ``keep_s``: its middle is
    dropped, half of ``keep_s`` kept at either side. A stretch not wholly inside ``audio`` is
    left as it is.

    Whisper mishears speech around a long silence inside what it is given: with 1-1.5 s of
    silence inserted into the shared recordings, "Author of the danger trail" became "Author of
    the danger, your trail" and "apologized Whittemore" "apologized to it more"; with the silence
    cut to 0.3 s both came out as without it."""
    end = t0 + len(audio) / rate
    keep = []
    at = 0
    for start, stop in sorted(pauses):
        if stop - start <= keep_s + 1e-9 or start < t0 - 1e-9 or stop > end + 1e-9:
            continue
        cut_from = round((start - t0 + keep_s / 2) * rate)
        cut_to = round((stop - t0 - keep_s / 2) * rate)
        if cut_from < at:  # overlaps the stretch before: never reorder or repeat audio
            continue
        keep.append(audio[at:cut_from])
        at = cut_to
    if not keep:
        return audio
    keep.append(audio[at:])
    return np.concatenate(keep)


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
