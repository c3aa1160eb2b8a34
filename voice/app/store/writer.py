"""The store's writer thread: writes leave the caller's thread (and the event loop) for one daemon thread, in order."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__package__)  # voice.app.store: the name its log lines always had


class Writer:
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
