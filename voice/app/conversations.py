"""Which conversation a session goes on with: the resume policy, in one place.

A session asks for a new conversation or a stored one by id. Over the
network (``/ws``'s ``hello.session``, ``/v1/realtime?session=``), an id that
is unknown, another token's, or open in another connection is said (an
error event with a code) and a new conversation is started; a person at the
command line (``--session``) who names one that is not there gets an error
instead. A store that fails is said too, and the conversation is kept in
memory. The store itself is ``voice/app/store.py``.

A new conversation has its id at once (the client is told it) but is written
to the store with its first finalized turn: one in which nothing is said
leaves nothing behind, and its id, resumed, is unknown like any other.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from typing import Any

from core.history import History
from voice.app.store import (
    ConversationStore,
    ForeignSession,
    SessionError,
    StoreError,
    TurnRecorder,
    UnknownSession,
    open_history,
)


@dataclass
class Opened:
    """The conversation a session goes on with."""

    history: History
    session_id: str | None = None  # None: kept in memory only; a new one is stored with its first turn
    recorder: TurnRecorder | None = None
    notices: list[tuple[str, str]] = field(default_factory=list)  # (error code, message) to tell the client
    store_error: StoreError | None = None  # why it is kept in memory only, for the log


class Conversations:
    """Opens conversations in ``store``."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    def open(
        self,
        resume: str | None,
        system_prompt: str | None = None,
        owner: str | None = None,
        in_use: Container[str] = (),
        strict: bool = False,
        meta: dict[str, Any] | None = None,
    ) -> Opened:
        """A new conversation, or the stored one ``resume`` (an id, or with ``strict`` a prefix of one).

        ``in_use``: ids open in other sessions now. ``strict`` (a person at the
        command line): an id that is not there raises :class:`SessionError`
        rather than starting a new conversation. ``meta``: kept with a new conversation (a call's caller).
        """
        store = self.store
        notices: list[tuple[str, str]] = []
        if resume is not None and resume in in_use:
            notices.append(("session_in_use", f"conversation {resume[:12]} is open in another connection"))
            resume = None
        try:
            if strict and resume is not None:
                resume = store.find_session(resume)
            try:
                session_id, history, recorder = open_history(store, resume, owner, system_prompt, meta)
            except (UnknownSession, ForeignSession) as e:
                if strict:
                    raise
                code = "unknown_session" if isinstance(e, UnknownSession) else "foreign_session"
                notices.append((code, f"no conversation {str(resume)[:12]} for this client: a new one is started"))
                session_id, history, recorder = open_history(store, None, owner, system_prompt, meta)
        except StoreError as e:
            notices.append(("store_unavailable", "conversations cannot be saved now; this one is kept in memory"))
            return Opened(History(), notices=notices, store_error=e)
        return Opened(history, session_id, recorder, notices)


__all__ = ["Conversations", "Opened", "SessionError"]
