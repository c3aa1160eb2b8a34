"""Audio files: any file soundfile reads in, 16-bit WAV out."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from core.audio import ASR_RATE, resample


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


def write_wav(path: str | Path, audio: np.ndarray, rate: int) -> None:
    """16-bit PCM WAV."""
    import soundfile as sf

    sf.write(str(path), np.clip(audio, -1.0, 1.0), rate, subtype="PCM_16")
