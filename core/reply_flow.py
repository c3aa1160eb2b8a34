"""The reply's course: from its LLM request to its last sample played.

The model's words are grouped into chunks for the TTS as they stream, the audio is queued,
and what the speaker plays is counted; the reply ends, and the floor is free, once the model
is done, every chunk is synthesized and all of it was played, and not while speech over it is
judged. A speculative reply (:mod:`core.speculation`) runs the same course but holds
back its events until its commit. Said unasked (a timer that went off), an announcement is a
reply like any other, started once the floor is free. This is the assistant's half of the
conversation, kept apart from the person's (:mod:`core.answer`) and from speech over
the reply (:mod:`core.over_reply`), which only pause it, cut it, or let it end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.commands import Command, Emit, Summarize
from core.events import LlmDone, LlmFirstToken, PlaybackStart, ResponseStart, ToolCallEnd, TtsChunk
from core.floor import Floor, State
from core.history import ToolStatus, ToolUse, Turn
from core.hold_sound import hold_due
from core.ledger import Word
from core.reply import Reply
from core.reply_length import ReplyLength, ends_sentence
from core.sentences import SentenceGrouper
from core.speculation import Speculation
from core.steps import Steps
from core.summary import summary_request, summary_text, wants_summaries
from core.tool_calls import ToolCall, ToolCallDelta
from core.tool_rounds import ToolRounds
from core.truncation import HeardReplies


class ReplyFlow:
    """The course of one conversation's replies (see the module's docstring)."""

    def __init__(
        self,
        floor: Floor,
        spec: Speculation,
        tool_rounds: ToolRounds,
        heard_replies: HeardReplies,
        output_rate: int,
        first_phrase_min_words: int | None,
        length: ReplyLength | None = None,
    ) -> None:
        """``length``: how much of a reply is said (None: all of it)."""
        self.floor = floor
        self.length = length or ReplyLength(max_sentences=None)
        self.spec = spec
        self.tool_rounds = tool_rounds
        self.steps = Steps(tool_rounds, floor.history)
        self.heard_replies = heard_replies
        self.output_rate = output_rate
        # The first chunk may end before a conjunction once it has this many words (None: never).
        self.first_phrase_min_words = first_phrase_min_words
        self.announcements: list[str] = []  # to say unasked once the floor is free (announce())
        self._response_ids = 0
        # Answers the finals that waited for the reply to end: the person's turn, set by the conversation.
        self.answer: Callable[[int, str, float, float, float], list[Command]] = lambda *final: []

    def current(self, response: int) -> Reply | None:
        """Reply ``response`` if it is in flight, or the speculative one (None: neither)."""
        for r in (self.floor.response, self.spec.reply):
            if r is not None and r.id == response:
                return r
        return None

    def new_response(self, text: str, t: float) -> Reply:
        """A new reply to ``text``, numbered after the last."""
        self._response_ids += 1
        phrase = self.first_phrase_min_words
        grouper = SentenceGrouper(first_phrase_min_words=phrase if phrase is not None else 1 << 30)
        language = self.floor.language.current
        r = Reply(self._response_ids, text, t, grouper, language=language.code)
        r.sentences_left = self.length.sentences_for(text, language)
        self.tool_rounds.start(r)
        return r

    def llm_delta(self, response: int, text: str, t: float) -> list[Command]:
        """Words of the model's for reply ``response``: synthesized chunk by chunk."""
        r = self.current(response)
        if r is None:
            return []
        r.tokens += getattr(text, "tokens", 1)
        if not text:
            return []
        out: list[Command] = []
        if r.first_token_at is None:
            r.first_token_at = t
            if not r.speculative:  # else at the commit
                out.append(Emit(LlmFirstToken(t, response=response)))
        if r.tool.round > 0:
            r.tool.since = None  # the answer with the results has begun: nobody waits on tools now
        r.generated += text
        chunks = self.tool_rounds.read_back(r, r.grouper.feed(text))
        r.tool.round_chunks += len(chunks)
        return out + r.synthesize(chunks)

    def llm_tool_call(self, response: int, delta: ToolCallDelta, t: float) -> list[Command]:
        """A piece of a tool call the model is writing: the call goes to its tool once whole."""
        r = self.current(response)
        return [] if r is None else self.tool_rounds.call_delta(r, delta, t)

    def llm_done(self, response: int, t: float, error: str | None) -> list[Command]:
        """The model's generation for reply ``response`` ended (``error``: how it failed)."""
        r = self.current(response)
        if r is None:
            return []
        out = self.tool_rounds.generation_ended(r, t, error)
        if (r.tool.round_calls or r.tool.made_up) and error is None:
            return out + self.tool_rounds.await_results(r, t)
        r.llm_done = True
        r.error = error or None
        if r.tool.round > 0 and error is None:
            out += self.tool_rounds.answer_with_results(r)
        if r.speculative:
            if r.error is not None:  # the endpoint asks again rather than answer with a broken reply
                return self.spec.discard(t, "failed")
            return r.synthesize(self._rest(r))  # llm_done at the commit
        out.append(Emit(LlmDone(t, response=response, tokens=r.tokens, error=r.error)))
        out += r.synthesize(self._rest(r))
        return out + self.maybe_finish(r, t)

    def _rest(self, r: Reply) -> list[str]:
        """The chunks left when the model is done; not the unfinished sentence the token cap cut off
        ("and then the"), once a whole one was said."""
        chunks = r.grouper.flush()
        cap = self.length.token_cap
        if chunks and cap is not None and r.tokens >= cap and r.sentences_said and not ends_sentence(chunks[-1]):
            chunks.pop()
        return chunks

    def tool_finished(
        self,
        response: int,
        call: ToolCall,
        status: ToolStatus,
        result: str,
        duration_s: float,
        t: float,
        ran: bool,
        say: bool = False,
    ) -> list[Command]:
        """A tool call's result: stored as a tool turn; the reply waiting for it goes on. A hook's
        (core/steps.py) that gave nothing, or words to say, is no turn: the model is told nothing."""
        r = self.current(response)
        hook = r is not None and call.id in r.tool.running and bool(r.tool.hook)
        result = result.strip() if hook else result.strip() or "(no result)"
        server = self.tool_rounds.servers.get(call.name, "")
        use = ToolUse(call.id, call.name, call.arguments, status, round(duration_s, 3), server)
        if result and not (hook and say and status == "ok"):
            self.floor.history.add(Turn("tool", result, t_start=t - duration_s, t_end=t, response=response, tool=use))
        end = ToolCallEnd(
            t,
            response=response,
            call_id=call.id,
            name=call.name,
            status=status,
            result=result,
            duration_s=duration_s,
            server=server,
        )
        out: list[Command] = [Emit(end)]
        if r is None or call.id not in r.tool.running:
            return out  # a reply already cut: the result is kept, nobody waits for it
        return out + self.tool_rounds.result(r, call, status, result, ran, t, say)

    def extracted(self, response: int, values: dict[str, Any], t: float) -> list[Command]:
        """What reply ``response``'s extraction found of the step's fields (core/steps.py)."""
        r = self.current(response)
        return [] if r is None else self.steps.extracted(r, values, t)

    def summarized(self, upto: int, text: str) -> None:
        """The model's summary of the history's first ``upto`` turns (core/summary.py): kept ready."""
        if self.tool_rounds.flow is not None:
            self.tool_rounds.flow.prepare_summary(upto, summary_text(text))

    def announce(self, text: str, t: float) -> list[Command]:
        """Say ``text`` unasked: now if the floor is free, else once it is."""
        if text.strip():
            self.announcements.append(text.strip())
        return self.announce_next(t)

    def announce_next(self, t: float) -> list[Command]:
        """The next announcement, if the floor is free."""
        if not self.announcements or not self._floor_free():
            return []
        f = self.floor
        text = self.announcements.pop(0)
        r = f.response = self.new_response("", t)
        r.generated, r.llm_done = text, True
        f.state = State.THINKING
        return [
            Emit(ResponseStart(t, response=r.id, utterance=f.utterance, text="")),
            Emit(LlmDone(t, response=r.id, tokens=0)),
            *r.synthesize(r.grouper.feed(text) + r.grouper.flush()),
        ]

    def _floor_free(self) -> bool:
        """No reply, speculative or not, and the person neither speaking nor waiting for one."""
        f = self.floor
        return f.response is None and self.spec.reply is None and not (f.user_speaking or f.transcribing or f.waiting)

    def open_step(self, t: float) -> list[Command]:
        """The conversation opens in the agent's start step, which has an ``on_enter`` hook: a reply of
        its own runs the hook and says the step's words (core/steps.py), before the person speaks."""
        if not self._floor_free():
            return []  # the person was first: the step is theirs to open
        f = self.floor
        r = f.response = self.new_response("", t)
        f.state = State.THINKING
        return [Emit(ResponseStart(t, response=r.id, utterance=f.utterance, text="")), *self.steps.opened(r, t)]

    def tick(self, t: float) -> list[Command]:
        """Time passes: a filler if the tools keep the reply quiet, then the agent's hold sound
        (core/hold_sound.py); an announcement once the floor is free."""
        r = self.floor.response
        if r is None:
            return self.announce_next(t) if self.announcements else []
        if self.floor.hold is not None:
            return []
        out = self.tool_rounds.filler_due(r, t)
        flow = self.tool_rounds.flow
        if not out and flow is not None and flow.flow.hold is not None:
            out = hold_due(r, t, self.tool_rounds.filler_delay_s, self.output_rate)
        return out

    def tts_audio(
        self, response: int, chunk: int, text: str, n_samples: int, words: list[Word], t: float, first: bool
    ) -> list[Command]:
        """Audio for (part of) a chunk is ready and queued for playback."""
        r = self.current(response)
        if r is None:
            return []
        if n_samples:
            r.ledger.add_chunk(text, n_samples, words)
        if not first:
            return []
        if r.speculative:
            r.ready.append(chunk)  # its tts_chunk at the commit, when its audio is queued for playback
            return []
        return [Emit(TtsChunk(t, response=response, chunk=chunk, text=r.chunk_texts[chunk]))]

    def tts_done(self, response: int, t: float) -> list[Command]:
        """A chunk of reply ``response`` is all synthesized."""
        r = self.current(response)
        if r is None:
            return []
        r.chunks_done += 1
        return self.maybe_finish(r, t)

    def played(self, n_samples: int, t: float) -> list[Command]:
        """``n_samples`` of reply audio were played, the first of them at ``t``."""
        f = self.floor
        r = f.response
        if r is None or n_samples <= 0:
            return []
        out: list[Command] = []
        if r.playback_started_at is None:
            r.playback_started_at = t
            out.append(Emit(PlaybackStart(t, response=r.id)))
        if f.hold is None:
            f.state = State.SPEAKING
        r.ledger.advance(n_samples)
        r.last_played_at = t + n_samples / self.output_rate
        return out + self.maybe_finish(r, t)

    def maybe_finish(self, r: Reply, t: float) -> list[Command]:
        """Reply ``r`` ends if all of it was generated, synthesized and played, and it is not held."""
        f = self.floor
        if f.hold is not None or r.speculative:
            return []  # judged first: resumed, or cut; not the reply yet
        if not (r.llm_done and r.chunks_done == r.chunks_requested and r.ledger.all_played):
            return []
        out = self.heard_replies.finished(r, t)
        flow = self.tool_rounds.flow
        if flow is not None and wants_summaries(flow.flow):  # ready before a step whose context is a summary is entered
            turns = f.history.turns
            out.append(Summarize(len(turns), summary_request(turns)))
        f.response = None
        f.state = f.idle_state()
        if f.waiting:
            out += self.answer(*f.waiting.pop(), t)  # with those before it
        return out
