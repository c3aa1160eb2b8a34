"""The recorder: a session's turns handed to the store's writer thread as its history finalizes them."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from core.history import History, Turn
from voice.app.databases import StoreError
from voice.app.store.records import NewSession, SessionError, UnknownSession, turn_row
from voice.app.store.store import ConversationStore

log = logging.getLogger(__package__)  # voice.app.store: the name its log lines always had


@dataclass(eq=False)
class _Write:
    """A write a recorder owes: ``op`` on ``turn``, with its columns as they were when the history told of it."""

    op: str  # "add" | "replace" | "remove"
    turn: Turn
    row: tuple[Any, ...] | None  # None for "remove"
    at: float  # Unix time the history told of it: the turn's finalized_at


class TurnRecorder:
    """Persists a session's turns as its :class:`core.history.History` finalizes them.

    A :class:`core.history.HistoryListener`: ``History(recorder.load(),
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
        self._new: NewSession | None = None  # a new session, not in the store until its first turn is
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
            self._new = NewSession(owner, system_prompt, time.time(), dict(meta or {}))

    @property
    def stored(self) -> bool:
        """The session is in the store: it was resumed, or its first turn is committed."""
        with self._lock:
            return self._new is None

    def record(self, turn: Turn) -> None:
        """Write a finalized turn (soon, or once the store works again)."""
        at, row = time.time(), turn_row(turn)
        with self._lock:
            if self._known(turn):
                return  # written already, or on its way
            self._backlog.append(_Write("add", turn, row, at))
        self._schedule()

    def amend(self, turn: Turn) -> None:
        """``turn``, written or on its way, was modified: write it again."""
        at, row = time.time(), turn_row(turn)
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

    def keep_recording(self, path: str) -> bool:
        """This run of the conversation was recorded at ``path`` (``--record``): its name is added to the
        session's ``meta["recordings"]``, where ``python -m voice.history export --audio`` finds it. Only
        for a session in the store (nothing said: not stored, nor is its recording's name); after
        :meth:`flush`. Blocking. False (logged) when the store fails."""
        if not self.stored:
            return False
        try:
            kept = self.store.session_record(self.session_id).meta.get("recordings") or []
            self.store.update_session(self.session_id, meta={"recordings": [*kept, path]})
        except (StoreError, SessionError) as e:
            log.warning("session %s: the recording's name is not kept: %s", self.session_id, e)
            return False
        return True

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
