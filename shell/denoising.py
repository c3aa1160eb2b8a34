"""The noise suppressor's place in the hearing: which views of the microphone it cleans.

The echo cancellers get the raw microphone (a suppressor before them would make the echo path they
model change from moment to moment, and undo their work). After them, the VAD's two views (the
echo-cancelled signal and the raw microphone that the echo gate weighs against it) are cleaned,
each by its own RNNoise: what decides that someone speaks, how loud, and when they stop. What
Whisper and Smart Turn hear (the ASR's view) is cleaned only with ``for_asr``: suppression can
cost recognition more than the noise does (measured: ``python -m voice.bench noise``).
Where there is no echo canceller (phone calls, WebRTC) the views are one signal, cleaned once.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from asr.denoise import RNNoiseDenoiser

Denoise = Literal["rnnoise", "off"]


class Denoising:
    """One session's noise suppressors, one per view that is cleaned (none when off)."""

    def __init__(self, kind: Denoise, for_asr: bool, echo_cancel: bool) -> None:
        """``for_asr``: Whisper and Smart Turn hear the cleaned audio; ``echo_cancel``: the views
        are three signals (else one, the microphone's)."""
        self.for_asr = for_asr
        self._echo_cancel = echo_cancel
        self.kind: Denoise = "off"
        self._views: dict[str, RNNoiseDenoiser] = {}
        self.set(kind, started=False)

    def set(self, kind: Denoise, started: bool = True) -> dict[str, np.ndarray]:
        """Turn suppression on or off; ``started``: audio has gone through already, so a new
        suppressor takes the stream over 20 ms late (not withheld) and one that stops leaves
        silence for what it held. Returns that silence, per view, to append to each stream."""
        if kind not in ("rnnoise", "off"):
            raise ValueError(f"denoise is 'rnnoise' or 'off', not {kind!r}")
        tails: dict[str, np.ndarray] = {}
        if kind == self.kind:
            return tails
        self.kind = kind
        if kind == "off":
            tails = {view: d.finish() for view, d in self._views.items()}
            self._views = {}
        else:
            if not self._echo_cancel:
                views: tuple[str, ...] = ("vad",)  # one signal, the microphone's
            else:
                views = ("vad", "raw", "asr") if self.for_asr else ("vad", "raw")
            self._views = {view: RNNoiseDenoiser(aligned=not started) for view in views}
        return tails

    @property
    def on(self) -> bool:
        return bool(self._views)

    def clean(self, view: str, audio: np.ndarray) -> np.ndarray:
        """``audio`` of ``view`` ("vad": the echo-cancelled signal, "raw": the microphone, "asr":
        what Whisper hears), cleaned where that view is; as it was where not."""
        d = self._views.get(view)
        return d.process(audio) if d is not None else audio
