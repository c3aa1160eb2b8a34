"""The databases the conversation store runs on: an SQLite file (the embedded default) and
PostgreSQL (one database shared by many workers, on any machine).

The store (:mod:`voice.app.store`) writes its SQL once, with ``?`` parameters, and asks a
:class:`Database` for what differs: connecting, the statement that opens a write transaction,
the lock that serializes writes to one session, creating and migrating the schema, and
turning the driver's errors into :class:`StoreError` with a message a person can act on.

``open_database("conversations.db")`` or ``open_database("postgresql://user@host:5432/db")``;
a URL of any other scheme is refused with one line, never taken for a file name.

Text a database cannot encode is cleaned, never a lost turn. A lone surrogate (``"\\ud800"``
in Python, which JSON allows: a DTMF digit once carried one) has no UTF-8 encoding, and the
driver refused the whole write ("persisting a turn failed"); PostgreSQL's text refuses NUL
too. Every connection passes each text parameter through :func:`storable` (and PostgreSQL's
NUL through :data:`REPLACEMENT`), so such a character is stored as U+FFFD, with its turn.
"""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

SCHEMA_VERSION = 3  # 2: turns.finalized_at; 3: tool turns

REPLACEMENT = "\ufffd"  # what a character the database cannot encode is stored as


def storable(value: Any) -> Any:
    """``value`` with every string in it (dict keys and values, list and tuple items too) encodable as UTF-8.

    A lone surrogate becomes U+FFFD; a surrogate pair standing for one
    character becomes that character. Anything else is returned as it is
    (the same object where nothing needed cleaning).
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return value
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    if isinstance(value, tuple):
        return tuple(storable(v) for v in value)
    return value


def _parameters(parameters: Any, nul: bool = False) -> Any:
    """A statement's parameters with every text :func:`storable` (``nul``: and NUL replaced)."""
    if not isinstance(parameters, tuple | list):
        return parameters
    out = storable(tuple(parameters))
    if nul:
        out = tuple(v.replace("\x00", REPLACEMENT) if isinstance(v, str) else v for v in out)
    return out


# -- errors -----------------------------------------------------------------


class StoreError(Exception):
    """The conversation store failed; the message says what, and names the file or server."""

    def __init__(self, message: str, where: Path | str | None = None) -> None:
        super().__init__(message)
        self.path = Path(where) if isinstance(where, Path) else None  # an SQLite file
        self.location = str(where) if where is not None else None  # the file, or the URL without its password


class StoreCorrupt(StoreError):
    """The file is not a (conversation) database, or is damaged."""


class StoreLocked(StoreError):
    """Another connection held the write lock for longer than the timeout."""


class StoreFull(StoreError):
    """The disk (or the database's size limit) is full."""


class UnsupportedDatabase(StoreError):
    """``--db`` names no database this program can use (another URL scheme, or no driver for it)."""


class StoreUnreachable(StoreError):
    """The database server cannot be reached (down, restarting, or the network is)."""


# -- the schema ---------------------------------------------------------------

_TURNS_TABLE = """CREATE TABLE turns (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,             -- 1, 2, ... in the session (a removed turn leaves a gap)
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    text TEXT NOT NULL,               -- what was said, for the assistant what was heard
    generated_text TEXT,              -- assistant: everything the LLM produced
    interrupted INTEGER NOT NULL DEFAULT 0,
    t_start REAL,                     -- seconds on the session's timeline
    t_end REAL,
    audio_s REAL,                     -- the turn's audio: speech heard, or reply played
    response INTEGER,                 -- assistant: the reply's id in its session
    extra TEXT,                       -- JSON object: Turn.extra, and a tool turn's call under "tool"
    created_at REAL NOT NULL,         -- Unix time it was written
    finalized_at REAL,                -- Unix time it was finalized, or last changed; NULL: stored by version 1
    PRIMARY KEY (session_id, seq)
)"""

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
    _TURNS_TABLE,
)

# SQLite, from version N to N + 1: the statements, run in one transaction with the version's update.
_SQLITE_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: ("ALTER TABLE turns ADD COLUMN finalized_at REAL",),
    # SQLite cannot change a CHECK: the table is made again, its rows copied (same columns, same order).
    2: (
        "ALTER TABLE turns RENAME TO turns_v2",
        _TURNS_TABLE,
        "INSERT INTO turns SELECT * FROM turns_v2",
        "DROP TABLE turns_v2",
    ),
}

# PostgreSQL stores began at version 3; later versions add their statements here.
_POSTGRES_MIGRATIONS: dict[int, tuple[str, ...]] = {}


def _postgres_schema() -> tuple[str, ...]:
    # PostgreSQL's REAL is 4 bytes (Unix times would lose their seconds): DOUBLE PRECISION is SQLite's REAL.
    return tuple(s.replace(" REAL", " DOUBLE PRECISION") for s in _SCHEMA)


class Connection(Protocol):
    """What the store uses of a connection: sqlite3's API, which the PostgreSQL one imitates."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...

    @property
    def in_transaction(self) -> bool: ...

    def close(self) -> None: ...


class Database(Protocol):
    location: str  # for messages: the file's path, or the URL without its password
    path: Path | None  # the SQLite file; None for a server
    errors: tuple[type[BaseException], ...]  # the driver's errors, for translate()
    lock_session: str  # appended to the SELECT of a session's row in a write transaction

    def connect(self, *, readonly: bool, timeout: float) -> Connection: ...

    def begin(self, conn: Connection) -> None: ...

    def prepare(self, conn: Connection, *, create: bool, synchronous: str) -> str: ...

    def translate(self, e: BaseException, timeout: float) -> StoreError: ...


def open_database(location: Path | str) -> Database:
    """The database at ``location``: a file path (SQLite), ``sqlite:///path`` or ``postgresql://...``."""
    if isinstance(location, str) and "://" in location:
        scheme = location.split("://", 1)[0].lower()
        if scheme in ("postgresql", "postgres"):
            return PostgresDatabase(location)
        if scheme == "sqlite":
            return SQLiteDatabase(Path(location[len("sqlite://") :]).expanduser())
        raise UnsupportedDatabase(
            f"--db {redact(location)}: {scheme}:// is not a database this program stores conversations in "
            "(a file path for SQLite, or postgresql://user@host:port/dbname)"
        )
    return SQLiteDatabase(Path(location).expanduser())


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


# -- SQLite -------------------------------------------------------------------


class _SQLiteConnection(sqlite3.Connection):
    """sqlite3's connection, whose statements store text it cannot encode as U+FFFD rather than fail."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return super().execute(sql, _parameters(parameters))


class SQLiteDatabase:
    """One file, in WAL mode: readers never wait for the writer; ``BEGIN IMMEDIATE`` serializes writes."""

    errors = (sqlite3.Error,)
    lock_session = ""  # the write lock is the whole file's, taken at BEGIN IMMEDIATE

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)

    def connect(self, *, readonly: bool, timeout: float) -> sqlite3.Connection:
        path = self.path
        if not path.exists():
            if readonly:
                raise StoreError(f"no conversation database at {path}", path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create the folder for conversation database {path} ({e})", path) from e
        elif path.is_dir():
            raise StoreError(f"conversation database {path} is a folder, not a file", path)
        conn = sqlite3.connect(
            path, timeout=timeout, isolation_level=None, check_same_thread=False, factory=_SQLiteConnection
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {round(timeout * 1000)}")
            if readonly:
                conn.execute("PRAGMA query_only = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def begin(self, conn: Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")  # the write lock from the start: no deadlock on upgrade

    def prepare(self, conn: Connection, *, create: bool, synchronous: str) -> str:
        path = self.path
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
            with _rollback_on_error(conn, self.errors):
                # another process may have created it while we waited for the lock
                if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_version'").fetchone():
                    _create(conn, _SCHEMA)
                conn.execute("COMMIT")
        return _check_version(conn, self, _SQLITE_MIGRATIONS, "BEGIN IMMEDIATE")

    def translate(self, e: BaseException, timeout: float) -> StoreError:
        if isinstance(e, StoreError):
            return e
        path, what = self.path, str(e)
        name = getattr(e, "sqlite_errorname", "") or ""
        if isinstance(e, sqlite3.ProgrammingError) and "closed" in what:
            return StoreError(f"conversation database {path} is closed", path)
        if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or "not a database" in what or "malformed" in what:
            return StoreCorrupt(
                f"conversation database {path} is corrupt ({what}); move it aside to start a new one", path
            )
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


# -- PostgreSQL ---------------------------------------------------------------


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as e:
        raise UnsupportedDatabase(
            "a postgresql:// store needs the psycopg driver: pip install 'psycopg[binary]'"
        ) from e
    return psycopg


class _PostgresConnection:
    """A psycopg connection with sqlite3's manners: ``?`` parameters, explicit BEGIN/COMMIT.

    It connects again when the server comes back (after a restart, or a
    network cut), but only between transactions: a transaction whose
    connection was lost fails, and is never silently continued on a new one.
    """

    def __init__(self, db: PostgresDatabase, *, readonly: bool, timeout: float) -> None:
        self._db, self._readonly, self._timeout = db, readonly, timeout
        self._in_transaction = False
        self._closed = False
        self._conn: Any = self._connect()

    def _connect(self) -> Any:
        psycopg = _psycopg()
        options = f"-c lock_timeout={round(self._timeout * 1000)}"
        if self._readonly:
            options += " -c default_transaction_read_only=on"
        self._conn = psycopg.connect(
            self._db.url,
            autocommit=True,  # transactions are the store's own BEGIN ... COMMIT
            connect_timeout=max(1, round(self._timeout * 5)),
            options=options,
            application_name="voice",
        )
        return self._conn

    @property
    def in_transaction(self) -> bool:
        return self._in_transaction

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        psycopg = _psycopg()
        if self._closed:
            raise psycopg.InterfaceError("the connection is closed")
        conn = self._conn
        word = sql.lstrip()[:8].upper()
        if conn.closed:
            if self._in_transaction and not word.startswith("ROLLBACK"):
                raise psycopg.OperationalError("the connection to the server was lost in the middle of a transaction")
            if word.startswith("ROLLBACK"):
                self._in_transaction = False
                return None  # the server rolled it back when the connection went
            conn = self._connect()
        sql = sql.replace("?", "%s")
        parameters = _parameters(parameters, nul=True)
        if not self._in_transaction:
            try:
                cursor = conn.execute(sql, parameters)
            except psycopg.OperationalError:
                if not conn.closed:
                    raise
                # The server went away since the last statement (a restart): nothing of a
                # transaction is lost yet (this one is a read, or BEGIN), so connect and try once more.
                cursor = self._connect().execute(sql, parameters)
            self._in_transaction = word.startswith("BEGIN")
            return cursor
        if word.startswith(("COMMIT", "ROLLBACK")):
            self._in_transaction = False
        return conn.execute(sql, parameters)

    def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            self._conn.close()


class PostgresDatabase:
    """A PostgreSQL database shared by every worker: a row lock on the session serializes its writes.

    The tables are made in the connection's schema (``search_path``): to keep
    them apart from others' in a shared database, give one in the URL,
    ``postgresql://voice@db/app?options=-csearch_path%3Dvoice``.
    """

    lock_session = " FOR UPDATE"  # two workers never number a session's turns at once

    def __init__(self, url: str) -> None:
        self.url = url
        self.location = redact(url)
        self.path = None
        self.errors = (_psycopg().Error,)

    def connect(self, *, readonly: bool, timeout: float) -> _PostgresConnection:
        return _PostgresConnection(self, readonly=readonly, timeout=timeout)

    def begin(self, conn: Connection) -> None:
        conn.execute("BEGIN")

    def prepare(self, conn: Connection, *, create: bool, synchronous: str) -> str:
        # Durability is the server's (synchronous_commit): a committed turn is on its disk, or its replica's.
        where = self.location
        conn.execute("BEGIN")
        with _rollback_on_error(conn, self.errors):
            # one worker at a time creates or migrates the tables; the others wait here, then find them
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('voice conversation store'))")
            ours = conn.execute(
                "SELECT to_regclass('schema_version') IS NOT NULL, to_regclass('sessions') IS NOT NULL,"
                " to_regclass('turns') IS NOT NULL"
            ).fetchone()
            if not ours[0]:
                if ours[1] or ours[2]:
                    raise StoreCorrupt(
                        f"{where} has tables named sessions or turns that are not a conversation store's; "
                        "use another database, or another schema (options=-csearch_path=...)",
                        where,
                    )
                if not create:
                    raise StoreError(f"{where} holds no conversations yet (an empty database)", where)
                _create(conn, _postgres_schema())
            conn.execute("COMMIT")
        return _check_version(conn, self, _POSTGRES_MIGRATIONS, "BEGIN")

    def translate(self, e: BaseException, timeout: float) -> StoreError:
        if isinstance(e, StoreError):
            return e
        psycopg = _psycopg()
        where, what = self.location, " ".join(str(e).split()) or type(e).__name__
        errors = psycopg.errors
        if isinstance(e, errors.LockNotAvailable):
            return StoreLocked(f"conversation database {where}: a row stayed locked for {timeout:g} s ({what})", where)
        if isinstance(e, errors.DiskFull | errors.ProgramLimitExceeded):
            return StoreFull(f"conversation database {where}: the server's disk is full ({what})", where)
        if isinstance(e, errors.UndefinedTable | errors.UndefinedColumn):
            return StoreCorrupt(f"conversation database {where}: its tables were changed or dropped ({what})", where)
        if isinstance(e, errors.InsufficientPrivilege | errors.ReadOnlySqlTransaction):
            return StoreError(f"conversation database {where}: not allowed ({what})", where)
        if isinstance(e, psycopg.InterfaceError) and "closed" in what:
            return StoreError(f"conversation database {where} is closed", where)
        if isinstance(e, psycopg.OperationalError):
            return StoreUnreachable(f"conversation database {where}: the server cannot be reached ({what})", where)
        return StoreError(f"conversation database {where}: {what}", where)


# -- shared -------------------------------------------------------------------


@contextlib.contextmanager
def _rollback_on_error(conn: Connection, errors: tuple[type[BaseException], ...]):
    try:
        yield
    except BaseException:
        with contextlib.suppress(*errors):
            conn.execute("ROLLBACK")
        raise


def _create(conn: Connection, schema: tuple[str, ...]) -> None:
    for statement in schema:
        conn.execute(statement)
    conn.execute(
        "INSERT INTO schema_version (version, owner_salt) VALUES (?, ?)", (SCHEMA_VERSION, secrets.token_hex(16))
    )


def _check_version(conn: Connection, db: Database, migrations: dict[int, tuple[str, ...]], begin: str) -> str:
    """The owner salt, once the schema is :data:`SCHEMA_VERSION` (an older one is migrated, a newer refused)."""
    where = db.path or db.location
    row = conn.execute("SELECT version, owner_salt FROM schema_version").fetchone()
    if row is None:
        raise StoreCorrupt(f"conversation database {db.location} has no schema version; move it aside", where)
    version, salt = row
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"conversation database {db.location} has schema version {version}, newer than this program's "
            f"({SCHEMA_VERSION}); upgrade voice to read it",
            where,
        )
    if version < SCHEMA_VERSION:
        conn.execute(begin)
        with _rollback_on_error(conn, db.errors):
            # another process may have migrated it while we waited for the lock
            version = conn.execute("SELECT version FROM schema_version").fetchone()[0]
            for v in range(version, SCHEMA_VERSION):
                if v not in migrations:
                    raise StoreError(f"conversation database {db.location}: no migration from schema version {v}")
                for statement in migrations[v]:
                    conn.execute(statement)
            conn.execute("UPDATE schema_version SET version = ?", (max(version, SCHEMA_VERSION),))
            conn.execute("COMMIT")
    return salt
