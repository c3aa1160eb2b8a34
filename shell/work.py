"""Work in flight, and the one place engine work leaves the session's stages.

Every engine call of a session (a Whisper pass, Smart Turn, an LLM request,
a TTS synthesis, the echo canceller) is submitted here with what it serves
(:class:`Serves`). Work for an engine's queue (``shell/scheduler.py``) runs
there most urgent first, across every session that shares the engine; work
on the event loop (the echo canceller, the look-back VAD) and LLM requests
run at once, and are only counted (vLLM batches every request in flight:
its request priorities would order nothing here, docs/bench/turn-taking.md).

The tracker counts the tasks and threads still working for the session, so
that on virtual time the pump can wait for them (:meth:`Work.settle`) and
engine work takes no virtual time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, TypeVar

from shell.scheduler import EngineQueue, Serves, Shed

__all__ = ["Serves", "Shed", "Work"]

T = TypeVar("T")


class Work:
    """The session's engine work: submitted with what it serves, and counted until it is done."""

    def __init__(self, on_error: Callable[[str, str], None], now: Callable[[], float] = time.monotonic) -> None:
        """``on_error(where, message)``: a task that failed on an exception nobody caught; ``now``:
        the session's clock, on which queued work's waiting is measured."""
        self._on_error = on_error
        self._now = now
        self._tasks: set[asyncio.Task] = set()
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.submitted: Counter[Serves] = Counter()  # engine calls so far, by what they serve

    # -- submission ------------------------------------------------------------

    def call(self, serves: Serves, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Engine work on the event loop's thread: ``fn(*args, **kwargs)`` now, returning what it
        returns (a value, or an LLM request's coroutine or stream, which runs as it is awaited)."""
        self.submitted[serves] += 1
        return fn(*args, **kwargs)

    def in_thread(
        self,
        serves: Serves,
        executor: Executor | None,
        fn: Callable[..., T],
        *args: Any,
        shed_after_s: float | None = None,
    ) -> asyncio.Future[T]:
        """Engine work on ``executor``'s threads: ``fn(*args)``, awaited on the event loop. On an
        engine's queue it waits behind more urgent work only, is never run once its awaiter is
        cancelled, and with ``shed_after_s`` is dropped (:class:`Shed`) once it has waited that long."""
        self.submitted[serves] += 1
        if isinstance(executor, EngineQueue):
            queued = executor.submit_as(serves, fn, *args, now=self._now, shed_after_s=shed_after_s)
            return asyncio.wrap_future(queued)
        return asyncio.get_running_loop().run_in_executor(executor, fn, *args)

    # -- work in flight ----------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run ``coro`` in a task of its own, counted as work until it ends."""
        self.started()
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self._tasks.discard(t)
            self.done()
            if not t.cancelled() and t.exception() is not None:
                self._on_error("internal", repr(t.exception()))

        task.add_done_callback(done)
        return task

    def started(self) -> None:
        """Work that is not a task of :meth:`spawn`'s has begun (a chunk queued for synthesis)."""
        self._busy += 1
        self._idle.clear()

    def done(self) -> None:
        """Work counted by :meth:`started` has ended."""
        self._busy -= 1
        if self._busy == 0:
            self._idle.set()

    @property
    def busy(self) -> bool:
        return self._busy > 0

    async def settle(self) -> None:
        """Wait until all the work started so far has ended."""
        while self._busy:
            self._idle.clear()
            await self._idle.wait()

    async def cancel(self, *others: asyncio.Task) -> None:
        """Cancel the tasks in flight and ``others``, and wait for them to end."""
        tasks = [*self._tasks, *others]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
