"""The server's heap across sessions: what a closed session freed goes back to the system.

Each session allocates native buffers of its own (the echo canceller, the
resamplers, numpy audio buffers: 7.7 MB for the ASR's 120 s ring alone, ONNX
Runtime's per-call tensors) and frees them when it ends. glibc's malloc raises
its mmap threshold each time it frees a large mapped block (up to 32 MiB), so
from the first session on, these buffers come from the heap, where freed
memory is kept for reuse and sessions that open and close at different times
fragment it.

The server calls :func:`tune` when it starts and :func:`after_session` when a
session has closed. What they do was chosen by measurement
(``scripts/bench_session_memory``: a warm-up conversation, then 1,000
sessions on /ws and 1,000 on /v1/realtime, 4 at a time, each with 0.2 s of
speech; ``docs/bench/session_memory.json``). The server's RSS over its
figure after the warm-up (983-996 MB), after the /ws sessions / after all:

=========================  ==============  =============================
strategy (VOICE_HEAP)      growth          session opening p50/p95 (ms)
=========================  ==============  =============================
none                       +3.3% / +2.8%   /ws 3.5/12.3, realtime 8.5/65
trim (after each session)  +0.2% / +0.7%   /ws 6.3/22.4, realtime 9.3/19
mmap (at start)            +0.3% / +0.5%   /ws 3.4/9.5, realtime 6.7/13
mmap+trim                  +0.2% / +0.4%   /ws 3.4/6.7, realtime 6.0/10
=========================  ==============  =============================

(``MALLOC_ARENA_MAX=2`` from the start: +2.0%; ``MALLOC_MMAP_THRESHOLD_``
from the start is the same as ``mmap``. Before the server let go of a closed
session's state at once (``Connection.release``), the same run grew +411% with
nothing done and +45% with the mmap threshold.) Voice-to-voice of a
conversation, alone or while sessions open and close, was within this shared
machine's noise for all of them.

So: **mmap**, i.e. ``mallopt(M_MMAP_THRESHOLD, 128 KiB)`` once at start-up
(glibc's initial value, kept: a fixed threshold is not raised as blocks are
freed). Every allocation of 128 KiB or more gets its own mapping and goes back
to the system when freed; smaller ones reuse the heap. It costs a page fault
per 4 KiB of a large buffer first touched, nothing measurable here, and
nothing per session. No environment variable is needed, so nothing has to be
set before the process starts (glibc reads ``MALLOC_*`` only then).

``VOICE_HEAP`` (read by :func:`tune`) picks another strategy, for that
script: ``none``, ``trim`` (``malloc_trim(0)`` after each session, in a worker
thread), ``mmap``, ``mmap+trim``. Off glibc everything here is a no-op.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import threading

log = logging.getLogger("voice.heap")

STRATEGIES = ("none", "trim", "mmap", "mmap+trim", "mmap-4m")
DEFAULT = "mmap"

M_MMAP_THRESHOLD = -3  # mallopt()'s parameter (glibc's malloc.h)
MMAP_THRESHOLDS = {"mmap": 128 * 1024, "mmap+trim": 128 * 1024, "mmap-4m": 4 << 20}


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        return libc
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return None


_libc = _glibc()
_strategy = "none"
_trimming = threading.Lock()


def strategy() -> str:
    """The strategy in effect (``none`` until :func:`tune`, and off glibc)."""
    return _strategy


def tune() -> None:
    """At start-up: the strategy (``VOICE_HEAP``, else :data:`DEFAULT`) and the allocator's settings for it."""
    global _strategy
    chosen = os.environ.get("VOICE_HEAP", DEFAULT)
    if chosen not in STRATEGIES:
        log.warning("VOICE_HEAP=%s is not one of %s: %s is used", chosen, ", ".join(STRATEGIES), DEFAULT)
        chosen = DEFAULT
    if _libc is None:
        return
    _strategy = chosen
    threshold = MMAP_THRESHOLDS.get(chosen)
    if threshold is not None and _libc.mallopt(M_MMAP_THRESHOLD, threshold) != 1:
        log.warning("mallopt(M_MMAP_THRESHOLD) failed: the heap is left as it is")


async def after_session() -> None:
    """A session has closed and freed its state: with ``trim``, give the heap's free memory back."""
    if "trim" in _strategy:
        await asyncio.to_thread(trim)


def trim() -> None:
    """Give the heap's free memory back to the system now (``malloc_trim(0)``); blocks while it runs."""
    if _libc is None:
        return
    if _trimming.acquire(blocking=False):  # one at a time: a trim under way takes this session's memory too
        try:
            _libc.malloc_trim(0)
        finally:
            _trimming.release()
