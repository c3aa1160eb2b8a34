"""Durable conversations: sessions and their finalized turns in one SQLite file.

One file per deployment (``--db PATH``, :func:`default_db_path` otherwise),
in WAL mode so that readers (``python -m voice.history``) never block the
server's writes. A turn is written in one transaction when it is final (the
user's at the ASR final, the assistant's at playback end or when it was cut)
and never before: the store only sees what :class:`voice.core.history.History`
holds, and that is finalized turns only.

Durability. ``synchronous=NORMAL`` in WAL mode: a commit is written to the
WAL file before ``COMMIT`` returns, so the turn is in the operating system's
hands and survives the process being killed (SIGKILL, a crash, an OOM kill);
only a power loss or an OS crash can lose the last commits, never the
database's consistency. ``FULL`` would also fsync the WAL on every commit,
which can stall the caller for tens of milliseconds on a busy disk: too much
for a call made beside real-time audio, for a guarantee against power loss
the rest of the deployment does not make. ``open(..., synchronous="FULL")``
is there for whoever wants it.

Errors. Every :mod:`sqlite3` error becomes a :class:`StoreError` naming the
file (:class:`StoreCorrupt`, :class:`StoreLocked`, :class:`StoreFull` where
it is one of those). A session that does not exist or belongs to another
token is a :class:`SessionError` (:class:`UnknownSession`,
:class:`ForeignSession`): a wrong request, not a broken store.

Threads. One connection, shared under a lock: each call is short (one
statement or one transaction), and any thread may make it. The server calls it
from its event loop (or through ``asyncio.to_thread``); a call may wait up to
``timeout`` seconds when another process holds the write lock.

:class:`TurnRecorder` is the conversation's side: a
:class:`voice.core.history.HistoryListener` that persists each turn as the history
gets it, never raises, and keeps what it could not write until it can.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voice.core.history import History, Turn

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

# One statement each (comments may hold semicolons).
_SCHEMA = (
    """CREATE TABLE schema_version (
    version INTEGER NOT NULL,
    owner_salt TEXT NOT NULL          -- for the owner hashes: a token is never stored
)""",
    """CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,         -- Unix time
    updated_at REAL NOT NULL,         -- Unix time of the last turn written
    owner TEXT,                       -- a salted hash of the token that created it, or NULL: anyone's
    system_prompt TEXT,
    meta TEXT NOT NULL DEFAULT '{}'   -- JSON object
)""",
    """CREATE TABLE turns (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,             -- 1, 2, ... in the session (a removed turn leaves a gap)
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    text TEXT NOT NULL,               -- what was said, for the assistant what was heard
    generated_text TEXT,              -- assistant: everything the LLM produced
    interrupted INTEGER NOT NULL DEFAULT 0,
    t_start REAL,                     -- seconds on the session's timeline
    t_end REAL,
    audio_s REAL,                     -- the turn's audio: speech heard, or reply played
    response INTEGER,                 -- assistant: the reply's id in its session
    extra TEXT,                       -- JSON object: Turn.extra
    created_at REAL NOT NULL,         -- Unix time it was written
    PRIMARY KEY (session_id, seq)
)""",
)


def default_db_path() -> Path:
    """``$VOICE_DB``, else ``$XDG_DATA_HOME/voice/conversations.db`` (``~/.local/share`` by default)."""
    if env := os.environ.get("VOICE_DB"):
        return Path(env).expanduser()
    data = Path(os.environ.get("XDG_DATA_HOME") or "~/.local/share").expanduser()
    if not data.is_absolute():  # the XDG spec: a relative path is to be ignored
        data = Path.home() / ".local" / "share"
    return data / "voice" / "conversations.db"


# -- errors -----------------------------------------------------------------


class StoreError(Exception):
    """The conversation store failed; the message says what, and names the file."""

    def __init__(self, message: str, path: Path | str | None = None) -> None:
        super().__init__(message)
        self.path = Path(path) if path is not None else None


class StoreCorrupt(StoreError):
    """The file is not a (conversation) database, or is damaged."""


class StoreLocked(StoreError):
    """Another connection held the write lock for longer than the timeout."""


class StoreFull(StoreError):
    """The disk (or the database's size limit) is full."""


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


def _code(e: sqlite3.Error) -> str:
    return getattr(e, "sqlite_errorname", "") or ""


def _translate(e: sqlite3.Error, path: Path, timeout: float) -> StoreError:
    name, what = _code(e), str(e)
    if isinstance(e, sqlite3.ProgrammingError) and "closed" in what:
        return StoreError(f"conversation database {path} is closed", path)
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or "not a database" in what or "malformed" in what:
        return StoreCorrupt(f"conversation database {path} is corrupt ({what}); move it aside to start a new one", path)
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in what:
        return StoreLocked(
            f"conversation database {path} is locked by another connection (waited {timeout:g} s: {what})", path
        )
    if name.startswith("SQLITE_FULL") or "disk is full" in what or "database or disk is full" in what:
        return StoreFull(f"conversation database {path}: the disk is full ({what})", path)
    if name.startswith("SQLITE_CANTOPEN"):
        return StoreError(f"cannot open conversation database {path} ({what})", path)
    if name.startswith("SQLITE_READONLY"):
        return StoreError(f"conversation database {path} is read-only ({what})", path)
    if name.startswith("SQLITE_IOERR"):
        return StoreError(f"conversation database {path}: disk I/O error ({what})", path)
    return StoreError(f"conversation database {path}: {what}", path)


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
    created_at: float  # Unix time


def _audio_s(turn: Turn) -> float | None:
    """The turn's audio, in seconds: ``extra["audio_s"]`` if the caller knows it, else its timings."""
    v = turn.extra.get("audio_s")
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if turn.t_start is not None and turn.t_end is not None:
        return round(max(0.0, turn.t_end - turn.t_start), 3)
    return None


def _turn_row(turn: Turn) -> tuple[Any, ...]:
    extra = json.dumps(turn.extra, ensure_ascii=False, default=str) if turn.extra else None
    return (
        turn.role,
        turn.text,
        turn.generated_text,
        int(bool(turn.interrupted)),
        turn.t_start,
        turn.t_end,
        _audio_s(turn),
        turn.response,
        extra,
    )


_TURN_COLUMNS = "seq, role, text, generated_text, interrupted, t_start, t_end, audio_s, response, extra, created_at"


def _stored_turn(row: tuple[Any, ...]) -> StoredTurn:
    seq, role, text, generated, interrupted, t_start, t_end, audio_s, response, extra, created = row
    turn = Turn(
        role,
        text,
        t_start=t_start,
        t_end=t_end,
        generated_text=generated,
        interrupted=bool(interrupted),
        response=response,
        extra=json.loads(extra) if extra else {},
    )
    return StoredTurn(seq, turn, audio_s, created)


# -- the store --------------------------------------------------------------


class ConversationStore:
    """Sessions and their finalized turns in one SQLite file. Open with :meth:`open`."""

    def __init__(self, conn: sqlite3.Connection, path: Path, salt: str, timeout: float) -> None:
        self._conn = conn
        self.path = path
        self._salt = salt
        self.timeout = timeout
        self._lock = threading.RLock()

    # -- opening ------------------------------------------------------------

    @classmethod
    def open(
        cls, path: Path | str, *, create: bool = True, timeout: float = 1.0, synchronous: str = "NORMAL"
    ) -> ConversationStore:
        """Open (and with ``create``, create: the folder, the file, the schema) the database at ``path``.

        ``timeout``: how long a call waits for another connection's write lock
        before it raises :class:`StoreLocked`.
        """
        path = Path(path).expanduser()
        if synchronous.upper() not in ("NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be NORMAL, FULL or EXTRA, not {synchronous!r}")
        if not path.exists():
            if not create:
                raise StoreError(f"no conversation database at {path}", path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create the folder for conversation database {path} ({e})", path) from e
        elif path.is_dir():
            raise StoreError(f"conversation database {path} is a folder, not a file", path)
        try:
            conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise _translate(e, path, timeout) from e
        try:
            salt = cls._prepare(conn, path, timeout, synchronous.upper(), create)
        except BaseException:
            conn.close()
            raise
        return cls(conn, path, salt, timeout)

    @staticmethod
    def _prepare(conn: sqlite3.Connection, path: Path, timeout: float, synchronous: str, create: bool) -> str:
        try:
            conn.execute(f"PRAGMA busy_timeout = {round(timeout * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"conversation database {path}: cannot use WAL mode (journal mode {mode})", path)
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "schema_version" not in tables:
                if tables:
                    raise StoreCorrupt(
                        f"{path} is an SQLite database but not a conversation database "
                        f"(it has tables {', '.join(sorted(tables))}); use another --db",
                        path,
                    )
                if not create:
                    raise StoreError(f"{path} holds no conversations yet (an empty database)", path)
                conn.execute("BEGIN IMMEDIATE")
                try:
                    # another process may have created it while we waited for the lock
                    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_version'").fetchone():
                        for statement in _SCHEMA:
                            conn.execute(statement)
                        conn.execute(
                            "INSERT INTO schema_version (version, owner_salt) VALUES (?, ?)",
                            (SCHEMA_VERSION, secrets.token_hex(16)),
                        )
                    conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
            row = conn.execute("SELECT version, owner_salt FROM schema_version").fetchone()
            if row is None:
                raise StoreCorrupt(f"conversation database {path} has no schema version; move it aside", path)
            version, salt = row
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"conversation database {path} has schema version {version}, newer than this program's "
                    f"({SCHEMA_VERSION}); upgrade voice to read it",
                    path,
                )
            return salt
        except sqlite3.Error as e:
            raise _translate(e, path, timeout) from e

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()

    def __enter__(self) -> ConversationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -------------------------------------------------------------

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as e:
                raise _translate(e, self.path, self.timeout) from e

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction, holding the write lock from its start (no deadlock on upgrade)."""
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise _translate(e, self.path, self.timeout) from e

    def _owner_hash(self, token: str) -> str:
        return hmac.new(self._salt.encode(), token.encode(), hashlib.sha256).hexdigest()

    @staticmethod
    def _require(conn: sqlite3.Connection, session_id: str) -> None:
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
            raise UnknownSession(f"no session {session_id!r}", session_id)

    # -- sessions -------------------------------------------------------------

    def create_session(
        self,
        session_id: str,
        owner: str | None = None,
        system_prompt: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        """A new session. ``owner``: the client's token (only its salted hash is stored); None: anyone's."""
        now = time.time()
        owner_hash = self._owner_hash(owner) if owner is not None else None
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                raise SessionExists(f"session {session_id!r} exists already", session_id)
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at, owner, system_prompt, meta)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, now, now, owner_hash, system_prompt, json.dumps(meta or {}, default=str)),
            )

    def update_session(
        self, session_id: str, *, system_prompt: str | None = None, meta: dict[str, Any] | None = None
    ) -> None:
        """Set the system prompt and/or merge keys into the session's meta (None: leave as is)."""
        with self._write() as conn:
            row = conn.execute("SELECT meta FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise UnknownSession(f"no session {session_id!r}", session_id)
            if system_prompt is not None:
                conn.execute("UPDATE sessions SET system_prompt = ? WHERE id = ?", (system_prompt, session_id))
            if meta:
                merged = {**json.loads(row[0] or "{}"), **meta}
                conn.execute("UPDATE sessions SET meta = ? WHERE id = ?", (json.dumps(merged, default=str), session_id))

    def session(self, session_id: str, owner: str | None = None) -> SessionRecord:
        """The session ``session_id``, for the client holding token ``owner``.

        Raises :class:`UnknownSession`, or :class:`ForeignSession` if it was
        created with a token and ``owner`` is not that token. A session created
        without a token is anyone's.
        """
        row = self._session_row(session_id)
        stored_owner = row[3]
        if stored_owner is not None and (
            owner is None or not hmac.compare_digest(stored_owner, self._owner_hash(owner))
        ):
            raise ForeignSession(f"session {session_id!r} belongs to another token", session_id)
        return _session_record(row)

    def session_record(self, session_id: str) -> SessionRecord:
        """The session whoever its owner: for tools run by whoever holds the file (raises :class:`UnknownSession`)."""
        return _session_record(self._session_row(session_id))

    def _session_row(self, session_id: str) -> tuple[Any, ...]:
        with self._read() as conn:
            row = conn.execute(_SESSION_QUERY + " WHERE s.id = ?", (session_id,)).fetchone()
        if row is None:
            raise UnknownSession(f"no session {session_id!r}", session_id)
        return row

    def find_session(self, prefix: str) -> str:
        """The id of the one session whose id is ``prefix`` or starts with it."""
        with self._read() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (prefix,)).fetchone():
                return prefix
            rows = conn.execute(
                "SELECT id FROM sessions WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT 6", (len(prefix), prefix)
            ).fetchall()
        if not rows or not prefix:
            raise UnknownSession(f"no session {prefix!r}", prefix)
        if len(rows) > 1:
            ids = ", ".join(r[0] for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
            raise AmbiguousSession(f"session id prefix {prefix!r} is ambiguous ({ids})", prefix)
        return rows[0][0]

    def list_sessions(self, limit: int | None = 50) -> list[SessionRecord]:
        """The most recently updated sessions first, with their turn counts."""
        query = _SESSION_QUERY + " ORDER BY s.updated_at DESC, s.id"
        args: tuple[Any, ...] = ()
        if limit is not None:
            query += " LIMIT ?"
            args = (limit,)
        with self._read() as conn:
            rows = conn.execute(query, args).fetchall()
        return [_session_record(r) for r in rows]

    def delete_session(self, session_id: str) -> None:
        with self._write() as conn:
            self._require(conn, session_id)
            conn.execute("DELETE FROM turns WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    # -- turns ----------------------------------------------------------------

    def add_turn(self, session_id: str, turn: Turn) -> int:
        """Write a finalized turn at the end of the session, in one transaction; returns its seq."""
        row = _turn_row(turn)
        now = time.time()
        with self._write() as conn:
            self._require(conn, session_id)
            seq = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM turns WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
            conn.execute(
                f"INSERT INTO turns (session_id, {_TURN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, seq, *row, now),
            )
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
        return seq

    def replace_turn(self, session_id: str, seq: int, turn: Turn) -> None:
        """Overwrite turn ``seq`` (a finished reply cut after the fact)."""
        row = _turn_row(turn)
        with self._write() as conn:
            self._require(conn, session_id)
            cur = conn.execute(
                "UPDATE turns SET role = ?, text = ?, generated_text = ?, interrupted = ?, t_start = ?, t_end = ?,"
                " audio_s = ?, response = ?, extra = ? WHERE session_id = ? AND seq = ?",
                (*row, session_id, seq),
            )
            if cur.rowcount == 0:
                raise StoreError(f"session {session_id!r} has no turn {seq}", self.path)
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time(), session_id))

    def delete_turn(self, session_id: str, seq: int) -> None:
        """Remove turn ``seq`` (a reply the client says was never heard). No such turn: nothing happens."""
        with self._write() as conn:
            self._require(conn, session_id)
            conn.execute("DELETE FROM turns WHERE session_id = ? AND seq = ?", (session_id, seq))
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time(), session_id))

    def stored_turns(self, session_id: str) -> list[StoredTurn]:
        """The session's turns in order, with their seq, audio duration and when they were written."""
        with self._read() as conn:
            self._require(conn, session_id)
            rows = conn.execute(
                f"SELECT {_TURN_COLUMNS} FROM turns WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
        return [_stored_turn(r) for r in rows]

    def turns(self, session_id: str) -> list[Turn]:
        """The session's turns in order, as :class:`voice.core.history.Turn` objects."""
        return [s.turn for s in self.stored_turns(session_id)]


_SESSION_QUERY = """
SELECT s.id, s.created_at, s.updated_at, s.owner, s.system_prompt, s.meta,
       (SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id),
       (SELECT t.text FROM turns t WHERE t.session_id = s.id ORDER BY t.seq DESC LIMIT 1)
FROM sessions s
"""


def _session_record(row: tuple[Any, ...]) -> SessionRecord:
    sid, created, updated, owner, prompt, meta, count, last = row
    try:
        meta_d = json.loads(meta) if meta else {}
    except ValueError:
        meta_d = {}
    return SessionRecord(sid, created, updated, owner is not None, prompt, meta_d, count, last)


# -- the conversation's side ------------------------------------------------


class TurnRecorder:
    """Persists a session's turns as its :class:`voice.core.history.History` finalizes them.

    A :class:`voice.core.history.HistoryListener`: ``History(recorder.load(),
    listener=recorder)``. It never raises: when the store fails it logs once,
    keeps the error in :attr:`error` and the writes it owes in order, and
    tries them again at the next change (or :meth:`flush`), so a passing lock
    or a full disk that gets space back loses nothing. The conversation goes
    on in memory meanwhile.
    """

    def __init__(self, store: ConversationStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        # the failure that holds writes back now (a StoreError, or a SessionError
        # if the session was deleted under it); None: everything is written
        self.error: StoreError | SessionError | None = None
        self._seq: dict[int, tuple[Turn, int]] = {}  # id(turn) -> (turn, its seq in the store)
        self._backlog: list[tuple[str, Turn]] = []  # ("add" | "replace" | "remove", turn), in order
        self._lock = threading.RLock()

    # HistoryListener

    def added(self, turn: Turn) -> None:
        self.record(turn)

    def changed(self, turn: Turn) -> None:
        self.amend(turn)

    def removed(self, turn: Turn) -> None:
        self.remove(turn)

    # the API

    def load(self) -> list[Turn]:
        """The turns stored for the session (to resume it), remembered so that they can be amended.

        Raises :class:`StoreError` and :class:`UnknownSession`, unlike the rest.
        """
        stored = self.store.stored_turns(self.session_id)
        with self._lock:
            for s in stored:
                self._seq[id(s.turn)] = (s.turn, s.seq)
        return [s.turn for s in stored]

    def record(self, turn: Turn) -> None:
        """Write a finalized turn (now, or once the store works again)."""
        with self._lock:
            if id(turn) in self._seq or any(t is turn for _, t in self._backlog):
                return  # written already, or on its way
            self._backlog.append(("add", turn))
            self.flush()

    def amend(self, turn: Turn) -> None:
        """``turn``, written or on its way, was modified: write it again."""
        with self._lock:
            if any(t is turn and op in ("add", "replace") for op, t in self._backlog):
                return  # what is owed writes the turn as it is then
            if id(turn) not in self._seq:
                log.debug("session %s: amend of a turn never recorded", self.session_id)
                return
            self._backlog.append(("replace", turn))
            self.flush()

    def remove(self, turn: Turn) -> None:
        """``turn`` was taken back: delete it (or never write it)."""
        with self._lock:
            self._backlog = [(op, t) for op, t in self._backlog if t is not turn]
            if id(turn) in self._seq:
                self._backlog.append(("remove", turn))
            self.flush()

    @property
    def pending(self) -> list[Turn]:
        """Turns whose last change is not in the store yet."""
        with self._lock:
            return [t for _, t in self._backlog]

    def seq(self, turn: Turn) -> int | None:
        entry = self._seq.get(id(turn))
        return entry[1] if entry is not None and entry[0] is turn else None

    def flush(self) -> bool:
        """Write what is owed, in order, stopping at the first failure. True: nothing is owed."""
        with self._lock:
            done = 0
            try:
                for op, turn in self._backlog:
                    self._apply(op, turn)
                    done += 1
            except (StoreError, SessionError) as e:
                del self._backlog[:done]
                if self.error is None:
                    log.warning(
                        "session %s: turns are kept in memory only until the store works again: %s",
                        self.session_id,
                        e,
                    )
                self.error = e
                return False
            except Exception as e:  # never raise into the conversation
                del self._backlog[:done]
                if self.error is None:
                    log.exception("session %s: persisting a turn failed", self.session_id)
                self.error = StoreError(f"persisting a turn failed: {e}", self.store.path)
                return False
            self._backlog.clear()
            if self.error is not None:
                log.warning("session %s: the store works again; every turn is written", self.session_id)
                self.error = None
            return True

    def _apply(self, op: str, turn: Turn) -> None:
        if op == "add":
            self._seq[id(turn)] = (turn, self.store.add_turn(self.session_id, turn))
        elif op == "replace":
            self.store.replace_turn(self.session_id, self._seq[id(turn)][1], turn)
        else:
            self.store.delete_turn(self.session_id, self._seq[id(turn)][1])
            del self._seq[id(turn)]


def open_history(
    store: ConversationStore, session_id: str | None, owner: str | None = None, system_prompt: str | None = None
) -> tuple[str, History, TurnRecorder]:
    """A conversation backed by ``store``: a new one (``session_id`` None) or the stored one, resumed.

    Returns its id, its history (the stored turns, persisted from now on as
    they are finalized) and the recorder doing it. Raises UnknownSession or
    ForeignSession for an id that is not there or not ``owner``'s, and
    StoreError when the store fails.
    """
    if session_id is None:
        session_id = uuid.uuid4().hex
        store.create_session(session_id, owner=owner, system_prompt=system_prompt)
    else:
        store.session(session_id, owner=owner)
    recorder = TurnRecorder(store, session_id)
    return session_id, History(recorder.load(), listener=recorder), recorder
