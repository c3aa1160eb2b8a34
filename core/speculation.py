"""Speculation: the reply started before the endpoint.

The final pass starts in the silence before the endpoint (the
early final, ``early_final_s``); with a ``speculation`` budget, its transcript
also starts the reply there and then: the LLM request
(``StartResponse(speculative=True)``) and the synthesis of the first chunk,
whose audio the session holds back. Until the endpoint the speculative reply
is no reply: the person still holds the floor, nothing of it is played, none
of its events but ``speculative_start`` is emitted, and speech over it cannot
pause or cut it. It can start earlier, on the pause's closing partial (the
partial model's words for all the speech before the pause,
:meth:`~core.turns.Conversation.closing_partial`): the early final then keeps it if it
hears the same words, case and punctuation aside, else starts it again on its
own. Then:

* the endpoint on the words it was started on (and on the same
  conversation): it is committed (``CommitSpeculation``): the person's turn
  is stored, ``response_start`` and the events it held back are emitted with
  the endpoint's time, and its audio plays at once;
* the person goes on speaking past the audio the early final heard, the
  transcript at the endpoint differs, or its request fails: it is discarded
  (``DiscardSpeculation``): the request is aborted in the engine, what was
  synthesized dropped, nothing stored, and ``speculative_discard`` says how
  many tokens went for nothing. The next early final may start another.

At most one speculative reply per session, and only while no reply is in
flight; the budget, shared by the sessions on one set of engines, caps them
over all sessions (past it the reply starts at the endpoint, as without).

:class:`Speculation` holds the speculative reply and the budget it draws on; when one may
start, and what becomes of it at the endpoint, is the person's turn's to say
(:class:`~core.answer.Answering`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.budget import Budget
from core.commands import Command, CommitSpeculation, DiscardSpeculation, Emit, StartResponse
from core.events import (
    DiscardReason,
    LlmDone,
    LlmFirstToken,
    ResponseStart,
    SpeculativeCommit,
    SpeculativeDiscard,
    SpeculativeStart,
    TtsChunk,
)
from core.language import Detected
from core.reply import Reply


@dataclass
class EarlyFinal:
    """A final pass started in the silence before the endpoint, on speech up to ``end``."""

    utterance: int
    end: float
    text: str | None = None  # None while it runs
    no_speech_prob: float = 0.0
    heard: Detected | None = None  # the language Whisper heard it in (None: not detected)
    stale: bool = False  # the person went on speaking: its audio is not the whole utterance
    ended: bool = False  # the endpoint came while it ran: its answer is the final


class Speculation:
    """One conversation's speculative reply (at most one), drawn on the shared ``budget``
    (None: never speculate)."""

    def __init__(self, budget: Budget | None) -> None:
        self.budget = budget
        self.reply: Reply | None = None  # started before the endpoint, not committed

    def allowed(self, text: str) -> bool:
        """Whether a speculative reply to ``text`` may start, as far as speculation goes: the
        budget has room and none is in flight (the floor is the conversation's to check)."""
        return self.budget is not None and self.budget.available and bool(text) and self.reply is None

    def start(
        self, r: Reply, utterance: int, end: float, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> list[Command]:
        """Start ``r``, the reply to the speech of ``utterance`` up to ``end``, before the endpoint."""
        assert self.budget is not None
        self.budget.take()
        self.reply = r
        r.speculative, r.utterance, r.end, r.messages = True, utterance, end, messages
        return [
            Emit(SpeculativeStart(r.started, response=r.id, utterance=utterance, text=r.user_text)),
            StartResponse(r.id, r.messages, speculative=True, tools=tools),
        ]

    def commit(self, t: float) -> list[Command]:
        """The endpoint came on the words it was started on: the reply is the reply from ``t`` on.
        Its events so far are emitted now: to the observers its latency counts from the endpoint."""
        r = self.reply
        assert r is not None
        self._release()
        r.speculative, r.started = False, t
        out: list[Command] = [
            Emit(SpeculativeCommit(t, response=r.id, utterance=r.utterance, ready=bool(r.ready), tokens=r.tokens)),
            Emit(ResponseStart(t, response=r.id, utterance=r.utterance, text=r.user_text)),
            CommitSpeculation(r.id),
        ]
        if r.first_token_at is not None:
            out.append(Emit(LlmFirstToken(t, response=r.id)))
        out += [Emit(TtsChunk(t, response=r.id, chunk=c, text=r.chunk_texts[c])) for c in r.ready]
        held, r.held = r.held, []
        if r.llm_done:
            out.append(Emit(LlmDone(t, response=r.id, tokens=r.tokens, error=r.error)))
        return out + r.synthesize(held)

    def discard(self, t: float, reason: DiscardReason) -> list[Command]:
        """Drop the speculative reply, unheard and unstored (none: nothing to do)."""
        r = self.reply
        if r is None:
            return []
        self._release()
        return [
            DiscardSpeculation(r.id),
            Emit(SpeculativeDiscard(t, response=r.id, utterance=r.utterance, reason=reason, tokens=r.tokens)),
        ]

    def _release(self) -> None:
        self.reply = None
        if self.budget is not None:
            self.budget.release()
