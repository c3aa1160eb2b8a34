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
    even while the VAD is unsure of it: it is the person's onset.

    Double talk from the first moment of playback. A person who goes on
    talking just as the reply starts gives the gate no frame of echo alone to
    learn from, and AEC3's suppressor, not yet converged, takes their words
    for echo too (on ``ja_commonvoice_38853932`` at -20 dB it took 45-50 dB off
    them for the first 1.2 s). Learnt by energy, their voice became the echo
    expected (the gain rose from -22 to -8 dB) and gated their own words off:
    a sentence lost. The waveform tells them apart where the energy cannot
    (see :func:`echo_coherence`): the echo alone is 0.5 or more coherent with
    what was played in 95 frames in 100 (median 0.82, at -6 and -20 dB), another
    voice 10 dB over it 0.25-0.30 at the median. So a frame the raw view's VAD calls speech is learnt as
    echo only if it is at least ``coherent``; and until the echo path is
    learnt, the raw view counts where it is less than ``double_talk``: the
    person talking over the reply, whatever the echo's level. Phone calls, the browser page and
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
        coherent: float = 0.6,
        double_talk: float = 0.5,
        max_echo_delay_s: float = 0.48,
    ) -> None:
        """``coherent``: a frame the VAD calls speech is learnt as echo only this coherent with what
        was played (see :func:`echo_coherence`), over echo paths up to ``max_echo_delay_s`` long;
        ``double_talk``: until the echo path is learnt, the raw view counts below this coherence."""
        self._learn = round(learn_s * ASR_RATE / 512)
        self.coherent = coherent
        self.double_talk = double_talk
        self._played = np.zeros(round(max_echo_delay_s * ASR_RATE) + 512, dtype=np.float32)
        self.gate_db = gate_db
        self.margin = 10 ** (margin_db / 10)
        self.far_floor = 10 ** (far_floor_db / 10)
        frames_per_s = ASR_RATE / 512
        self._window = max(1, round(window_s * frames_per_s))
        self._far_energy: list[float] = []
        self._ratios: list[float] = []
        self._history = round(history_s * frames_per_s)
        self.echo_gain = 1.0  # echo energy over playback energy; pessimistic until measured
        self._not_echo = False  # the last frame, before the echo path was learnt, was not the playback's

    def far_frame(self, far: np.ndarray) -> None:
        """What was played over the span of the next microphone frame."""
        self._far_energy.append(float(np.mean(far**2)) if len(far) else 0.0)
        del self._far_energy[: -self._window]
        if len(far):
            self._played = np.concatenate([self._played[len(far) :], far.astype(np.float32)])

    def near_energy(self, raw: np.ndarray, cleaned: np.ndarray) -> float:
        """The person's share of a frame's energy: what is left after the expected echo.

        The canceller's output alone would understate it: in double talk its
        suppressor also takes several dB off the person's voice. Before the echo
        path is learnt, a frame that is not the playback's waveform is all the person's.
        Called after :meth:`__call__` on the same frame.
        """
        far = max(self._far_energy, default=0.0)
        e_raw = float(np.mean(raw**2))
        if self._not_echo:  # the frame just gated is not the playback's waveform: all of it is the person's
            return e_raw
        return max(float(np.mean(cleaned**2)), e_raw - self.echo_gain * far)

    def __call__(self, p_raw: float, p_clean: float, raw: np.ndarray, cleaned: np.ndarray) -> float:
        far = max(self._far_energy, default=0.0)
        self._not_echo = False
        if far <= self.far_floor:
            return max(p_raw, p_clean)  # the assistant is silent: nothing to discount
        e_raw = float(np.mean(raw**2)) + 1e-10
        reduction = e_raw / (float(np.mean(cleaned**2)) + 1e-10)
        clean_ok = 10 * np.log10(1 / reduction) > self.gate_db
        learnt = len(self._ratios) >= self._learn
        loud = e_raw > self.margin * self.echo_gain * far  # louder than any echo expected
        # The raw view's speech: how coherent it is with the playback, where a rule below reads it
        # (not once learnt and louder than any echo: that frame is the person's, and never learnt).
        speech = p_raw >= NO_SPEECH_BELOW
        coherence = echo_coherence(raw, self._played) if speech and not (learnt and loud) else 0.0
        # Until the echo path is learnt, speech that is not the playback's waveform is the person.
        self._not_echo = not learnt and speech and coherence < self.double_talk
        raw_ok = loud if learnt else self._not_echo
        prob = max(p_raw if raw_ok else 0.0, p_clean if clean_ok else 0.0)
        # Learn the echo path from frames without the person's speech. Once it is learnt, a frame
        # louder than any echo is not learnt from even when the VAD is not sure of it yet: those
        # are the first frames of the person's speech, and learnt as echo they would raise the
        # echo expected to the person's level and gate the rest of their words off. Speech to the
        # raw view is the reply's echo only if it has the reply's waveform: else it is the person
        # talking from the reply's first moment, which neither view may have passed yet.
        echo_alone = not speech or coherence >= self.coherent
        if prob < NO_SPEECH_BELOW and not (learnt and loud) and echo_alone:
            self._ratios.append(e_raw / far)
            del self._ratios[: -self._history]
            self.echo_gain = float(np.percentile(self._ratios, 90))
        return prob


def echo_coherence(mic: np.ndarray, played: np.ndarray, max_gain: float = 4.0) -> float:
    """How much of ``mic`` is ``played`` echoed back: the largest normalized cross-correlation
    (0-1) of the frame with the stretches of ``played`` (which ends where the frame does) that
    it could be the echo of, at any delay up to ``len(played) - len(mic)`` samples.

    Both are pre-emphasized first (speech's low frequencies make any two voices look alike at
    some delay), and a stretch is compared only if it is loud enough to have made the frame as
    its echo, at most ``max_gain`` times its energy (+6 dB: louder than the loudest speakerphone).
    The echo alone is 0.5 or more coherent in 95 frames in 100 (median 0.82) at -6 and -20 dB in
    the simulated room; another voice 10 dB over it, 0.25-0.30 at the median. One FFT correlation:
    0.34 ms a frame at the median on this 2-core CPU."""
    if len(mic) < 2 or len(played) < len(mic):
        return 0.0
    mic64, played64 = _pre_emphasis(mic), _pre_emphasis(played)
    n = len(mic64)
    e_mic = float(np.sum(mic64**2))
    if e_mic <= 0.0:
        return 0.0
    size = 1 << (len(played) + n - 1).bit_length()
    corr = np.fft.irfft(np.fft.rfft(mic64[::-1], size) * np.fft.rfft(played64, size), size)[n - 1 : len(played64)]
    # The energy of each stretch of `played`, by a running sum.
    squares = np.concatenate([[0.0], np.cumsum(played64**2)])
    stretch = squares[n:] - squares[:-n]
    could_be = stretch * max_gain >= e_mic
    if not could_be.any():
        return 0.0
    norm = np.sqrt(stretch[could_be] * e_mic)
    return float(min(1.0, np.max(np.abs(corr[could_be]) / norm)))


def _pre_emphasis(x: np.ndarray) -> np.ndarray:
    """``x[i] - 0.95 x[i - 1]`` from its second sample on (the first has no sample before it)."""
    x = x.astype(np.float64)
    return x[1:] - 0.95 * x[:-1]
