"""The end of the person's turn, by what was said as well as by silence (pure).

By silence alone (``--turn-detector silence``), ``EndpointConfig.hangover_s``
(0.5 s) of it ends every turn, long enough to add half a second to each reply
and short enough to cut off a person who pauses mid-sentence. :class:`EndOfTurn`
asks an end-of-turn model (Smart Turn, ``asr/smart_turn.py``, 70-100 ms a call
on this CPU) once the VAD has heard a short silence whether the utterance so
far is a finished turn, and ends it at once if so; if not, it keeps listening
(with ``recheck_s``, asking again as the silence grows), and ends the turn
after ``max_wait_s`` of silence whatever the model says.

The words weigh in too. A transcript of the pause (the session's early final)
that trails off on a conjunction ("and", "but", "so"), an article, a filler
or a number being dictated weighs the model's probability down. And the LLM
reads it as plain text: when the probability that the sentence ends right
there (its next token is ``.``, ``?`` or ``!``) is below ``min_sentence_end``,
the words are unfinished ("Not at this particular": 0.000) and overrule the
model's "finished" for the pause. The model hears a finished sound in some
cut sentences (0.95 after "Not at this particular" on a shared recording),
which no threshold on its answer alone can tell from a finished turn; the
two together can; and when the model is unsure (0.5-0.85), the words must
read finished as well, not merely not unfinished (``sure_threshold``). With
``transcripts=True`` (the caller gives a transcript of
each pause), a "finished" that comes before the transcript waits for it, up
to ``transcript_wait_s``.

It reads no clock and runs no model: the caller feeds it the hearing front
end's frames (``SpeechStart``, ``SpeechContinues``, ``SpeechPaused`` from
``core/hearing.py``) with times on the session's timeline, and carries
out the commands it returns::

    speech_started(onset, t)
    speech_paused(end, silence_s, t)     silence ≥ first_check_s, no check in flight
        ─▶ CheckEndOfTurn(check, onset, end, until)   score audio onset..until
    answer(check, p, t)                  p (weighted) ≥ threshold ─▶ Endpoint("model"),
                                         unless the words are unfinished; or, with
                                         transcripts=True and none yet, hold for it
                                         below: asked again after recheck_s more silence, or
                                         finished_recheck_s once the words read finished enough
    transcript(text, end, t, p_end)      the words of the pause: decide a held "finished"
    speech_paused(...)                   held past transcript_wait_s ─▶ Endpoint("model")
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

Wiring: the hearing front end (``core/hearing.py``, ``Hearing(...,
end_of_turn=config)``) owns one and feeds it every frame; the endpointer's
own hangover becomes ``max_wait_s``, so it ends the turn when the model never
called it finished (and :meth:`EndOfTurn.speech_ended` is called). On an
:class:`Endpoint` the hearing front end leaves the utterance too
(``Endpointer.end_now``), so that the next words start a new one (a
``SpeechStart``): after an endpoint this object ignores the frames of the
utterance it ended. The session (``shell/session.py``) scores the
utterance's audio from its onset (with the pre-roll, as Pipecat keeps 0.5 s
before the speech) to ``until`` with Smart Turn on a thread of its own, gives
the early final transcript to :meth:`EndOfTurn.transcript`, and logs each
answer as an ``end_of_turn_check`` event.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from core.goodbye import is_closing
from core.language import ConversationLanguage
from core.trailing import trails_off
from core.words import words


@dataclass(frozen=True)
class EndOfTurnConfig:
    first_check_s: float = 0.2  # silence before the first check (Pipecat's VAD stop_secs with Smart Turn)
    # Further silence before each next check (None: one check per pause, as Pipecat). One: on the
    # real pipeline, re-checks cut 2 of 6 sentences at a 0.6 s pause and 4 of 6 at 1.0 s, and one
    # check a pause none (the first answer inside a sentence was below 0.5 every time), for the
    # price of max_wait_s on 2 of 8 finished sentences (scripts/bench_endpoint).
    recheck_s: float | None = None
    # When the words of a pause have been read and are finished enough (P(the sentence ends here)
    # at least the next field, nothing trailing off), the model is asked again after this much
    # more silence, and again, until the turn ends. Its answer rises with the silence it hears, on
    # finished speech ("How are you doing?", the demo's recording: 0.43 after 0.22 s of silence,
    # 0.94 after 0.45 s) and on cut speech too, which is why recheck_s is None; here the words
    # guard the cut sentences (all 6 of the endpoint benchmark's pauses read below 0.006 with both
    # bundled models), and an unsure "finished" still needs words that read finished
    # (sure_threshold). None: no such re-check.
    finished_recheck_s: float | None = 0.2
    # ... where the words read at least this (one word always does). Not unfinished is not enough:
    # "in being |", heard "in B.", read 0.061 (SmolLM2), re-asked 0.67 s into a 1.0 s pause: 0.92,
    # cut. voice.bench reading: finished sentences under it 2 of 13 (default model; as under
    # min_sentence_end) and 1 (SmolLM2); words inside sentences over it 9 and 12 of 119 (20, 43).
    finished_recheck_sentence_end: float = 0.1
    max_wait_s: float = 2.0  # silence that ends the turn whatever the model says
    threshold: float = 0.5  # P(finished) at or above which the turn ends (Pipecat's)
    # A transcript that trails off (continuation words, a number) multiplies the
    # model's probability by this: with 0.6 the model must be 0.84 sure.
    continuation_weight: float = 0.6
    # The LLM reads the pause's transcript as plain text: when the probability that the sentence
    # ends right there (its next token is . ? or !) is below this, the words are unfinished ("Not
    # at this particular", "I want to": 0.000) and overrule the model's "finished"; the turn then
    # ends at max_wait_s unless the person goes on. Finished sentences scored 0.05-0.72 on the
    # shared recordings; one-word turns are exempt ("Yes" scores 0.01: the LLM expects more).
    # None: no such check.
    min_sentence_end: float | None = 0.005
    # When transcripts are given (EndOfTurn(..., transcripts=True)), how long a "finished" from the
    # model waits for the pause's transcript to be read before it ends the turn without it.
    transcript_wait_s: float = 0.3
    # The words of the utterance before, when this one began within this many seconds of its
    # end, are read with this one's: a sentence that a pause cut goes on ("... in the middle of
    # the fifteenth century" then "may justly be considered"), and read alone its second half
    # is no sentence at all.
    context_s: float = 3.0
    # Finished words shorten the wait: when the LLM reads P(the sentence ends here) at or above
    # this, the pause ends the turn after finished_wait_s of silence even if the model doubts it
    # ("Lord, but I'm glad to see you again, Phil.": Smart Turn 0.15, the words 0.59; without
    # this it waits max_wait_s). None: only max_wait_s.
    finished_sentence_end: float | None = 0.4
    finished_wait_s: float = 0.8
    # A "finished" the model is not sure of (below sure_threshold) ends the turn only if the words
    # read finished too (P(the sentence ends here) at least doubtful_sentence_end); a sure one
    # needs only that they are not unfinished (min_sentence_end). Inside sentences cut by a pause
    # the model said 0.74 to "in being |" (heard "in B.", the words 0.055) and 0.81 to "... in
    # the middle of the fifteenth century |" (the words 0.26), where finished turns it was unsure
    # of read 0.40-0.56 ("... the two men shook hands.": 0.74 and 0.40). A doubted turn ends after
    # max_wait_s unless the person goes on. None: no such check.
    sure_threshold: float | None = 0.85
    doubtful_sentence_end: float = 0.3
    # Closing words alone ("Thank you", "OK", "Alright, thanks": core/goodbye.py) are often followed
    # by a goodbye after a breath: a "finished" for them ends the turn only once the silence reaches
    # this, so that "Thank you, goodbye." is one turn. None: no such wait.
    closing_wait_s: float | None = 0.8

    def __post_init__(self) -> None:
        if not 0.0 < self.first_check_s < self.max_wait_s:
            raise ValueError("first_check_s must be positive and below max_wait_s")
        if self.recheck_s is not None and self.recheck_s <= 0.0:
            raise ValueError("recheck_s must be positive (None: one check per pause)")
        if self.finished_recheck_s is not None and self.finished_recheck_s <= 0.0:
            raise ValueError("finished_recheck_s must be positive (None: no re-check for read words)")
        if not 0.0 <= self.finished_recheck_sentence_end <= 1.0:
            raise ValueError("finished_recheck_sentence_end must be a probability")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError("threshold must be a probability above 0")
        if self.min_sentence_end is not None and not 0.0 <= self.min_sentence_end <= 1.0:
            raise ValueError("min_sentence_end must be a probability (None: no check)")
        if self.transcript_wait_s < 0.0 or self.context_s < 0.0:
            raise ValueError("transcript_wait_s and context_s must not be negative")
        if self.finished_sentence_end is not None and not 0.0 < self.finished_sentence_end <= 1.0:
            raise ValueError("finished_sentence_end must be a probability above 0 (None: no shorter wait)")
        if self.finished_wait_s <= 0.0:  # past max_wait_s it is moot: max_wait_s comes first
            raise ValueError("finished_wait_s must be positive")
        if self.sure_threshold is not None and not 0.0 <= self.sure_threshold <= 1.0:  # at or below threshold: moot
            raise ValueError("sure_threshold must be a probability (None: no such check)")
        if not 0.0 <= self.doubtful_sentence_end <= 1.0:
            raise ValueError("doubtful_sentence_end must be a probability")


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
    # the model said finished; the words read finished and the silence reached finished_wait_s;
    # the silence reached max_wait_s
    reason: Literal["model", "words", "max_wait"]
    probability: float | None  # the model's last answer for this pause (None: none came)
    trails_off: bool  # the transcript ended on a continuation word or a number
    sentence_end: float | None = None  # the LLM's P(the sentence ends here) for the transcript (None: none)


EndOfTurnCommand = CheckEndOfTurn | Endpoint


# A token that ends a sentence, as the LLM's tokenizer spells it (with its leading space, if any).
_SENTENCE_END_TOKEN = re.compile(r"\s*[.?!\u2026]+[\"')\]]*\s*")


def completion_prompt(text: str) -> str:
    """``text`` as the prompt for "does the sentence end here": plain text (no chat template,
    whose end-of-message token the LLM rarely predicts after unpunctuated words), its first
    letter upper-cased, and Whisper's closing punctuation dropped (Whisper ends a cut sentence
    with a period too: "Not at this particular.")."""
    text = re.sub(r"[\s.,;:!?\u2026\"'-]+$", "", text.strip())
    return text[:1].upper() + text[1:]


def sentence_end_probability(next_tokens: Mapping[str, float]) -> float:
    """P(the sentence ends here), from the LLM's most likely next tokens and their probabilities
    (the top 20 are plenty: a token that is not among them is too unlikely to count)."""
    return min(1.0, sum(p for token, p in next_tokens.items() if _SENTENCE_END_TOKEN.fullmatch(token)))


class EndOfTurn:
    """One session's end-of-turn decisions, utterance by utterance."""

    def __init__(self, config: EndOfTurnConfig | None = None, transcripts: bool = False) -> None:
        """``transcripts``: the caller gives a transcript of each pause (:meth:`transcript`; the
        session's early final): the model's "finished" then waits up to ``transcript_wait_s`` for
        it, so that the words can overrule it."""
        self.config = config or EndOfTurnConfig()
        self.transcripts = transcripts
        # What the transcripts are read in: the conversation's language (the shell shares the conversation's).
        self.language = ConversationLanguage()
        self._checks = 0  # checks asked so far (their ids), over every utterance
        self._speaking = False  # an utterance is in progress and has not been ended
        self._onset = 0.0
        self._end = 0.0  # where the speech of the current pause ended
        self._pending: int | None = None  # the check in flight
        self._next_check_s = self.config.first_check_s  # silence at which the next check falls due
        self._checked_s = 0.0  # the silence the last check of this pause heard
        self._probability: float | None = None  # the model's last answer in this pause
        self._text: str | None = None  # a transcript of the speech up to _end
        self._sentence_end: float | None = None  # the LLM's P(the sentence ends here) for _text
        self._finished_at: float | None = None  # when the model said finished, awaiting the transcript
        self._closing_finished = False  # the model said finished to closing words: see closing_wait_s
        self._said: tuple[str, float] | None = None  # the last utterance's words and where it ended
        self._context = ""  # the words before this utterance, read with its own (see context_s)

    @property
    def pending(self) -> int | None:
        """The check in flight (None: none)."""
        return self._pending

    def speech_started(self, onset: float, t: float) -> list[EndOfTurnCommand]:
        """An utterance begins at ``onset`` (the endpointer confirmed it at ``t``)."""
        said, self._said = self._said, None
        self._context = said[0] if said is not None and onset - said[1] <= self.config.context_s else ""
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
        if silence_s >= cfg.finished_wait_s - 1e-9 and self.finished_words and not self._awaits_goodbye(silence_s):
            return self._endpoint(t, "words")
        if self._closing_finished and not self._awaits_goodbye(silence_s):
            return self._endpoint(t, "model")
        if self._finished_at is not None:  # the model said finished; its transcript is late
            if t - self._finished_at >= cfg.transcript_wait_s - 1e-9:
                return self._endpoint(t, "model")
            return []
        if self._pending is not None or not self._check_due(silence_s):
            return []
        self._checks += 1
        self._pending = self._checks
        self._checked_s = silence_s
        self._next_check_s = silence_s + cfg.recheck_s if cfg.recheck_s is not None else None
        return [CheckEndOfTurn(self._pending, self._onset, end, end + silence_s)]

    def _check_due(self, silence_s: float) -> bool:
        """Whether the model is to be asked about this pause now, ``silence_s`` into it: on its
        schedule (``first_check_s``, ``recheck_s``), or again because its words read finished enough
        (``finished_recheck_s``)."""
        if self._next_check_s is not None:
            return silence_s >= self._next_check_s - 1e-9
        again = self.config.finished_recheck_s
        return (
            again is not None
            and self._probability is not None  # asked once already, and it said wait
            and self._reads_finished_enough()
            and not self._trails_off()
            and silence_s >= self._checked_s + again - 1e-9
        )

    def _reads_finished_enough(self) -> bool:
        """Whether the words of this pause read finished enough to ask the model again
        (``finished_recheck_sentence_end``, never under ``min_sentence_end``)."""
        if self._sentence_end is None or self._text is None or self.unfinished_words:
            return False
        return self._one_word or self._sentence_end >= self.config.finished_recheck_sentence_end

    @property
    def _one_word(self) -> bool:
        """Whether the words of this pause (and the utterance's before) are one: never unfinished."""
        return len(words(f"{self._context} {self._text or ''}", compounds=False)) <= 1

    def transcript(
        self, text: str, end: float, t: float, sentence_end: float | None = None
    ) -> list[EndOfTurnCommand] | None:
        """A transcript of the utterance's speech up to ``end`` (the early final), read at ``t``,
        with the LLM's ``sentence_end`` probability for it (None: not asked). It counts for the
        current pause only if it covers all its speech (``end`` at or after where the speech
        stopped); then the commands it decides (the endpoint, if the model had said finished and
        the words do not overrule it), else None. It only ever holds a turn open."""
        if not self.wants_transcript(end):
            return None
        self._text, self._sentence_end = text, sentence_end
        if self._finished_at is None:
            return []
        self._finished_at = None
        return self._decide(t)

    def completion_prompt(self, text: str) -> str:
        """What the LLM reads for the transcript ``text`` of this utterance: the words of the
        one just before it too, if it began soon after that one ended (see ``context_s``)."""
        return completion_prompt(f"{self._context} {text}")

    def reading(self, text: str, end: float) -> str | None:
        """The prompt for the LLM's reading of ``text``, the transcript of the speech up to
        ``end``; None when no reading is needed: the transcript would not count, the reading is
        off (``min_sentence_end`` None), or it is one word (never unfinished)."""
        prompt = self.completion_prompt(text)
        one_word = len(words(prompt, compounds=False)) < 2
        if self.config.min_sentence_end is None or not self.wants_transcript(end) or one_word:
            return None
        return prompt

    def wants_transcript(self, end: float) -> bool:
        """Whether a transcript of the speech up to ``end`` would count (see :meth:`transcript`)."""
        return self._speaking and end >= self._end - 1e-9

    def answer(self, check: int, probability: float, t: float) -> list[EndOfTurnCommand]:
        """The model's probability that the turn is finished, for ``check``, at ``t``."""
        if check != self._pending or not self._speaking:
            return []  # stale: the person went on speaking, or the utterance has ended
        self._pending = None
        self._probability = probability
        if probability < self.config.threshold:
            return []
        if self._text is None and self.transcripts:
            self._finished_at = t  # finished, by the sound of it: hear what the words say first
            return []
        return self._decide(t)

    @property
    def holding(self) -> bool:
        """The model said finished; the pause's transcript is awaited before the turn ends."""
        return self._finished_at is not None

    def _decide(self, t: float) -> list[EndOfTurnCommand]:
        """The model said finished: the endpoint, unless the transcript says otherwise."""
        weighted = self._weighted()
        assert weighted is not None
        if weighted < self.config.threshold or self.unfinished_words or self._doubted(weighted):
            return []  # max_wait_s ends it, unless the person goes on
        if self._awaits_goodbye(t - self._end):
            self._closing_finished = True  # finished, but a goodbye may come after the breath
            return []
        return self._endpoint(t, "model")

    def _awaits_goodbye(self, silence_s: float) -> bool:
        """Whether the words so far are closing words alone and the silence after them is still
        shorter than ``closing_wait_s``: a goodbye may yet follow."""
        wait = self.config.closing_wait_s
        return (
            wait is not None
            and silence_s < wait - 1e-9
            and self._text is not None
            and is_closing(self._text, self.language.current)
        )

    def failed(self, check: int, t: float) -> list[EndOfTurnCommand]:
        """The model raised on ``check``: this pause falls back to silence (no more checks in it;
        ``max_wait_s`` ends the turn), so a broken model costs one error a pause, never the turn.
        The next pause is checked again."""
        if check == self._pending:
            self._pending = None
            self._next_check_s = None
            self._checked_s = float("inf")  # nor a re-check for its words
        return []

    def speech_ended(self, t: float) -> list[EndOfTurnCommand]:
        """The utterance ended some other way (the endpointer's hangover, the session's end):
        answers still in flight are ignored."""
        if self._speaking:
            self._remember()
        self._speaking = False
        self._pending = None
        self._finished_at = None
        self._closing_finished = False
        return []

    @property
    def trails_off(self) -> bool:
        """Whether the transcript of this pause (if any came) trails off: it weighs the model's answer down."""
        return self._trails_off()

    @property
    def unfinished_words(self) -> bool:
        """Whether the LLM read the transcript of this pause as an unfinished sentence: it
        overrules the model's "finished"."""
        floor = self.config.min_sentence_end
        return (
            floor is not None
            and self._sentence_end is not None
            and self._sentence_end < floor
            and self._text is not None
            and not self._one_word
        )

    def _weighted(self) -> float | None:
        """The model's last answer in this pause, weighed down if the words trail off (None: none)."""
        if self._probability is None:
            return None
        return self._probability * (self.config.continuation_weight if self._trails_off() else 1.0)

    def _doubted(self, weighted: float) -> bool:
        """Whether the model's "finished" (``weighted``) is too unsure for words that read only
        half finished (see ``sure_threshold``)."""
        sure = self.config.sure_threshold
        return (
            sure is not None
            and weighted < sure
            and self._sentence_end is not None
            and self._sentence_end < self.config.doubtful_sentence_end
        )

    @property
    def words_hold(self) -> bool:
        """Whether the words of this pause hold the turn open against the model's answer so far:
        unfinished, trailing off, or too doubtful for how sure the model was."""
        weighted = self._weighted()
        doubted = weighted is not None and weighted >= self.config.threshold and self._doubted(weighted)
        return self.unfinished_words or self._trails_off() or doubted

    def _remember(self) -> None:
        """The utterance ends: keep its words for the next one's reading."""
        words = f"{self._context} {self._text or ''}".strip()
        self._said = (words, self._end) if words else None

    @property
    def finished_words(self) -> bool:
        """Whether the LLM read the transcript of this pause as a finished sentence, sure enough
        to end the turn after ``finished_wait_s`` of silence whatever the model says."""
        floor = self.config.finished_sentence_end
        return (
            floor is not None
            and self._sentence_end is not None
            and self._sentence_end >= floor
            and not self._trails_off()
        )

    def _trails_off(self) -> bool:
        return self._text is not None and trails_off(self._text, self.language.current)

    def _new_pause(self) -> None:
        self._pending = None  # its answer, when it comes, is stale
        self._next_check_s = self.config.first_check_s
        self._checked_s = 0.0
        self._probability = None
        self._text = None
        self._sentence_end = None
        self._finished_at = None
        self._closing_finished = False

    def _endpoint(self, t: float, reason: Literal["model", "words", "max_wait"]) -> list[EndOfTurnCommand]:
        self._remember()
        self._speaking = False
        self._pending = None
        self._finished_at = None
        self._closing_finished = False
        return [Endpoint(self._end, t, reason, self._probability, self._trails_off(), self._sentence_end)]
