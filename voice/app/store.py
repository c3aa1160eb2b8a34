"""Durable conversations: sessions and their finalized turns, in one SQLite file or in PostgreSQL.

One SQLite file per machine (``--db PATH``, :func:`default_db_path`
otherwise), in WAL mode so that readers (``python -m voice.history``) never
block the server's writes; or one PostgreSQL database shared by every worker
(``--db postgresql://user@host:port/dbname``), so that a conversation
started on one worker resumes on any other (:mod:`voice.app.databases` holds
what differs between the two). A turn is written in one transaction when it is final (the
user's at the ASR final, the assistant's at playback end or when it was cut)
and never before: the store only sees what :class:`voice.core.history.History`
holds, and that is finalized turns only.

Storage on first use. A new conversation's session row is written with its
first turn, in the same transaction, never before: a connection that never
speaks leaves nothing in the file (a reconnect storm once left 1,100 empty
sessions). The id a client is told at once is the one the row gets; until
then it is unknown to the store, so resuming it starts a new conversation. As
the conversation never takes back a person's turn (only a reply not heard)
and a reply always follows one, every session written this way keeps a turn.
A session with none, from before this, is pruned (:meth:`ConversationStore.prune`,
``python -m voice.history prune``, and at each start of ``voice.run``).

Off the event loop. :class:`TurnRecorder` never touches SQLite on the
caller's thread: when the history tells it of a turn, it stamps the
wall-clock time, takes the turn's columns as they are then, and hands the
write to the store's writer thread (one daemon thread per store, fed by a
queue, in order). A database locked by another process holds up that thread,
never the audio. Measured (``scripts/bench_store``, ``docs/bench/store.json``,
a WAL file on this shared 2-core machine's disk, load 4-7): a turn's
finalization to its commit, p50 0.3 ms, p95 7 ms, max 28 ms; while another
process holds the write lock, as long as it does (max 0.56 s under a 0.5 s
lock). ``History.add`` on the caller's thread: p50 0.09 ms, max 0.3 ms
(copying the turn; 34 µs with no store at all), locked or not, where it
was the commit before (p50 0.3 ms, and 0.54 s under that lock).
:meth:`TurnRecorder.flush` and :meth:`ConversationStore.close` wait for what
is handed over (at a session's end, at shutdown).

Durability. ``synchronous=NORMAL`` in WAL mode: a commit is written to the
WAL file before ``COMMIT`` returns, so the turn is in the operating system's
hands and survives the process being killed (SIGKILL, a crash, an OOM kill)
once committed; only a power loss or an OS crash can lose the last commits,
never the database's consistency. ``FULL`` would also fsync the WAL on every
commit, which widens the finalization-to-commit window by the disk's flush
time (tens of milliseconds on a busy disk), for a guarantee against power
loss the rest of the deployment does not make. ``open(...,
synchronous="FULL")`` is there for whoever wants it.

Times. A turn's ``t_start``/``t_end`` are seconds on the session's timeline;
beside them ``finalized_at`` is the wall-clock time (Unix time) at which the
conversation finalized it, or last changed it (a reply cut after the fact),
as the recorder was told; ``created_at`` is when the writer took the write
lock to store it.

Errors. Every error of the database's driver becomes a :class:`StoreError`
naming the file or server (:class:`StoreCorrupt`, :class:`StoreLocked`,
:class:`StoreFull`, :class:`StoreUnreachable` where it is one of those). A
session that does not exist or belongs to another token is a
:class:`SessionError` (:class:`UnknownSession`, :class:`ForeignSession`): a
wrong request, not a broken store.

Threads. Two connections: one for reads, one for writes, each used under its
own lock by any thread, so that a read never waits behind a write held up by
another process's lock (WAL readers do not wait for writers). The
synchronous API (``add_turn``, ``turns``, ...) runs on the caller's thread
and may wait up to ``timeout`` seconds for another connection's write lock:
it is for tools, tests and set-up, not for the event loop.

PostgreSQL. The same tables (times as DOUBLE PRECISION), the same
transactions; a session's writes are serialized by a lock on its row (two
workers never number its turns at once). Durability is the server's
(``synchronous_commit``). A connection lost to a restart or a network cut
fails the write under way (the recorder keeps it, as for a locked file) and
is made again for the next one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import logging
import os
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voice.app.databases import (
    SCHEMA_VERSION,
    Connection,
    Database,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreLocked,
    StoreUnreachable,
    UnsupportedDatabase,
    open_database,
)
from voice.core.history import History, ToolUse, Turn

__all__ = [  # the store's API, its errors included (defined with the databases)
    "SCHEMA_VERSION",
    "AmbiguousSession",
    "ConversationStore",
    "ForeignSession",
    "SessionError",
    "SessionExists",
    "SessionRecord",
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "StoreLocked",
    "StoreUnreachable",
    "StoredTurn",
    "TurnRecorder",
    "UnknownSession",
    "UnsupportedDatabase",
    "default_db_path",
    "open_history",
]

log = logging.getLogger(__name__)

# A session with no turns is pruned once it has been left untouched this long (seconds). Sessions
# are written with their first turn, so none open now is empty; the margin is for one that a
# server of an earlier version (which wrote the session at connect) holds open beside this one.
PRUNE_AFTER_S = 600.0


def default_db_path() -> Path | str:
    """``$VOICE_DB`` (a path, or a ``postgresql://`` URL), else ``$XDG_DATA_HOME/voice/conversations.db``
    (``~/.local/share`` by default)."""
    if env := os.environ.get("VOICE_DB"):
        return env if "://" in env else Path(env).expanduser()
    data = Path(os.environ.get("XDG_DATA_HOME") or "~/.local/share").expanduser()
    if not data.is_absolute():  # the XDG spec: a relative path is to be ignored
        data = Path.home() / ".local" / "share"
    return data / "voice" / "conversations.db"


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


def _audio_s(turn: Turn) -> float | None:
    """The turn's audio, in seconds: ``extra["audio_s"]`` if the caller knows it, else its timings."""
    v = turn.extra.get("audio_s")
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if turn.t_start is not None and turn.t_end is not None:
        return round(max(0.0, turn.t_end - turn.t_start), 3)
    return None


def _turn_row(turn: Turn) -> tuple[Any, ...]:
    fields = dict(turn.extra)
    if turn.tool is not None:
        fields["tool"] = dataclasses.asdict(turn.tool)
    extra = json.dumps(fields, ensure_ascii=False, default=str) if fields else None
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


_TURN_COLUMNS = (
    "seq, role, text, generated_text, interrupted, t_start, t_end, audio_s, response, extra, created_at, finalized_at"
)


def _stored_turn(row: tuple[Any, ...]) -> StoredTurn:
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


# -- the writer thread --------------------------------------------------------


class _Writer:
    """One daemon thread that runs the jobs handed to it, in the order they were handed over.

    Started by the first job. A job's exceptions are logged and go no
    further (the recorder's jobs catch their own and keep them).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, job: Callable[[], None]) -> bool:
        """Queue ``job``; False (and it never runs) once closed."""
        with self._lock:
            if self._closed:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._jobs.put(job)
        return True

    def wait(self, timeout: float | None) -> bool:
        """Wait until every job queued so far has run. False: not within ``timeout`` seconds."""
        with self._lock:
            thread = self._thread
        if thread is None:
            return True  # never given a job
        if threading.current_thread() is thread:
            raise RuntimeError("the writer thread cannot wait for itself")
        done = threading.Event()
        if not self.submit(done.set):  # closed: what was queued runs to the end
            thread.join(timeout)
            return not thread.is_alive()
        return done.wait(timeout)

    def close(self, timeout: float | None) -> bool:
        """Run what is queued (waiting up to ``timeout`` s), then stop; what is submitted after never runs."""
        drained = self.wait(timeout)
        with self._lock:
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._jobs.put(None)
        if drained and thread is not None:
            thread.join(timeout)
        return drained

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception:
                log.exception("a write to the conversation database failed")


# -- the store --------------------------------------------------------------


class ConversationStore:
    """Sessions and their finalized turns, in an SQLite file or a PostgreSQL database. Open with :meth:`open`."""

    def __init__(self, db: Database, conn: Connection, reader: Connection, salt: str, timeout: float) -> None:
        self._db = db
        self._conn = conn  # writes (the writer thread's, and the synchronous API's)
        self._reader = reader  # reads: never behind a write that waits for the lock
        self.path = db.path  # the SQLite file; None on a server
        self.location = db.location  # the file, or the server's URL without its password: for messages
        self._salt = salt
        self.timeout = timeout
        self._lock = threading.RLock()  # the write connection's
        self._read_lock = threading.RLock()
        self._writer = _Writer(f"voice-store-{db.path.name if db.path else 'postgresql'}")

    # -- opening ------------------------------------------------------------

    @classmethod
    def open(
        cls, location: Path | str, *, create: bool = True, timeout: float = 1.0, synchronous: str = "NORMAL"
    ) -> ConversationStore:
        """Open the conversations at ``location``: an SQLite file's path, or a ``postgresql://`` URL.

        With ``create``, what is missing is created: the folder, the file,
        the tables. ``timeout``: how long a call waits for another
        connection's lock before it raises :class:`StoreLocked`.
        ``synchronous`` is SQLite's (a server's durability is its own).
        """
        if synchronous.upper() not in ("NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be NORMAL, FULL or EXTRA, not {synchronous!r}")
        db = open_database(location)
        if db.path is not None and not create and not db.path.exists():
            raise StoreError(f"no conversation database at {db.path}", db.path)
        conns: list[Connection] = []
        try:
            conns.append(db.connect(readonly=False, timeout=timeout))
            salt = db.prepare(conns[0], create=create, synchronous=synchronous.upper())
            conns.append(db.connect(readonly=True, timeout=timeout))
        except BaseException as e:
            for conn in conns:
                with contextlib.suppress(Exception):
                    conn.close()
            if isinstance(e, db.errors):
                raise db.translate(e, timeout) from e
            raise
        return cls(db, conns[0], conns[1], salt, timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        """Finish the writes handed over (waiting up to ``timeout`` seconds for them), then close the file."""
        if not self._writer.close(timeout):
            log.warning(
                "conversation database %s: writes still pending after %g s are not stored", self.location, timeout
            )
        with self._lock, contextlib.suppress(*self._db.errors):
            self._conn.close()
        with self._read_lock, contextlib.suppress(*self._db.errors):
            self._reader.close()

    def submit(self, job: Callable[[], None]) -> bool:
        """Run ``job`` on the store's writer thread, after every job handed over before it.

        Returns at once; False (and ``job`` never runs) once the store is
        closed. A job that raises is logged: jobs keep their own errors.
        """
        return self._writer.submit(job)

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until the jobs handed over so far have run. False: not within ``timeout`` seconds."""
        return self._writer.wait(timeout)

    def __enter__(self) -> ConversationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -------------------------------------------------------------

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._read_lock:
            try:
                yield self._reader
            except self._db.errors as e:
                raise self._db.translate(e, self.timeout) from e

    @contextlib.contextmanager
    def _write(self) -> Iterator[Connection]:
        """One transaction, holding the write lock from its start."""
        with self._lock:
            conn = self._conn
            try:
                self._db.begin(conn)
                try:
                    yield conn
                except BaseException:
                    with contextlib.suppress(*self._db.errors):
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except self._db.errors as e:
                if conn.in_transaction:
                    with contextlib.suppress(*self._db.errors):
                        conn.execute("ROLLBACK")
                raise self._db.translate(e, self.timeout) from e

    def _owner_hash(self, token: str) -> str:
        return hmac.new(self._salt.encode(), token.encode(), hashlib.sha256).hexdigest()

    def _require(self, conn: Connection, session_id: str, *, lock: bool = True) -> None:
        """Raise UnknownSession unless it exists; in a write, lock its row until the commit."""
        query = "SELECT 1 FROM sessions WHERE id = ?" + (self._db.lock_session if lock else "")
        if conn.execute(query, (session_id,)).fetchone() is None:
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

    def prune(self, older_than: float = PRUNE_AFTER_S, *, dry_run: bool = False) -> list[SessionRecord]:
        """Delete the sessions with no turns untouched for ``older_than`` seconds; returns them, oldest first.

        Such a session is one written at connect by an earlier version, whose
        client never spoke (this version writes a session with its first
        turn, in one transaction). The age is counted from the session's last
        write (``updated_at``, which a turn written or removed moves), so a
        session whose turns went moments ago is kept. The check and the
        deletion are one transaction: a turn committed before it keeps its
        session, and one after it finds its session gone (the recorder says
        so and keeps it in memory). ``dry_run``: delete nothing, only say.
        """
        empty = " WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = {s}.id) AND {s}.updated_at < ?"
        select = _SESSION_QUERY + empty.format(s="s") + " ORDER BY s.created_at, s.id"
        if dry_run:
            with self._read() as conn:
                rows = conn.execute(select, (time.time() - older_than,)).fetchall()
            return [_session_record(r) for r in rows]
        with self._write() as conn:
            cutoff = time.time() - older_than  # the lock is ours: nothing is written meanwhile
            rows = conn.execute(select, (cutoff,)).fetchall()
            conn.execute("DELETE FROM sessions" + empty.format(s="sessions"), (cutoff,))
        return [_session_record(r) for r in rows]

    def prune_soon(self, older_than: float = PRUNE_AFTER_S) -> None:
        """:meth:`prune` on the writer thread (at start: not on the caller's, nor the event loop's); logged."""

        def job() -> None:
            try:
                pruned = self.prune(older_than)
            except StoreError as e:
                log.warning("sessions with no turns were not pruned: %s", e)
                return
            if pruned:
                log.info("pruned %d sessions with no turns from %s", len(pruned), self.location)

        self.submit(job)

    # -- turns ----------------------------------------------------------------

    def add_turn(self, session_id: str, turn: Turn, *, finalized_at: float | None = None) -> int:
        """Write a finalized turn at the end of the session, in one transaction; returns its seq.

        ``finalized_at``: the Unix time it was finalized (None: now).
        """
        return self._add_row(session_id, _turn_row(turn), finalized_at)

    def _add_row(
        self, session_id: str, row: tuple[Any, ...], finalized_at: float | None, new: _NewSession | None = None
    ) -> int:
        """``new``: the session is written with this turn, in the same transaction, if it is not there yet."""
        with self._write() as conn:
            now = time.time()  # the lock is ours: written now
            if new is not None and not conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                owner = self._owner_hash(new.owner) if new.owner is not None else None
                conn.execute(
                    "INSERT INTO sessions (id, created_at, updated_at, owner, system_prompt, meta)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (session_id, new.created_at, now, owner, new.system_prompt, json.dumps(new.meta, default=str)),
                )
            else:
                self._require(conn, session_id)
            seq = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM turns WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
            conn.execute(
                f"INSERT INTO turns (session_id, {_TURN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, seq, *row, now, now if finalized_at is None else finalized_at),
            )
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
        return seq

    def replace_turn(self, session_id: str, seq: int, turn: Turn, *, finalized_at: float | None = None) -> None:
        """Overwrite turn ``seq`` (a finished reply cut after the fact); ``finalized_at``: when (None: now)."""
        self._replace_row(session_id, seq, _turn_row(turn), finalized_at)

    def _replace_row(self, session_id: str, seq: int, row: tuple[Any, ...], finalized_at: float | None) -> None:
        with self._write() as conn:
            now = time.time()
            self._require(conn, session_id)
            cur = conn.execute(
                "UPDATE turns SET role = ?, text = ?, generated_text = ?, interrupted = ?, t_start = ?, t_end = ?,"
                " audio_s = ?, response = ?, extra = ?, finalized_at = ? WHERE session_id = ? AND seq = ?",
                (*row, now if finalized_at is None else finalized_at, session_id, seq),
            )
            if cur.rowcount == 0:
                raise StoreError(f"session {session_id!r} has no turn {seq}", self.path or self.location)
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))

    def delete_turn(self, session_id: str, seq: int) -> None:
        """Remove turn ``seq`` (a reply the client says was never heard). No such turn: nothing happens."""
        with self._write() as conn:
            self._require(conn, session_id)
            conn.execute("DELETE FROM turns WHERE session_id = ? AND seq = ?", (session_id, seq))
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time(), session_id))

    def stored_turns(self, session_id: str) -> list[StoredTurn]:
        """The session's turns in order, with their seq, audio duration and when they were written."""
        with self._read() as conn:
            self._require(conn, session_id, lock=False)
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


@dataclass(frozen=True)
class _NewSession:
    """A new conversation's session, written with its first turn."""

    owner: str | None  # the client's token (only its salted hash is stored)
    system_prompt: str | None
    created_at: float  # Unix time the conversation was opened
    meta: dict[str, Any] = field(default_factory=dict)  # what is known of it (a phone call's caller and ids)


@dataclass(eq=False)
class _Write:
    """A write a recorder owes: ``op`` on ``turn``, with its columns as they were when the history told of it."""

    op: str  # "add" | "replace" | "remove"
    turn: Turn
    row: tuple[Any, ...] | None  # None for "remove"
    at: float  # Unix time the history told of it: the turn's finalized_at


class TurnRecorder:
    """Persists a session's turns as its :class:`voice.core.history.History` finalizes them.

    A :class:`voice.core.history.HistoryListener`: ``History(recorder.load(),
    listener=recorder)``. On the caller's thread it only stamps the time,
    copies the turn's columns and queues the write: no SQLite call, nothing
    that waits for the database. The store's writer thread writes the queue
    in order. It never raises: when the store fails it logs once, keeps the
    error in :attr:`error` and the writes it owes in order, and tries them
    again at the next change (or :meth:`flush`), so a passing lock or a full
    disk that gets space back loses nothing. The conversation goes on in
    memory meanwhile.

    A new session (:meth:`create`) is written with its first turn, in the
    same transaction: until a turn is final there is nothing in the store.
    """

    def __init__(self, store: ConversationStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        # the failure that holds writes back now (a StoreError, or a SessionError
        # if the session was deleted under it); None: everything handed over is written or on its way
        self.error: StoreError | SessionError | None = None
        # The state below is shared with the writer thread under _lock, never
        # held across an SQLite call (the caller must not wait for the database).
        self._lock = threading.Lock()
        self._seq: dict[int, tuple[Turn, int]] = {}  # id(turn) -> (turn, its seq in the store)
        self._backlog: deque[_Write] = deque()  # owed, in order
        self._writing: _Write | None = None  # taken off the backlog by the writer thread, not committed yet
        self._new: _NewSession | None = None  # a new session, not in the store until its first turn is
        self._drain_queued = False

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

        Reads on the caller's thread. Raises :class:`StoreError` and
        :class:`UnknownSession`, unlike the rest.
        """
        stored = self.store.stored_turns(self.session_id)
        with self._lock:
            for s in stored:
                self._seq[id(s.turn)] = (s.turn, s.seq)
        return [s.turn for s in stored]

    def create(
        self, owner: str | None = None, system_prompt: str | None = None, meta: dict[str, Any] | None = None
    ) -> None:
        """The session is new: it is written with its first turn (on the writer thread), not before.

        Nothing is handed over now: a conversation in which nothing is ever
        finalized leaves nothing in the store.
        """
        with self._lock:
            self._new = _NewSession(owner, system_prompt, time.time(), dict(meta or {}))

    @property
    def stored(self) -> bool:
        """The session is in the store: it was resumed, or its first turn is committed."""
        with self._lock:
            return self._new is None

    def record(self, turn: Turn) -> None:
        """Write a finalized turn (soon, or once the store works again)."""
        at, row = time.time(), _turn_row(turn)
        with self._lock:
            if self._known(turn):
                return  # written already, or on its way
            self._backlog.append(_Write("add", turn, row, at))
        self._schedule()

    def amend(self, turn: Turn) -> None:
        """``turn``, written or on its way, was modified: write it again."""
        at, row = time.time(), _turn_row(turn)
        with self._lock:
            last = next((w for w in reversed(self._backlog) if w.turn is turn), None)
            if last is None and self._writing is not None and self._writing.turn is turn:
                last = self._writing
            if last is not None and last.op == "remove":
                return  # taken back: nothing to amend
            if last is not None and last is not self._writing:
                last.row, last.at = row, at  # what is owed writes the turn as it is now
                return
            if last is None and self._stored_seq(turn) is None:
                log.debug("session %s: amend of a turn never recorded", self.session_id)
                return
            self._backlog.append(_Write("replace", turn, row, at))
        self._schedule()

    def remove(self, turn: Turn) -> None:
        """``turn`` was taken back: delete it (or never write it)."""
        at = time.time()
        with self._lock:
            self._backlog = deque(w for w in self._backlog if w.turn is not turn)
            writing = self._writing
            if writing is not None and writing.turn is turn:
                if writing.op == "remove":
                    return  # on its way out already
            elif self._stored_seq(turn) is None:
                return  # never written: nothing to delete
            self._backlog.append(_Write("remove", turn, None, at))
        self._schedule()

    @property
    def pending(self) -> list[Turn]:
        """Turns whose last change is not in the store yet (on their way, or held back by :attr:`error`)."""
        with self._lock:
            writes = ([self._writing] if self._writing is not None else []) + list(self._backlog)
        out: list[Turn] = []
        for w in writes:
            if not any(t is w.turn for t in out):
                out.append(w.turn)
        return out

    def seq(self, turn: Turn) -> int | None:
        """The turn's seq in the store, once its first write is committed."""
        with self._lock:
            return self._stored_seq(turn)

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Write what is owed, in order, and wait for it (up to ``timeout`` s). True: nothing is owed.

        For a session's end and shutdown: it blocks, so the event loop calls
        it through ``asyncio.to_thread``.
        """
        self._schedule()
        done = self.store.flush(timeout)
        with self._lock:
            return done and self._owed() is None

    # on the caller's thread, under _lock

    def _stored_seq(self, turn: Turn) -> int | None:
        entry = self._seq.get(id(turn))
        return entry[1] if entry is not None and entry[0] is turn else None

    def _known(self, turn: Turn) -> bool:
        return (
            self._stored_seq(turn) is not None
            or (self._writing is not None and self._writing.turn is turn)
            or any(w.turn is turn for w in self._backlog)
        )

    def _owed(self) -> object | None:
        return self._writing or (self._backlog[0] if self._backlog else None)

    def _schedule(self) -> None:
        """Hand the backlog to the writer thread (once: one drain writes everything owed)."""
        with self._lock:
            if self._drain_queued:
                return
            self._drain_queued = True
        if self.store.submit(self._drain):
            return
        with self._lock:
            self._drain_queued = False
            self._failed(StoreError(f"conversation database {self.store.location} is closed", self.store.location))

    def _failed(self, e: StoreError | SessionError) -> None:
        if self.error is None:
            log.warning("session %s: turns are kept in memory only until the store works again: %s", self.session_id, e)
        self.error = e

    # on the writer thread

    def _drain(self) -> None:
        """Write what is owed, in order, stopping at the first failure (kept, with what follows it)."""
        with self._lock:
            self._drain_queued = False
        try:
            while True:
                with self._lock:
                    if not self._backlog:
                        break
                    w = self._writing = self._backlog.popleft()
                try:
                    self._apply(w)
                except BaseException:
                    with self._lock:
                        self._backlog.appendleft(w)  # not written: first again
                        self._writing = None
                    raise
                with self._lock:
                    self._writing = None
        except (StoreError, SessionError) as e:
            with self._lock:
                self._failed(e)
            return
        except Exception as e:  # never raise into the conversation
            with self._lock:
                if self.error is None:
                    log.exception("session %s: persisting a turn failed", self.session_id)
                self.error = StoreError(f"persisting a turn failed: {e}", self.store.path or self.store.location)
            return
        with self._lock:
            if self.error is not None and self._owed() is None:
                log.warning("session %s: the store works again; every turn is written", self.session_id)
                self.error = None

    def _apply(self, w: _Write) -> None:
        sid, key = self.session_id, id(w.turn)
        if w.op == "add":
            with self._lock:
                new = self._new
            seq = self.store._add_row(sid, w.row or (), w.at, new)  # a new session: written with it
            with self._lock:
                self._seq[key] = (w.turn, seq)
                self._new = None
            return
        with self._lock:
            seq = self._seq[key][1]
        if w.op == "replace":
            self.store._replace_row(sid, seq, w.row or (), w.at)
        else:
            self.store.delete_turn(sid, seq)
            with self._lock:
                del self._seq[key]


def open_history(
    store: ConversationStore,
    session_id: str | None,
    owner: str | None = None,
    system_prompt: str | None = None,
    meta: dict[str, Any] | None = None,
) -> tuple[str, History, TurnRecorder]:
    """A conversation backed by ``store``: a new one (``session_id`` None) or the stored one, resumed.

    Returns its id, its history (the stored turns, persisted from now on as
    they are finalized) and the recorder doing it. A new session gets its id
    now and is written by the writer thread with its first turn, not before:
    no SQLite call on the caller's thread, nothing stored for a conversation
    in which nothing is said, and a failing store shows in
    ``recorder.error``. Resuming reads the session on the caller's thread:
    raises UnknownSession for an id that is not there or has no turns
    (nothing was ever said in it), ForeignSession for one that is not
    ``owner``'s, and StoreError when the store fails. ``meta``: kept with a new session.
    """
    if session_id is None:
        recorder = TurnRecorder(store, uuid.uuid4().hex)
        recorder.create(owner=owner, system_prompt=system_prompt, meta=meta)
        return recorder.session_id, History(listener=recorder), recorder
    if store.session_record(session_id).turns == 0:  # from before sessions were written with a turn
        raise UnknownSession(f"session {session_id!r} has no turns: there is nothing to resume", session_id)
    store.session(session_id, owner=owner)
    recorder = TurnRecorder(store, session_id)
    return session_id, History(recorder.load(), listener=recorder), recorder
