"""What the person heard of each reply, stored as its turn.

A reply that plays to its end is stored as spoken; one cut by a barge-in (or a stop button,
or the end of the conversation) as far as it was heard before the pause: the words whose audio
had mostly played (:meth:`~core.ledger.PlaybackLedger.heard_text`). A client may say
later that it played less of a finished reply (OpenAI's item truncate): its turn is shortened
to the words heard by then, or removed if none was. Truncation only ever shortens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.commands import CancelResponse, Command, Emit, StopTools
from core.events import BargeIn, BargeInReason, PlaybackEnd, PlaybackStopped, Truncate, TurnEnd
from core.history import History, Turn
from core.ledger import PlaybackLedger
from core.reply import Hold, Reply

# Finished replies whose ledgers are kept, the latest: a client may truncate one after it ended.
KEPT_REPLIES = 8


class HeardReplies:
    """The replies of one conversation as far as they were heard, stored in ``history``."""

    def __init__(self, history: History, output_rate: int) -> None:
        self.history = history
        self.output_rate = output_rate
        # What an assistant turn keeps besides its words: in an agent's flow, the step and state it
        # left the conversation in, where a resumed one goes on (set by the conversation).
        self.extra: Callable[[], dict[str, Any]] = dict
        self._past: dict[int, tuple[PlaybackLedger, Turn | None]] = {}  # recent replies: ledger, stored turn

    def cut(self, r: Reply, hold: Hold, t: float, reason: BargeInReason) -> list[Command]:
        """Cut ``r`` to what was heard before the pause ``hold``, and stop everything else. Nothing
        of it was heard where the person went on before it made a sound (its first word under theirs)."""
        played = 0 if hold.went_on else hold.played_out(r.ledger)
        heard = r.ledger.heard_text(played)
        audio_end_ms = round(played * 1000 / self.output_rate)
        r.tool.calls.discard()  # a call still streaming never runs
        out: list[Command] = [
            Emit(
                BargeIn(
                    t, response=r.id, utterance=hold.utterance, reason=reason, paused_at=hold.paused_at, tokens=r.tokens
                )
            ),
            CancelResponse(r.id),
            *([StopTools(r.id)] if r.tool.running else []),
            Emit(PlaybackStopped(t, response=r.id)),
            Emit(Truncate(t, response=r.id, audio_end_ms=audio_end_ms, text=heard)),
        ]
        turn = None
        if heard:
            turn = self.history.add(
                Turn(
                    "assistant",
                    heard,
                    t_start=r.playback_started_at,
                    t_end=hold.paused_at,
                    generated_text=r.generated,
                    interrupted=True,
                    response=r.id,
                    extra=self.extra(),
                )
            )
        out.append(Emit(TurnEnd(t, response=r.id, text=heard, interrupted=True)))
        self._remember(r, turn)
        return out

    def finished(self, r: Reply, t: float) -> list[Command]:
        """``r`` was generated, synthesized and played to its end at ``t``: stored as spoken."""
        out: list[Command] = []
        if r.playback_started_at is not None:
            out.append(Emit(PlaybackEnd(t, response=r.id)))
        spoken = r.ledger.spoken_text()
        turn = None
        if spoken:
            turn = self.history.add(
                Turn(
                    "assistant",
                    spoken,
                    t_start=r.playback_started_at,
                    t_end=t,
                    generated_text=r.generated,
                    response=r.id,
                    extra=self.extra(),
                )
            )
        out.append(Emit(TurnEnd(t, response=r.id, text=spoken)))
        self._remember(r, turn)
        return out

    def text(self, response: int) -> str:
        """The stored turn's text of reply ``response`` ("": none, or none stored)."""
        past = self._past.get(response)
        return past[1].text if past and past[1] else ""

    def truncate(self, response: int, audio_end_ms: int, t: float) -> tuple[list[Command], str | None]:
        """The client played only the first ``audio_end_ms`` of the finished reply ``response``:
        its turn is shortened to the words heard by then, or removed if none was. Returns the
        commands and the turn's text now (None: no such response)."""
        past = self._past.get(response)
        if past is None:
            return [], None
        ledger, turn = past
        if turn is None:
            return [], ""
        samples = max(0, round(audio_end_ms * self.output_rate / 1000))
        heard = ledger.heard_text(min(samples, ledger.queued))
        # Counted in the TTS's words (the ledger's, whitespace-separated), not in transcript words.
        if len(heard.split()) >= len(turn.text.split()):
            return [], turn.text
        out: list[Command] = [Emit(Truncate(t, response=response, audio_end_ms=audio_end_ms, text=heard))]
        if heard:
            turn.text, turn.interrupted = heard, True
            self.history.changed(turn)
        else:
            self.history.remove(turn)
            self._past[response] = (ledger, None)
        return out, heard

    def _remember(self, r: Reply, turn: Turn | None) -> None:
        self._past[r.id] = (r.ledger, turn)
        while len(self._past) > KEPT_REPLIES:
            self._past.pop(next(iter(self._past)))
