"""faster-whisper behind a small blocking interface.

One :class:`WhisperRecognizer` per model, shared by every session; calls are
blocking and made from worker threads. ``device="auto"`` picks CUDA with
float16 where a GPU exists and the CPU with int8 otherwise.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np


def pick_device(device: str) -> tuple[str, str]:
    if device != "auto":
        return device, "float16" if device == "cuda" else "int8"
    try:
        import ctranslate2

        if ctranslate2.get_cuda_device_count() > 0:
            return "cuda", "float16"
    except Exception:  # no CUDA runtime at all
        pass
    return "cpu", "int8"


class WhisperRecognizer:
    def __init__(self, model_dir: Path, device: str = "auto", cpu_threads: int = 2, language: str = "en") -> None:
        from faster_whisper import WhisperModel

        self.device, self.compute_type = pick_device(device)
        self.name = model_dir.name
        self.language = language
        self.model = WhisperModel(
            str(model_dir), device=self.device, compute_type=self.compute_type, cpu_threads=cpu_threads
        )
        # CTranslate2 runs one call at a time per model replica; calls from
        # several sessions queue here rather than oversubscribe the cores.
        self._lock = threading.Lock()

    def transcribe(self, audio: np.ndarray, beam_size: int = 1) -> str:
        """Text of 16 kHz float32 ``audio`` (empty when it holds no words)."""
        if audio.size == 0:
            return ""
        with self._lock:
            segments, _ = self.model.transcribe(
                audio,
                language=self.language,
                beam_size=beam_size,
                temperature=0.0,  # no fallback: one decode per call (see the notes)
                condition_on_previous_text=False,
                without_timestamps=True,
                vad_filter=False,  # our VAD already cut the utterance
            )
            return " ".join(s.text.strip() for s in segments).strip()
