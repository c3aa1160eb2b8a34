"""The server's heap across sessions: what a closed session freed goes back to the system.

Each session allocates native buffers of its own (the echo canceller, the
resamplers, numpy audio buffers: 7.7 MB for the ASR's 120 s ring alone) and
frees them when it ends. glibc's malloc raises its mmap threshold to the size
of each large mapped block that is freed (up to 32 MiB), so after the first
session such buffers come from the heap: zeroed there by calloc (every page
resident, even in an idle session), and kept, with whatever fragments
around them, when the session ends.

The server calls :func:`tune` when it starts and :func:`after_session` when a
session has closed. What they do was chosen by measurement,
``python -m voice.bench session_memory`` (``docs/bench/session_memory.json``): a
warm-up conversation, then 1,000 sessions on /ws and 1,000 on /v1/realtime,
4 at a time, each with 0.2 s of speech; the server's RSS against its figure
after the warm-up (983-1003 MB); how long a session took to open (hello to
ready, p50/p95); and apart, each engine pass in a fresh process with the
strategy (median of 10 rounds' medians, in ms; with trim, ``malloc_trim(0)``
before each pass)::

    strategy (VOICE_HEAP)      RSS growth      opening /ws   final ASR  partial
    none                       +1.1% / +0.7%   3.3/13.9 ms   321        133
    trim (after each session)  +0.2% / +0.4%   6.0/39.4 ms   317         98
    mmap (128 KiB)             +0.3% / +0.5%   4.1/14.1 ms   434        168
    mmap-4m (4 MiB)            +0.4% / +0.5%   5.0/31.2 ms   302         94

(growth after the /ws sessions / after all of them.) ``mmap+trim`` gave
-0.7% and the final pass 453 ms; ``MALLOC_ARENA_MAX=2`` from the process's
start +0.5%, ``MALLOC_MMAP_THRESHOLD_=131072`` from the start the same as
``mmap`` (417 ms). A second sitting alternated none, mmap-4m and trim twice,
300 sessions a path (``session_memory-alternating.json``): growth up to
+4.1%, +0.5%, +0.3%; opening /ws p50 3.1-3.4, 3.5-3.6, 5.2-7.3 ms. Before the
server let go of a closed session's state at once (``Connection.release``),
in the first run on that commit, 2,000 sessions grew it +456% with nothing
done, +46% with the 128 KiB threshold.
Voice-to-voice at the client was within this shared machine's noise for all.

So: **mmap-4m**, ``mallopt(M_MMAP_THRESHOLD, 4 MiB)`` once at start-up. A
fixed threshold is never raised: blocks of 4 MiB and more (the ring) get
their own mapping, zeroed lazily by the kernel, and go back to the system when
freed; smaller ones reuse the heap as before. At 128 KiB, CTranslate2's
per-pass buffers would be mapped and faulted in again on every Whisper pass
(+35%); ``malloc_trim`` on every close takes the arenas' locks while sessions
run (a session took 1.5-2x as long to open). It needs no environment variable, which glibc reads only when the
process starts (``python -m voice.run --serve`` would have to re-exec).

``VOICE_HEAP`` (read by :func:`tune`) picks another strategy, for that
script: ``none``, ``trim`` (``malloc_trim(0)`` after each session, in a worker
thread), ``mmap``, ``mmap+trim``, ``mmap-4m``. Off glibc all is a no-op.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import threading

log = logging.getLogger("voice.heap")

STRATEGIES = ("none", "trim", "mmap", "mmap+trim", "mmap-4m")
DEFAULT = "mmap-4m"

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
