"""The echo gate: is a frame heard during playback the person, or the assistant's own voice? (pure)

See :class:`EchoGate`; the canceller itself is ``asr/echo.py``.
"""

from __future__ import annotations

import numpy as np

from core.audio import ASR_RATE
from core.endpointing import NO_SPEECH_BELOW


class EchoGate:
    """Decides whether a frame heard during playback is the person, not the echo.

    Two views of each 32 ms frame are scored by the VAD: the raw microphone
    and the echo-cancelled signal. While the assistant is silent, either will
    do. While it plays (far-end energy within the last ``window_s``):

    * the cancelled view counts only if cancellation left most of the frame's
      energy (more than ``gate_db``): the canceller removes the assistant's
      voice, even half-converged, but passes the person's;
    * the raw view counts only if the frame is ``margin_db`` louder than the
      loudest echo expected from what was played: the echo path's gain is
      the 90th percentile of microphone-over-playback energy in frames
      without speech, learnt over ``learn_s`` of playback first. Without this
      view WebRTC's suppressor delays the onset of speech over playback by
      up to seconds where there is little or no echo (headphones), since it
      assumes echo until it learns otherwise.

    Once learnt, a frame louder than any echo expected is never learnt from,
    even while the VAD is unsure of it: it is the person's onset. Speech that
    begins within ``learn_s`` of the first playback can still be learnt as
    echo (with nothing learnt, the person and an echo path look alike) and be
    held back until the history forgets it. Phone calls, the browser page and
    WebRTC run no canceller of ours (their clients cancel their own echo); the
    desk and the clients that ask for ours do.
    """

    def __init__(
        self,
        gate_db: float = -9.0,
        margin_db: float = 6.0,
        window_s: float = 0.3,
        far_floor_db: float = -50.0,
        history_s: float = 6.0,
        learn_s: float = 0.5,
    ) -> None:
        self._learn = round(learn_s * ASR_RATE / 512)
        self.gate_db = gate_db
        self.margin = 10 ** (margin_db / 10)
        self.far_floor = 10 ** (far_floor_db / 10)
        frames_per_s = ASR_RATE / 512
        self._window = max(1, round(window_s * frames_per_s))
        self._far_energy: list[float] = []
        self._ratios: list[float] = []
        self._history = round(history_s * frames_per_s)
        self.echo_gain = 1.0  # echo energy over playback energy; pessimistic until measured

    def far_frame(self, far: np.ndarray) -> None:
        """What was played over the span of the next microphone frame."""
        self._far_energy.append(float(np.mean(far**2)) if len(far) else 0.0)
        del self._far_energy[: -self._window]

    def near_energy(self, raw: np.ndarray, cleaned: np.ndarray) -> float:
        """The person's share of a frame's energy: what is left after the expected echo.

        The canceller's output alone would understate it: in double talk its
        suppressor also takes several dB off the person's voice.
        """
        far = max(self._far_energy, default=0.0)
        e_raw = float(np.mean(raw**2))
        return max(float(np.mean(cleaned**2)), e_raw - self.echo_gain * far)

    def __call__(self, p_raw: float, p_clean: float, raw: np.ndarray, cleaned: np.ndarray) -> float:
        far = max(self._far_energy, default=0.0)
        if far <= self.far_floor:
            return max(p_raw, p_clean)  # the assistant is silent: nothing to discount
        e_raw = float(np.mean(raw**2)) + 1e-10
        reduction = e_raw / (float(np.mean(cleaned**2)) + 1e-10)
        clean_ok = 10 * np.log10(1 / reduction) > self.gate_db
        learnt = len(self._ratios) >= self._learn
        loud = e_raw > self.margin * self.echo_gain * far  # louder than any echo expected
        raw_ok = learnt and loud
        prob = max(p_raw if raw_ok else 0.0, p_clean if clean_ok else 0.0)
        # Learn the echo path from frames without the person's speech. Once it is learnt, a frame
        # louder than any echo is not learnt from even when the VAD is not sure of it yet: those
        # are the first frames of the person's speech, and learnt as echo they would raise the
        # echo expected to the person's level and gate the rest of their words off.
        if prob < NO_SPEECH_BELOW and not (learnt and loud):
            self._ratios.append(e_raw / far)
            del self._ratios[: -self._history]
            self.echo_gain = float(np.percentile(self._ratios, 90))
        return prob
