"""The store: sessions and their turns in one database, written on its writer thread or the caller's."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from core.history import Turn
from voice.app.databases import (
    Connection,
    Database,
    StoreError,
    open_database,
)
from voice.app.store.records import (
    INSERT_SESSION,
    SESSION_QUERY,
    TURN_COLUMNS,
    AmbiguousSession,
    ForeignSession,
    NewSession,
    SessionExists,
    SessionRecord,
    StoredTurn,
    UnknownSession,
    meta_json,
    session_record,
    stored_turn,
    turn_row,
)
from voice.app.store.writer import Writer

log = logging.getLogger(__package__)  # voice.app.store: the name its log lines always had

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


def _connect(
    location: Path | str, create: bool, timeout: float, synchronous: str
) -> tuple[Database, Connection, Connection, str]:
    """The database at ``location``, prepared, with its write and read connections and its owner salt."""
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
    return db, conns[0], conns[1], salt


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
        self._writer = Writer(f"voice-store-{db.path.name if db.path else 'postgresql'}")

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
        db, conn, reader, salt = _connect(location, create, timeout, synchronous)
        return cls(db, conn, reader, salt, timeout)

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

    def _owner_hash(self, token: str | None) -> str | None:
        """The salted hash of the token that creates a session (None: anyone's)."""
        if token is None:
            return None
        # surrogatepass: any token hashes (the same bytes as UTF-8 for one that encodes), none raises
        secret = token.encode("utf-8", "surrogatepass")
        return hmac.new(self._salt.encode(), secret, hashlib.sha256).hexdigest()

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
        row = (session_id, now, now, self._owner_hash(owner), system_prompt, meta_json(meta or {}))
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                raise SessionExists(f"session {session_id!r} exists already", session_id)
            conn.execute(INSERT_SESSION, row)

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
                conn.execute("UPDATE sessions SET meta = ? WHERE id = ?", (meta_json(merged), session_id))

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
        return session_record(row)

    def session_record(self, session_id: str) -> SessionRecord:
        """The session whoever its owner: for tools run by whoever holds the file (raises :class:`UnknownSession`)."""
        return session_record(self._session_row(session_id))

    def _session_row(self, session_id: str) -> tuple[Any, ...]:
        with self._read() as conn:
            row = conn.execute(SESSION_QUERY + " WHERE s.id = ?", (session_id,)).fetchone()
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
        query = SESSION_QUERY + " ORDER BY s.updated_at DESC, s.id"
        args: tuple[Any, ...] = ()
        if limit is not None:
            query += " LIMIT ?"
            args = (limit,)
        with self._read() as conn:
            rows = conn.execute(query, args).fetchall()
        return [session_record(r) for r in rows]

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
        select = SESSION_QUERY + empty.format(s="s") + " ORDER BY s.created_at, s.id"
        if dry_run:
            with self._read() as conn:
                rows = conn.execute(select, (time.time() - older_than,)).fetchall()
            return [session_record(r) for r in rows]
        with self._write() as conn:
            cutoff = time.time() - older_than  # the lock is ours: nothing is written meanwhile
            rows = conn.execute(select, (cutoff,)).fetchall()
            conn.execute("DELETE FROM sessions" + empty.format(s="sessions"), (cutoff,))
        return [session_record(r) for r in rows]

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
        return self._add_row(session_id, turn_row(turn), finalized_at)

    def _add_row(
        self, session_id: str, row: tuple[Any, ...], finalized_at: float | None, new: NewSession | None = None
    ) -> int:
        """``new``: the session is written with this turn, in the same transaction, if it is not there yet."""
        with self._write() as conn:
            now = time.time()  # the lock is ours: written now
            if new is not None and not conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
                owner = self._owner_hash(new.owner)
                conn.execute(
                    INSERT_SESSION, (session_id, new.created_at, now, owner, new.system_prompt, meta_json(new.meta))
                )
            else:
                self._require(conn, session_id)
            seq = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM turns WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
            conn.execute(
                f"INSERT INTO turns (session_id, {TURN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, seq, *row, now, now if finalized_at is None else finalized_at),
            )
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
        return seq

    def replace_turn(self, session_id: str, seq: int, turn: Turn, *, finalized_at: float | None = None) -> None:
        """Overwrite turn ``seq`` (a finished reply cut after the fact); ``finalized_at``: when (None: now)."""
        self._replace_row(session_id, seq, turn_row(turn), finalized_at)

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
                f"SELECT {TURN_COLUMNS} FROM turns WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
        return [stored_turn(r) for r in rows]

    def turns(self, session_id: str) -> list[Turn]:
        """The session's turns in order, as :class:`core.history.Turn` objects."""
        return [s.turn for s in self.stored_turns(session_id)]
