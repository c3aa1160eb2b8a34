"""What the ASR hears, kept on the session's timeline, and the spans of it each pass is given.

Whisper and Smart Turn are given an utterance's audio from its onset (with its
pre-roll); Whisper's with the long pauses inside it shortened
(``asr_max_pause_s``), Smart Turn's as they were, since they are its cue.
Speech over the reply is given from where it began in what the ASR hears,
which can be before the VAD's onset (:meth:`HeardAudio.over_reply`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from core.audio import ASR_RATE, VAD_FRAME, AudioBuffer, shorten_pauses
from core.endpointing import EndpointConfig, speech_run_start
from core.hearing import Hearing
from shell.work import Serves, Work

# How far before the VAD's onset speech over the reply may have begun, unheard by it,
# and how much quieter than that speech a frame may be and still be part of it.
ONSET_LOOKBACK_S = 1.0
ONSET_LEVEL_DB = 12.0


def _level_db(audio: np.ndarray) -> float:
    return 10 * float(np.log10(np.mean(audio.astype(np.float64) ** 2) + 1e-12)) if len(audio) else -120.0


class HeardAudio:
    """The ASR's audio (echo-cancelled) and the spans of it the passes are given."""

    def __init__(
        self,
        endpoint: EndpointConfig,
        max_pause_s: float | None,
        hearing: Hearing,
        new_vad: Callable[[], Callable[[np.ndarray], float]],
        work: Work,
        look_back: bool,
    ) -> None:
        """``hearing``: the front end whose pauses are shortened; ``new_vad``: a fresh VAD for the
        onset look-back; ``look_back``: the ASR hears the linear echo canceller's output, which
        keeps the onset of speech over a reply (else the VAD's onset stands)."""
        self._endpoint = endpoint
        self._max_pause_s = max_pause_s
        self._hearing = hearing
        self._new_vad = new_vad
        self._work = work
        self._look_back = look_back
        self.audio = AudioBuffer(ASR_RATE)
        self.onset = (-1.0, -1.0)  # the VAD's onset of speech over the reply, and where the ASR hears it begin

    def append(self, block: np.ndarray) -> None:
        self.audio.append(block)

    @property
    def end(self) -> float:
        """Where what has been heard ends, in seconds on the session's timeline."""
        return self.audio.end / ASR_RATE

    def utterance(self, onset: float, end: float, for_asr: bool = True) -> np.ndarray:
        """The audio of the utterance that began at ``onset`` up to ``end``, with its pre-roll; for
        Whisper (``for_asr``) with its long pauses shortened (``asr_max_pause_s``)."""
        start = onset - self._endpoint.preroll_s
        audio = self.audio.slice(start, end)
        keep = self._max_pause_s
        pauses = self._hearing.pauses
        if not for_asr or keep is None or not pauses:
            return audio
        t0 = max(self.audio.start, round(start * ASR_RATE)) / ASR_RATE
        return shorten_pauses(audio, t0, pauses, keep)

    def over_reply(self, onset: float, end: float) -> np.ndarray:
        """Speech over the reply, from where it began in what the ASR hears.

        The VAD hears AEC3's output, whose suppressor can swallow the first words
        of speech over the reply: in one fixture the VAD's onset came 0.58 s late,
        after "For the", with no echo in the input at all. The linear canceller's
        output kept them, so the onset is moved back to where the run of speech
        that reaches it begins there (at most ONSET_LOOKBACK_S): frames the VAD
        calls speech, within ONSET_LEVEL_DB of the speech's own level after the
        onset, so the canceller's residual echo before it does not count."""
        if not self._look_back:
            return self.utterance(onset, end)
        if self.onset[0] != onset:
            start = max(0.0, onset - ONSET_LOOKBACK_S)
            before = self.audio.slice(start, onset)
            before = before[len(before) % VAD_FRAME :]  # whole frames, the last one ending at the onset
            own_db = _level_db(self.audio.slice(onset, onset + 0.3))
            frames = [before[i * VAD_FRAME : (i + 1) * VAD_FRAME] for i in range(len(before) // VAD_FRAME)]
            heard = self._work.call(Serves.DECISION, self._look_back_vad, frames)
            probabilities = [p if db >= own_db - ONSET_LEVEL_DB else 0.0 for p, db in heard]
            first = speech_run_start(probabilities, self._endpoint.threshold)
            self.onset = (onset, onset - (len(frames) - first) * VAD_FRAME / ASR_RATE)
        return self.utterance(self.onset[1], end)

    def _look_back_vad(self, frames: list[np.ndarray]) -> list[tuple[float, float]]:
        vad = self._new_vad()
        # Silero runs on every frame, in order: its state carries from one to the next.
        return [(vad(f), _level_db(f)) for f in frames]
