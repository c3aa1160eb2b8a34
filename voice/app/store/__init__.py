"""Durable conversations: sessions and their finalized turns, in one SQLite file or in PostgreSQL.

One SQLite file per machine (``--db PATH``, :func:`default_db_path`
otherwise), in WAL mode so that readers (``python -m voice.history``) never
block the server's writes; or one PostgreSQL database shared by every worker
(``--db postgresql://user@host:port/dbname``), so that a conversation
started on one worker resumes on any other (:mod:`voice.app.databases` holds
what differs between the two). A turn is written in one transaction when it is final (the
user's at the ASR final, the assistant's at playback end or when it was cut)
and never before: the store only sees what :class:`core.history.History`
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
never the audio. Measured (``python -m voice.bench store``, ``docs/bench/store.json``,
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

The package: :mod:`~voice.app.store.records` (sessions and turns as Python and as rows, the
session errors), :mod:`~voice.app.store.writer` (the writer thread),
:mod:`~voice.app.store.store` (:class:`ConversationStore`) and
:mod:`~voice.app.store.recorder` (:class:`TurnRecorder`, :func:`open_history`);
:mod:`voice.app.databases` holds what differs between SQLite and PostgreSQL.
"""

from __future__ import annotations

from voice.app.databases import (
    SCHEMA_VERSION,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreLocked,
    StoreUnreachable,
    UnsupportedDatabase,
)
from voice.app.store.recorder import TurnRecorder, open_history
from voice.app.store.records import (
    AmbiguousSession,
    ForeignSession,
    SessionError,
    SessionExists,
    SessionRecord,
    StoredTurn,
    UnknownSession,
)
from voice.app.store.store import PRUNE_AFTER_S, ConversationStore, default_db_path

__all__ = [  # the store's API, its errors included (defined with the databases)
    "PRUNE_AFTER_S",
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
