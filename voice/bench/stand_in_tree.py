"""A stand-in for ``python -m voice.run``'s process tree, built in a second (``python -m voice.bench orphans``
and tests/test_reaper.py compare ways to end it with it).

    python -m voice.bench.stand_in_tree GUARD

It is what vLLM makes, without loading anything: the parent creates shared memory (which starts
Python's resource tracker, as vLLM's message queues do); a loading thread starts an "engine core"
by multiprocessing spawn and waits until it is up (as voice.run's engine loading thread does); the
engine core starts a "worker" the same way, and shuts down on SIGTERM, its worker with it (as
vLLM's does); the parent shuts it down as it exits cleanly. It also starts a daemon that leaves
the tree (a double fork into a session of its own, as ``pg_ctl`` starts PostgreSQL). Then it
prints one JSON line, ``{"engine core": PID, "worker": PID, "daemon": PID}``, and waits to be
ended. SIGUSR2 raises an exception in its main thread: a start-up that fails.

GUARD, what ends the tree with it:

- ``none``: nothing;
- ``group``: the parent leads a process group and kills it from its ``atexit`` and its SIGTERM
  handler (SIGINT is Python's KeyboardInterrupt, which runs ``atexit`` too);
- ``pdeathsig``: each direct child asks for SIGTERM when the parent dies (``PR_SET_PDEATHSIG``);
- ``reaper``: shell/reaper.py, the daemon handed to it by ``adopt``.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing import shared_memory
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event

from shell.reaper import adopt, start_reaper

GUARDS = ("none", "group", "pdeathsig", "reaper")
LIFETIME_S = 300  # the longest any of its processes lives: a run ended before it cleaned up leaves none for long

# The daemon: a double fork into a session of its own, its pid written to argv[1] (pg_ctl's way).
DAEMON = """
import os, sys, time
if os.fork():
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
with open("/proc/self/comm", "w") as f:
    f.write("daemon")
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(300)  # LIFETIME_S: a run that is itself killed leaves it a while only
"""


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


def _name(title: str) -> None:
    """Name this process as ps shows it (vLLM's are VLLM::EngineCore and VLLM::Worker)."""
    with open("/proc/self/comm", "w") as f:
        f.write(title)


def _worker() -> None:
    _name("worker")
    time.sleep(LIFETIME_S)


def _engine_core(guard: str, ready: Event, worker_pid: Synchronized) -> None:
    _name("engine core")
    if guard == "pdeathsig":
        _die_with_parent()
    # As vLLM's: SIGTERM is a clean shutdown, which ends its worker (a daemonic process).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    worker = multiprocessing.get_context("spawn").Process(target=_worker, name="stand-in worker", daemon=True)
    worker.start()
    worker_pid.value = worker.pid
    ready.set()
    worker.join()


def _load_engine(guard: str) -> tuple[BaseProcess, int]:
    """The engine core and its worker's pid, started as voice.run starts vLLM's: from a loading thread,
    which waits for it."""
    spawn = multiprocessing.get_context("spawn")
    ready, worker_pid = spawn.Event(), spawn.Value("i", 0)
    engine = spawn.Process(target=_engine_core, args=(guard, ready, worker_pid), name="stand-in engine core")
    started: list[BaseProcess] = []

    def load() -> None:
        engine.start()
        ready.wait()
        started.append(engine)

    loading = threading.Thread(target=load, name="load-engines")
    loading.start()
    loading.join()
    return started[0], worker_pid.value


def _start_daemon(guard: str) -> int:
    with tempfile.TemporaryDirectory() as d:
        pidfile = os.path.join(d, "pid")
        launcher = [sys.executable, "-c", DAEMON, pidfile]
        hook = _die_with_parent if guard == "pdeathsig" else None
        subprocess.run(launcher, check=True, preexec_fn=hook)
        while not os.path.exists(pidfile):
            time.sleep(0.01)
        with open(pidfile) as f:
            return int(f.read())


def _fail(*_: object) -> None:
    raise RuntimeError("stand-in: a start-up that fails")


def _guard_with_group() -> None:
    if os.getpgid(0) != os.getpid():
        os.setpgid(0, 0)

    def kill_group() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.killpg(0, signal.SIGTERM)

    atexit.register(kill_group)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def stand_in(guard: str) -> None:
    signal.signal(signal.SIGUSR2, _fail)
    if guard == "reaper":
        start_reaper()
    elif guard == "group":
        _guard_with_group()
    memory = shared_memory.SharedMemory(create=True, size=1 << 20)  # the resource tracker starts
    engine, worker = _load_engine(guard)
    daemon = _start_daemon(guard)
    if guard == "reaper":
        adopt(daemon)
    try:
        print(json.dumps({"engine core": engine.pid, "worker": worker, "daemon": daemon}), flush=True)
        time.sleep(LIFETIME_S)
    finally:  # a clean exit, as vLLM's: the engine core is asked to shut down
        engine.terminate()
        engine.join(5)
        memory.close()
        memory.unlink()


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in GUARDS:
        sys.exit(f"usage: python -m voice.bench.stand_in_tree {{{','.join(GUARDS)}}}")
    stand_in(sys.argv[1])
