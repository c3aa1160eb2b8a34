"""Speech edges from per-frame speech probabilities (no I/O, no model).

The VAD model gives one probability per 32 ms frame; :class:`Endpointer` turns
them into confirmed edges with hysteresis. Speech starts once ``min_speech_s``
of frames above ``threshold`` have been heard, gaps shorter than
``start_gap_s`` between them allowed (a short word, a stop consonant), and its
onset is the first of those frames. It ends once the probability stayed below
``threshold - 0.15`` for ``hangover_s``, or when the caller ends it with
:meth:`Endpointer.end_now` (an end-of-turn model said the turn is over). Edge
times are exact frame times on the session's timeline.

Before a start is confirmed, :class:`SpeechOnset` says early that speech may
be starting (``onset_s`` of voiced frames), and :class:`OnsetDropped` that it
was not confirmed after all: the assistant pauses its reply on the first and
resumes on the second, so it reacts to speech over it faster than the
minimum that keeps coughs out of the conversation.
"""

from __future__ import annotations

from dataclasses import dataclass

# A frame the VAD scores below this holds no speech: it measures the background
# the assistant talks over, and teaches the echo gate the echo path.
NO_SPEECH_BELOW = 0.3


@dataclass(frozen=True)
class EndpointConfig:
    threshold: float = 0.5
    min_speech_s: float = 0.192  # six 32 ms frames
    hangover_s: float = 0.5
    preroll_s: float = 0.3  # audio kept before the onset for the ASR
    start_gap_s: float = 0.3  # silence that resets a not yet confirmed start
    onset_s: float = 0.096  # three frames: early notice of a possible start


@dataclass(frozen=True)
class SpeechOnset:
    onset: float  # where the voiced frames began
    t: float  # when ``onset_s`` of them had been heard


@dataclass(frozen=True)
class OnsetDropped:
    t: float  # the voiced frames since the last SpeechOnset did not become speech


@dataclass(frozen=True)
class SpeechStart:
    onset: float  # where speech began
    t: float  # when that was confirmed


@dataclass(frozen=True)
class SpeechEnd:
    end: float  # where speech ended
    t: float  # when the hangover confirmed it


Edge = SpeechOnset | OnsetDropped | SpeechStart | SpeechEnd


class Endpointer:
    def __init__(self, config: EndpointConfig, frame_s: float) -> None:
        self.config = config
        self.frame_s = frame_s
        self.in_speech = False
        self._run_start: float | None = None  # first voiced frame of a start being confirmed
        self._voiced_s = 0.0  # voiced time heard since _run_start
        self._last_voiced_end = 0.0
        self.silence_s = 0.0  # trailing silence in the current utterance
        self._noticed = False  # a SpeechOnset was given for the start being confirmed

    @property
    def pending_onset(self) -> float | None:
        """First voiced frame of a start not confirmed yet (None when there is none)."""
        return None if self.in_speech else self._run_start

    @property
    def last_voiced_end(self) -> float:
        """End of the last voiced frame (in an utterance: where its speech so far ends)."""
        return self._last_voiced_end

    def push(self, prob: float, t: float) -> Edge | None:
        """One frame that spans ``t .. t + frame_s``."""
        cfg = self.config
        end_t = t + self.frame_s
        if not self.in_speech:
            if prob >= cfg.threshold:
                if self._run_start is None:
                    self._run_start = t
                    self._voiced_s = 0.0
                self._voiced_s += self.frame_s
                self._last_voiced_end = end_t
                if self._voiced_s >= cfg.min_speech_s - 1e-9:
                    self.in_speech = True
                    self.silence_s = 0.0
                    self._noticed = False
                    return SpeechStart(self._run_start, end_t)
                if not self._noticed and self._voiced_s >= cfg.onset_s - 1e-9:
                    self._noticed = True
                    return SpeechOnset(self._run_start, end_t)
            elif self._run_start is not None and end_t - self._last_voiced_end > cfg.start_gap_s + 1e-9:
                self._run_start = None
                if self._noticed:
                    self._noticed = False
                    return OnsetDropped(end_t)
            return None
        if prob >= cfg.threshold - 0.15:
            self._last_voiced_end = end_t
            self.silence_s = 0.0
            return None
        self.silence_s = end_t - self._last_voiced_end
        if self.silence_s >= cfg.hangover_s - 1e-9:
            self.in_speech = False
            self._run_start = None
            return SpeechEnd(self._last_voiced_end, end_t)
        return None

    def end_now(self, t: float) -> SpeechEnd | None:
        """End the utterance in progress at ``t``, before its hangover (an end-of-turn model
        decided the turn is over): the next voiced frames start a new utterance, with a new
        minimum. None when no utterance is in progress."""
        if not self.in_speech:
            return None
        self.in_speech = False
        self._run_start = None
        self.silence_s = 0.0
        return SpeechEnd(self._last_voiced_end, t)


def speech_run_start(probabilities: list[float], threshold: float, max_gap: int = 2) -> int:
    """Index of the first frame of the run of speech that ends ``probabilities``.

    The run may hold gaps of up to ``max_gap`` frames under ``threshold`` (the
    short dips between words); it ends before a longer one. ``len(probabilities)``
    when the last frames are not speech: no run ends there.
    """
    start, gap = len(probabilities), 0
    for i in range(len(probabilities) - 1, -1, -1):
        if probabilities[i] >= threshold:
            start, gap = i, 0
        elif start == len(probabilities) or (gap := gap + 1) > max_gap:
            break
    return start
