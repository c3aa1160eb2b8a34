"""The end of the person's turn, by what was said as well as by silence (pure).

By silence alone (``--turn-detector silence``), ``EndpointConfig.hangover_s``
(0.5 s) of it ends every turn, long enough to add half a second to each reply
and short enough to cut off a person who pauses mid-sentence. :class:`EndOfTurn`
asks an end-of-turn model (Smart Turn, ``asr/smart_turn.py``, 70-100 ms a call
on this CPU) once the VAD has heard a short silence whether the utterance so
far is a finished turn, and ends it at once if so; if not, it keeps listening
(with ``recheck_s``, asking again as the silence grows), and ends the turn
after ``max_wait_s`` of silence whatever the model says. A transcript of the utterance that trails off on a conjunction
("and", "but", "so"), an article, a filler or a number being dictated
weighs the model's probability down.

It reads no clock and runs no model: the caller feeds it the hearing front
end's frames (``SpeechStart``, ``SpeechContinues``, ``SpeechPaused`` from
``voice/core/hearing.py``) with times on the session's timeline, and carries
out the commands it returns::

    speech_started(onset, t)
    speech_paused(end, silence_s, t)     silence ≥ first_check_s, no check in flight
        ─▶ CheckEndOfTurn(check, onset, end, until)   score audio onset..until
    answer(check, p, t)                  p (weighted) ≥ threshold ─▶ Endpoint("model")
                                         below: asked again after recheck_s more silence
    failed(check, t)                     the model raised: no more checks in this pause
    speech_paused(...)                   silence ≥ max_wait_s ─▶ Endpoint("max_wait")
    speech_continues(t)                  the person goes on: the check in flight is stale
                                         (its answer is ignored), the schedule restarts
                                         at the next pause

At most one check is in flight: a check that falls due while one runs waits
for its answer. An answer for a check other than the one in flight (asked
before the person went on speaking, or for an utterance since ended) is
ignored.

The model's answer rises with the trailing silence it hears, on unfinished
speech too: on the shared recordings cut mid-sentence, 2 of 9 cuts read as
finished after 0.2 s of silence and 6 of 9 after 0.8 s (scripts/bench_turn,
``silence`` in docs/bench/bench_turn.json). So a re-check says less than the
first check; ``recheck_s=None`` (the default) asks once per pause, as Pipecat
does: on the whole pipeline, re-checks every 0.3 s cut sentences at pauses
that one check a pause kept whole (``scripts/bench_endpoint``,
docs/bench/endpoint.json).

Wiring: the hearing front end (``voice/core/hearing.py``, ``Hearing(...,
end_of_turn=config)``) owns one and feeds it every frame; the endpointer's
own hangover becomes ``max_wait_s``, so it ends the turn when the model never
called it finished (and :meth:`EndOfTurn.speech_ended` is called). On an
:class:`Endpoint` the hearing front end leaves the utterance too
(``Endpointer.end_now``), so that the next words start a new one (a
``SpeechStart``): after an endpoint this object ignores the frames of the
utterance it ended. The session (``voice/shell/session.py``) scores the
utterance's audio from its onset (with the pre-roll, as Pipecat keeps 0.5 s
before the speech) to ``until`` with Smart Turn on a thread of its own, gives
the early final transcript to :meth:`EndOfTurn.transcript`, and logs each
answer as an ``end_of_turn_check`` event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# A transcript whose last word is one of these has not finished its sentence.
CONTINUATION_WORDS = frozenset(
    [
        # conjunctions
        "and",
        "but",
        "or",
        "nor",
        "so",
        "because",
        "cause",
        "if",
        "unless",
        "whether",
        # articles: nothing finished ends on one
        "the",
        "a",
        "an",
        # fillers: still thinking
        "um",
        "uh",
        "er",
        "erm",
    ]
)

NUMBER_WORDS = frozenset(
    [
        "zero",
        "oh",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "sixty",
        "seventy",
        "eighty",
        "ninety",
        "hundred",
        "thousand",
    ]
)


@dataclass(frozen=True)
class EndOfTurnConfig:
    first_check_s: float = 0.2  # silence before the first check (Pipecat's VAD stop_secs with Smart Turn)
    # Further silence before each next check (None: one check per pause, as Pipecat). One: on the
    # real pipeline, re-checks cut 2 of 6 sentences at a 0.6 s pause and 4 of 6 at 1.0 s, and one
    # check a pause none (the first answer inside a sentence was below 0.5 every time), for the
    # price of max_wait_s on 2 of 8 finished sentences (scripts/bench_endpoint).
    recheck_s: float | None = None
    max_wait_s: float = 2.0  # silence that ends the turn whatever the model says
    threshold: float = 0.5  # P(finished) at or above which the turn ends (Pipecat's)
    # A transcript that trails off (continuation words, a number) multiplies the
    # model's probability by this: with 0.6 the model must be 0.84 sure.
    continuation_weight: float = 0.6
    continuation_words: frozenset[str] = CONTINUATION_WORDS

    def __post_init__(self) -> None:
        if not 0.0 < self.first_check_s < self.max_wait_s:
            raise ValueError("first_check_s must be positive and below max_wait_s")
        if self.recheck_s is not None and self.recheck_s <= 0.0:
            raise ValueError("recheck_s must be positive (None: one check per pause)")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError("threshold must be a probability above 0")


@dataclass(frozen=True)
class CheckEndOfTurn:
    """Score the utterance's audio from ``onset`` to ``until`` (seconds on the session's timeline:
    its speech up to ``end``, then silence) with the end-of-turn model, and give the probability
    to :meth:`EndOfTurn.answer` with ``check`` (or call :meth:`EndOfTurn.failed`)."""

    check: int
    onset: float
    end: float
    until: float


@dataclass(frozen=True)
class Endpoint:
    """The person's turn is over: their speech ended at ``end``; decided at ``t``."""

    end: float
    t: float
    reason: Literal["model", "max_wait"]  # the model said finished, or the silence reached max_wait_s
    probability: float | None  # the model's last answer for this pause (None: none came)
    trails_off: bool  # the transcript ended on a continuation word or a number


EndOfTurnCommand = CheckEndOfTurn | Endpoint


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _is_number(word: str) -> bool:
    return word in NUMBER_WORDS or word.isdigit()


def trails_off(text: str, continuation_words: frozenset[str] = CONTINUATION_WORDS) -> bool:
    """Whether ``text`` stops where a sentence goes on: on a continuation word, or in a number
    being dictated (at least two number tokens in a row at the end: "555 12", "five five",
    "twenty one"; a single one, "I'm 25", "in 1961", is left alone)."""
    words = _words(text)
    if not words:
        return False
    return words[-1] in continuation_words or (len(words) > 1 and _is_number(words[-1]) and _is_number(words[-2]))


class EndOfTurn:
    """One session's end-of-turn decisions, utterance by utterance."""

    def __init__(self, config: EndOfTurnConfig | None = None) -> None:
        self.config = config or EndOfTurnConfig()
        self._checks = 0  # checks asked so far (their ids), over every utterance
        self._speaking = False  # an utterance is in progress and has not been ended
        self._onset = 0.0
        self._end = 0.0  # where the speech of the current pause ended
        self._pending: int | None = None  # the check in flight
        self._next_check_s = self.config.first_check_s  # silence at which the next check falls due
        self._probability: float | None = None  # the model's last answer in this pause
        self._text: str | None = None  # a transcript of the speech up to _end

    @property
    def pending(self) -> int | None:
        """The check in flight (None: none)."""
        return self._pending

    def speech_started(self, onset: float, t: float) -> list[EndOfTurnCommand]:
        """An utterance begins at ``onset`` (the endpointer confirmed it at ``t``)."""
        self._speaking = True
        self._onset = onset
        self._end = onset
        self._new_pause()
        return []

    def speech_continues(self, t: float) -> list[EndOfTurnCommand]:
        """A voiced frame inside the utterance, ending at ``t``: the person goes on."""
        if self._speaking:
            self._end = t
            self._new_pause()
        return []

    def speech_paused(self, end: float, silence_s: float, t: float) -> list[EndOfTurnCommand]:
        """A silent frame inside the utterance: speech up to ``end``, then ``silence_s`` of silence."""
        if not self._speaking:
            return []
        cfg = self.config
        if end != self._end:  # the hearing front end saw speech this object was not told about
            self._end = end
            self._new_pause()
        if silence_s >= cfg.max_wait_s - 1e-9:
            return self._endpoint(t, "max_wait")
        if self._pending is not None or self._next_check_s is None or silence_s < self._next_check_s - 1e-9:
            return []
        self._checks += 1
        self._pending = self._checks
        self._next_check_s = silence_s + cfg.recheck_s if cfg.recheck_s is not None else None
        return [CheckEndOfTurn(self._pending, self._onset, end, end + silence_s)]

    def transcript(self, text: str, end: float) -> None:
        """A transcript of the utterance's speech up to ``end`` (an early final, a partial).
        It counts for the current pause only if it covers all its speech (``end`` at or after
        where the speech stopped), and only ever weighs the model's probability down."""
        if self._speaking and end >= self._end - 1e-9:
            self._text = text

    def answer(self, check: int, probability: float, t: float) -> list[EndOfTurnCommand]:
        """The model's probability that the turn is finished, for ``check``, at ``t``."""
        if check != self._pending or not self._speaking:
            return []  # stale: the person went on speaking, or the utterance has ended
        self._pending = None
        self._probability = probability
        weighted = probability * (self.config.continuation_weight if self._trails_off() else 1.0)
        if weighted >= self.config.threshold:
            return self._endpoint(t, "model")
        return []

    def failed(self, check: int, t: float) -> list[EndOfTurnCommand]:
        """The model raised on ``check``: this pause falls back to silence (no more checks in it;
        ``max_wait_s`` ends the turn), so a broken model costs one error a pause, never the turn.
        The next pause is checked again."""
        if check == self._pending:
            self._pending = None
            self._next_check_s = None
        return []

    def speech_ended(self, t: float) -> list[EndOfTurnCommand]:
        """The utterance ended some other way (the endpointer's hangover, the session's end):
        answers still in flight are ignored."""
        self._speaking = False
        self._pending = None
        return []

    @property
    def trails_off(self) -> bool:
        """Whether the transcript of this pause (if any came) trails off: it weighs the model's answer down."""
        return self._trails_off()

    def _trails_off(self) -> bool:
        return self._text is not None and trails_off(self._text, self.config.continuation_words)

    def _new_pause(self) -> None:
        self._pending = None  # its answer, when it comes, is stale
        self._next_check_s = self.config.first_check_s
        self._probability = None
        self._text = None

    def _endpoint(self, t: float, reason: Literal["model", "max_wait"]) -> list[EndOfTurnCommand]:
        self._speaking = False
        self._pending = None
        return [Endpoint(self._end, t, reason, self._probability, self._trails_off())]
