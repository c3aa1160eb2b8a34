"""Silero VAD (ONNX, run with onnxruntime): 512-sample frames at 16 kHz.

Streaming use: each frame is scored with the 64 samples before it as context
and the recurrent state carried over from the previous frame, exactly as the
model was trained to be run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime

from core.audio import VAD_FRAME

FRAME = VAD_FRAME
_CONTEXT = 64


class SileroVAD:
    """One VAD stream. Cheap to create; the ONNX session can be shared."""

    def __init__(self, model: Path | onnxruntime.InferenceSession) -> None:
        self.session = model if isinstance(model, onnxruntime.InferenceSession) else load_session(model)
        self.reset()

    def reset(self) -> None:
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros(_CONTEXT, dtype=np.float32)

    def __call__(self, frame: np.ndarray) -> float:
        """Speech probability of one 512-sample float32 frame."""
        if frame.shape != (FRAME,):
            raise ValueError(f"a VAD frame is {FRAME} samples at 16 kHz, got {frame.shape}")
        x = np.concatenate([self._context, frame.astype(np.float32, copy=False)])[None, :]
        prob, self._h, self._c = self.session.run(None, {"input": x, "h": self._h, "c": self._c})
        self._context = frame[-_CONTEXT:].astype(np.float32)
        return float(np.asarray(prob).reshape(-1)[0])


def load_session(path: Path) -> onnxruntime.InferenceSession:
    opts = onnxruntime.SessionOptions()
    # One frame is a tiny graph: threads would cost more than they save.
    opts.inter_op_num_threads = 1
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
