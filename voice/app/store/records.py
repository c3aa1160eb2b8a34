"""What the store keeps, as Python sees it and as its rows hold it: sessions, turns, and the session errors.

What goes into a JSON column is :func:`~voice.app.databases.storable` first: JSON's
escapes would hide a lone surrogate from the connection, which cleans every other text
parameter, and it would come back out of the row as the same unprintable text.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from core.history import ToolUse, Turn
from voice.app.databases import storable

# -- errors -----------------------------------------------------------------


class SessionError(Exception):
    """A request for a session the store cannot grant (not a failure of the store)."""

    def __init__(self, message: str, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


class UnknownSession(SessionError, LookupError):
    pass


class ForeignSession(SessionError, PermissionError):
    """The session was created with another token."""


class SessionExists(SessionError):
    pass


class AmbiguousSession(SessionError, LookupError):
    """An id prefix that more than one session has."""


# -- records ----------------------------------------------------------------


@dataclass(frozen=True)
class SessionRecord:
    id: str
    created_at: float  # Unix time
    updated_at: float
    owned: bool  # created with a token: only that token may open it
    system_prompt: str | None
    meta: dict[str, Any] = field(default_factory=dict)
    turns: int = 0  # finalized turns stored
    last_text: str | None = None  # the last turn's text


@dataclass(frozen=True)
class StoredTurn:
    seq: int
    turn: Turn
    audio_s: float | None
    created_at: float  # Unix time it was written
    finalized_at: float | None  # Unix time it was finalized, or last changed (None: stored by schema version 1)


def audio_seconds(turn: Turn) -> float | None:
    """The turn's audio, in seconds: ``extra["audio_s"]`` if the caller knows it, else its timings."""
    v = turn.extra.get("audio_s")
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if turn.t_start is not None and turn.t_end is not None:
        return round(max(0.0, turn.t_end - turn.t_start), 3)
    return None


def meta_json(meta: dict[str, Any]) -> str:
    """A session's meta as its column holds it (JSON, every text :func:`storable`)."""
    return json.dumps(storable(meta), default=str)


def turn_row(turn: Turn) -> tuple[Any, ...]:
    """The turn's columns (after :data:`TURN_COLUMNS`' seq, before its times); JSON holds only :func:`storable` text."""
    fields = dict(turn.extra)
    if turn.tool is not None:
        fields["tool"] = dataclasses.asdict(turn.tool)
    extra = json.dumps(storable(fields), ensure_ascii=False, default=str) if fields else None
    return (
        turn.role,
        turn.text,
        turn.generated_text,
        int(bool(turn.interrupted)),
        turn.t_start,
        turn.t_end,
        audio_seconds(turn),
        turn.response,
        extra,
    )


TURN_COLUMNS = (
    "seq, role, text, generated_text, interrupted, t_start, t_end, audio_s, response, extra, created_at, finalized_at"
)


def stored_turn(row: tuple[Any, ...]) -> StoredTurn:
    seq, role, text, generated, interrupted, t_start, t_end, audio_s, response, extra, created, finalized = row
    fields = json.loads(extra) if extra else {}
    call = fields.pop("tool", None) if role == "tool" else None
    turn = Turn(
        role,
        text,
        t_start=t_start,
        t_end=t_end,
        generated_text=generated,
        interrupted=bool(interrupted),
        response=response,
        extra=fields,
        tool=ToolUse(**call) if isinstance(call, dict) else None,
    )
    return StoredTurn(seq, turn, audio_s, created, finalized)


INSERT_SESSION = (
    "INSERT INTO sessions (id, created_at, updated_at, owner, system_prompt, meta) VALUES (?, ?, ?, ?, ?, ?)"
)

SESSION_QUERY = """
SELECT s.id, s.created_at, s.updated_at, s.owner, s.system_prompt, s.meta,
       (SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id),
       (SELECT t.text FROM turns t WHERE t.session_id = s.id ORDER BY t.seq DESC LIMIT 1)
FROM sessions s
"""


def session_record(row: tuple[Any, ...]) -> SessionRecord:
    sid, created, updated, owner, prompt, meta, count, last = row
    try:
        meta_d = json.loads(meta) if meta else {}
    except ValueError:
        meta_d = {}
    return SessionRecord(sid, created, updated, owner is not None, prompt, meta_d, count, last)


@dataclass(frozen=True)
class NewSession:
    """A new conversation's session, written with its first turn."""

    owner: str | None  # the client's token (only its salted hash is stored)
    system_prompt: str | None
    created_at: float  # Unix time the conversation was opened
    meta: dict[str, Any] = field(default_factory=dict)  # what is known of it (a phone call's caller and ids)
