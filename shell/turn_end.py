"""End of turn: the engine work behind the decision that the person has finished.

The hearing front end (``core/hearing.py``) decides; this stage asks the
engines what it needs to: Smart Turn on the utterance's audio
(:meth:`TurnEnd.check`), and the LLM's reading of a pause's words, whether the
sentence ends there (:meth:`TurnEnd.weigh`). What they answer goes back to the
front end, and a turn it then ends goes on as heard.
"""

from __future__ import annotations

from collections.abc import Callable

from core.end_of_turn import CheckEndOfTurn, sentence_end_probability
from core.events import EndOfTurnCheck, EndOfTurnText, Event
from core.hearing import Heard, Hearing
from shell.clock import Clock
from shell.engines import Engines
from shell.heard_audio import HeardAudio
from shell.work import Serves, Work


class TurnEnd:
    """Smart Turn and the LLM's reading, for the hearing front end's end-of-turn decision."""

    def __init__(
        self,
        engines: Engines,
        clock: Clock,
        hearing: Hearing,
        audio: HeardAudio,
        work: Work,
        emit: Callable[[Event], None],
        error: Callable[[str, str], None],
        heard: Callable[[Heard], None],
    ) -> None:
        """``heard``: where a turn the front end ends goes (the session's ``_heard``)."""
        self.engines = engines
        self.clock = clock
        self._hearing = hearing
        self._audio = audio
        self._work = work
        self._emit = emit
        self._error = error
        self._heard = heard
        self._reading: tuple[str, float] | None = None  # the LLM's last reading of a pause's words: (prompt, P(ends))

    async def check(self, cmd: CheckEndOfTurn, utterance: int) -> None:
        """Is the utterance so far a finished turn? Smart Turn on its audio, on its own thread.
        A failure is reported and leaves the pause to silence (the max wait): the turn is kept."""
        audio = self._audio.utterance(cmd.onset, cmd.until, for_asr=False)  # the pauses as they were: they are its cue
        probability: float | None = None
        try:
            probability = await self._work.in_thread(
                Serves.DECISION, self.engines.turn_executor, self.engines.smart_turn.probability, audio
            )
        except Exception as e:
            self._error("end_of_turn", repr(e))
        now = self.clock.now()
        checked = self._hearing.turn_checked(cmd, probability, now)
        self._emit(
            EndOfTurnCheck(
                now,
                utterance=utterance,
                probability=probability,
                silence_s=cmd.until - cmd.end,
                decision=checked.decision,
                trails_off=checked.trails_off,
            )
        )
        if checked.ended is not None:
            self._heard(checked.ended)

    async def weigh(self, utterance: int, text: str, end: float, speculate: Callable[[], None]) -> None:
        """A transcript of a pause (its closing partial, then its early final), to the end-of-turn
        decision: does the sentence end there? The LLM's next-token probabilities of the words as
        plain text say (one short prefill, before the speculative reply ``speculate`` starts; the
        same words read again are not asked again); a failure leaves it to the sound."""
        hears = self._hearing.end_of_turn
        wants = hears is not None and hears.wants_transcript(end)
        prompt = hears.reading(text, end) if hears is not None else None
        # The reading runs alone, then the reply. In real time too: batched with the reply's
        # prefill, the one step of the reading took 476 ms against 129 alone (the default model,
        # voice.bench trace, docs/bench/turn-taking.md), and the endpoint waited for it. In lockstep
        # it must besides: a request's logprobs in vLLM depend on what it is batched with.
        sentence_end: float | None = None
        if prompt is not None:
            if self._reading is not None and self._reading[0] == prompt:
                sentence_end = self._reading[1]  # the early final heard what the closing partial did
            else:
                try:
                    read = self._work.call(Serves.DECISION, self.engines.llm.next_token_probabilities, prompt)
                    top = await read
                    sentence_end = sentence_end_probability(top)
                    self._reading = (prompt, sentence_end)
                except Exception as e:
                    self._error("end_of_turn_text", repr(e))
        speculate()
        if not wants:
            return
        weighed = self._hearing.transcript(text, end, self.clock.now(), sentence_end)
        if weighed is None:
            return  # the person spoke on: it no longer describes this pause
        self._emit(
            EndOfTurnText(
                self.clock.now(),
                utterance=utterance,
                text=text,
                sentence_end=sentence_end,
                unfinished=weighed.unfinished,
                ended=weighed.ended is not None,
            )
        )
        if weighed.ended is not None:
            self._heard(weighed.ended)
