"""Audio helpers: loading any file to 16 kHz mono, and a sample-indexed buffer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soxr

ASR_RATE = 16000


class AudioInputError(ValueError):
    """The input is not usable audio (missing, unreadable, empty)."""


def load_audio(path: str | Path, rate: int = ASR_RATE) -> np.ndarray:
    """Read any file soundfile reads; return mono float32 at ``rate``."""
    import soundfile as sf

    p = Path(path)
    if not p.is_file():
        raise AudioInputError(f"{p}: no such file")
    try:
        data, sr = sf.read(str(p), dtype="float32", always_2d=True)
    except Exception as e:  # soundfile raises LibsndfileError, RuntimeError, TypeError ...
        raise AudioInputError(f"{p}: not a readable audio file ({e})") from None
    if data.size == 0 or data.shape[0] < sr // 100:
        raise AudioInputError(f"{p}: the audio is empty")
    return resample(data.mean(axis=1), sr, rate)


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


def write_wav(path: str | Path, audio: np.ndarray, rate: int) -> None:
    """16-bit PCM WAV."""
    import soundfile as sf

    sf.write(str(path), np.clip(audio, -1.0, 1.0), rate, subtype="PCM_16")
