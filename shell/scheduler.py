"""Engine work in the order the person needs it: one queue per engine, most urgent first.

Every session's calls to a shared engine (Whisper's passes, Smart Turn, piper)
go to that engine's :class:`EngineQueue` with what they serve (:class:`Serves`).
Its thread takes the most urgent work queued, first come first served within
the same urgency; so a committed reply's sentence is synthesized before a held
speculation's, a pause's closing partial (whose words may start the reply) is
not queued behind other sessions' previews, and a check of speech over a
paused reply goes ahead of other sessions' final passes. Work is never
interrupted once running (the engines cannot be), so the gain is in what
waits: on 2 cores a Whisper pass takes 0.3-1 s, and the work behind it used
to wait for everything submitted before it.

Two more rules keep background work from costing the critical path:

- **Cancelled work never runs.** A future cancelled while queued (its session's
  task was cancelled: a discarded speculation, a barge-in) is dropped when it
  reaches the head of the queue.
- **Stale previews are shed.** Work submitted with ``shed_after_s`` (a partial
  transcript: a preview whose newer pass is already due) that has waited longer
  than that is not run: its future fails with :class:`Shed`.
  Waiting is measured on the submitter's clock: on virtual time, where engine
  work takes no time, nothing is ever shed, and a replay stays exact.

No I/O and no asyncio: :meth:`EngineQueue.submit_as` returns a
``concurrent.futures.Future``, which the session awaits through
``asyncio.wrap_future`` (``shell/work.py``).
"""

from __future__ import annotations

import enum
import functools
import heapq
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any


class Serves(enum.IntEnum):
    """What a piece of engine work is for, most urgent first (lower runs first)."""

    HEARING = 0  # the microphone path itself (the echo canceller): it must keep up with real time
    # Whether speech over a paused reply takes the floor: the person is talking and the reply
    # stands still until it is known, so it goes ahead of everything but hearing.
    INTERRUPTION = 1
    AUDIO = 2  # audio the person is about to hear: the committed reply's tokens and its speech
    DECISION = 3  # what decides it: the final transcript, Smart Turn, the end-of-turn reading
    BACKGROUND = 4  # work that only might matter: partials, speculative replies, warming up


class Shed(Exception):
    """Work dropped unrun: it waited in the queue longer than its ``shed_after_s``."""


@dataclass(order=True)
class _Item:
    rank: int  # what the work serves; all the same when the queue keeps its arrival order
    seq: int
    serves: Serves = field(compare=False)
    now: Callable[[], float] = field(compare=False)  # the submitter's clock
    shed_after_s: float | None = field(compare=False)
    queued_at: float = field(compare=False)
    future: Future = field(compare=False)
    fn: Callable[[], Any] = field(compare=False)


@dataclass
class QueueStats:
    """What an engine's queue did: the work it ran, by what it served, and what it never ran."""

    ran: Counter[Serves] = field(default_factory=Counter)
    shed: int = 0
    cancelled: int = 0  # cancelled while queued: never run


class EngineQueue(Executor):
    """One engine's work, run by ``threads`` threads, most urgent first.

    ``priority=False`` runs it in the order it came, as a plain
    ``ThreadPoolExecutor`` would (the pipeline before issue 32, for benchmarks).
    """

    def __init__(self, name: str, threads: int = 1, priority: bool = True) -> None:
        self.name = name
        self.priority = priority
        self.stats = QueueStats()
        self._threads_wanted = threads
        self._threads: list[threading.Thread] = []
        self._heap: list[_Item] = []
        self._seq = itertools.count()
        self._lock = threading.Condition()
        self._closed = False

    # -- submission ------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Executor's interface (``loop.run_in_executor``): work of unknown purpose counts as a decision."""
        return self.submit_as(Serves.DECISION, functools.partial(fn, *args, **kwargs))

    def submit_as(
        self,
        serves: Serves,
        fn: Callable[..., Any],
        /,
        *args: Any,
        now: Callable[[], float] = time.monotonic,
        shed_after_s: float | None = None,
    ) -> Future:
        """``fn(*args)`` on the queue's thread, ahead of any less urgent work queued; ``now``: the
        submitter's clock, on which its waiting is measured; ``shed_after_s``: not run at all once
        it has waited that long (None: always run)."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name}: cannot schedule new work after shutdown")
            rank = serves if self.priority else Serves.DECISION
            item = _Item(rank, next(self._seq), serves, now, shed_after_s, now(), future, functools.partial(fn, *args))
            heapq.heappush(self._heap, item)
            self._start_threads()
            self._lock.notify()
        return future

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._heap)

    # -- the queue's threads ------------------------------------------------------

    def _start_threads(self) -> None:
        while len(self._threads) < self._threads_wanted:
            t = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True)
            self._threads.append(t)
            t.start()

    def _next(self) -> _Item | None:
        """The most urgent item still wanted, or None once shut down and empty."""
        with self._lock:
            while True:
                while not self._heap and not self._closed:
                    self._lock.wait()
                if not self._heap:
                    return None
                item = heapq.heappop(self._heap)
                if not item.future.set_running_or_notify_cancel():
                    self.stats.cancelled += 1
                    continue
                wait_s = item.now() - item.queued_at
                if item.shed_after_s is not None and wait_s > item.shed_after_s:
                    self.stats.shed += 1
                    item.future.set_exception(Shed(f"{self.name}: waited {wait_s:.2f} s in the queue"))
                    continue
                self.stats.ran[item.serves] += 1
                return item

    def _work(self) -> None:
        while (item := self._next()) is not None:
            try:
                result = item.fn()
            except BaseException as e:
                item.future.set_exception(e)
            else:
                item.future.set_result(result)
            del item  # the work's arguments (audio) are not kept while the thread waits

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            if cancel_futures:
                for item in self._heap:
                    item.future.cancel()
                self._heap.clear()
            self._lock.notify_all()
        if wait:
            for t in self._threads:
                t.join()
