"""Every process a program starts ends with it, however it ends (shell/reaper.py).

A program is ended by SIGKILL, SIGTERM, SIGINT (to it alone, not its group) or an exception, and
no process of its tree runs 5 s later: the stand-in for voice.run's tree (voice/bench/stand_in_tree.py:
shared memory and its resource tracker, an engine core, its worker, a daemon) and a PostgreSQL
server started by pg_ctl; and, killed by SIGKILL, ``python -m voice.run --serve`` serving and a
benchmark while vLLM loads (where a killed vLLM worker may still be torn down by the kernel).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from shell.reaper import alive, descendants, exiting, proc_stat
from tests.conftest import ROOT
from voice.bench.common import free_port

WAYS = {"SIGKILL": signal.SIGKILL, "SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "exception": signal.SIGUSR2}


def start(*args: str, stdout: int | None = subprocess.PIPE, log: Path | None = None) -> subprocess.Popen:
    """A program in a session of its own, SIGINT at its default (as from a terminal: a test run in
    the background ignores SIGINT, and an ignored signal stays ignored through exec)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with open(log or os.devnull, "w") as err:
            return subprocess.Popen(
                [sys.executable, *args], cwd=ROOT, stdout=stdout, stderr=err, start_new_session=True
            )
    finally:
        signal.signal(signal.SIGINT, previous)


def tree(pid: int, *more: int) -> dict[int, int]:
    """The process ``pid``, ``more`` and every process descended from them: pid -> start time."""
    roots = {pid, *more}
    return descendants(roots) | {p: s[3] for p in roots if (s := proc_stat(p)) is not None}


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def names(pids: dict[int, int]) -> list[str]:
    return [cmdline(pid)[:100] for pid in pids]


def left_after(pids: dict[int, int], seconds: float, parent: subprocess.Popen) -> dict[int, int]:
    """Those of ``pids`` still running ``seconds`` from now (or none, as soon as none is)."""
    deadline = time.monotonic() + seconds
    while True:
        parent.poll()  # reaped once it ends
        left = {p: s for p, s in pids.items() if alive(p, s)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def gone_after_5_s(pids: dict[int, int], parent: subprocess.Popen) -> None:
    """None of ``pids`` runs 5 s after its program was killed, but those being torn down (exiting,
    or a SIGKILL pending), and the reaper and the resource tracker, which wait for them; nothing at
    all 20 s after.

    The allowance is the kernel's: a killed vLLM worker took 2.5-6 s to be torn down on a loaded
    2-core CPU (every vLLM worker is pinned to one core, which other vLLM instances kept busy)."""
    left = left_after(pids, 5, parent)
    dying = {p for p in left if exiting(p)}
    waiting = {p for p in left if "shell/reaper.py" in cmdline(p) or "resource_tracker" in cmdline(p)}
    assert not left.keys() - dying - (waiting if dying else set()), names(left)
    assert not left_after(left, 15, parent), names(left)


def kill_all(pids: dict[int, int]) -> None:
    """After a failed check: nothing of the test outlives it."""
    live = {p: s for p, s in pids.items() if alive(p, s)}
    for pid, start in (live | descendants(set(live))).items():
        if alive(pid, start):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("way", list(WAYS))
def test_the_stand_in_tree_ends_with_its_parent(way):
    proc = start("-m", "voice.bench.stand_in_tree", "reaper")
    started = json.loads(proc.stdout.readline())  # the engine core, its worker, the daemon
    pids = tree(proc.pid, *started.values())
    try:
        assert len(pids) == 6, names(pids)  # parent, reaper, resource tracker, engine core, worker, daemon
        os.kill(proc.pid, WAYS[way])
        left = left_after(pids, 5, proc)
        assert not left, names(left)
    finally:
        kill_all(pids)
        proc.wait(5)


def test_the_reaper_ends_at_once_with_a_parent_that_exits_and_kills_nothing_else():
    bystander = subprocess.Popen(["sleep", "30"], start_new_session=True)  # started by the test, not the parent
    code = "from shell.reaper import start_reaper; print(start_reaper().pid, flush=True); import time; time.sleep(0.5)"
    proc = start("-c", code)
    reaper = int(proc.stdout.readline())
    start_time = proc_stat(reaper)[3]
    try:
        assert proc.wait(5) == 0
        assert not left_after({reaper: start_time}, 1, proc)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_a_process_name_with_parentheses_and_spaces_is_read():
    child = subprocess.Popen(
        [sys.executable, "-c", "open('/proc/self/comm', 'w').write('a) (b c'); print(flush=True); input()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        child.stdout.readline()
        assert Path(f"/proc/{child.pid}/comm").read_text() == "a) (b c\n"
        state, ppid, session, _ = proc_stat(child.pid)
        assert (ppid, session) == (os.getpid(), os.getsid(0)) and state in "RS"
        assert child.pid in descendants({os.getpid()})
    finally:
        child.kill()
        child.wait()


def test_a_postgresql_server_ends_with_the_process_that_started_it():
    """pg_ctl leaves the server in a session of its own, out of the tree: it is adopted."""
    from voice.bench.postgres import server_bin

    if server_bin() is None:
        pytest.fail("no PostgreSQL server is installed: scripts/setup installs Debian's postgresql")
    code = (
        "from shell.reaper import start_reaper; start_reaper()\n"
        "from voice.bench.postgres import PostgresServer\n"
        "pg = PostgresServer(); pg.start()\n"
        "print(pg.root, open(pg.data / 'postmaster.pid').readline().strip(), flush=True)\n"
        "import time; time.sleep(60)\n"
    )
    proc = start("-c", code)
    root, postmaster = proc.stdout.readline().split()
    pids = tree(proc.pid, int(postmaster))
    try:
        assert int(postmaster) in pids and len(pids) > 3, names(pids)  # its own processes too
        os.kill(proc.pid, signal.SIGKILL)
        left = left_after(pids, 5, proc)
        assert not left, names(left)
    finally:
        kill_all(pids)
        proc.wait(5)
        shutil.rmtree(root, ignore_errors=True)


def vllm_processes(pids: dict[int, int]) -> set[str]:
    """The titles vLLM gives its processes, of those among ``pids``."""
    return {cmdline(pid).strip() for pid in pids} & {"VLLM::EngineCore", "VLLM::Worker"}


@pytest.mark.engines
def test_a_server_killed_by_sigkill_leaves_no_process(tmp_path):
    """kill -9 of ``python -m voice.run --serve``: vLLM's engine core, its worker and the resource
    tracker ran on before (GBs of memory, a busy core)."""
    port = free_port()
    log = tmp_path / "serve.log"
    proc = start(
        "-m", "voice.run", "--serve", "--port", str(port), "--db", str(tmp_path / "c.db"), stdout=None, log=log
    )
    pids: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    if json.loads(r.read())["status"] == "ready":
                        break
            except OSError:
                time.sleep(0.5)
        pids = tree(proc.pid)
        assert vllm_processes(pids) == {"VLLM::EngineCore", "VLLM::Worker"}, names(pids)
        os.kill(proc.pid, signal.SIGKILL)  # the process alone, not its group
        gone_after_5_s(pids, proc)
    finally:
        kill_all(pids | tree(proc.pid))
        proc.wait(5)


@pytest.mark.engines
def test_a_benchmark_killed_by_sigkill_while_vllm_loads_leaves_no_process(tmp_path):
    """The engine core only takes note of a SIGTERM until its model is loaded: it is killed 1 s later."""
    log = tmp_path / "bench.log"
    bench = ("-m", "voice.bench", "long_conversation", "--out", str(tmp_path / "out"), "--turns", "2")
    proc = start(*bench, stdout=None, log=log)
    pids: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 300
        while vllm_processes(pids := tree(proc.pid)) != {"VLLM::EngineCore", "VLLM::Worker"}:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        gone_after_5_s(pids, proc)
    finally:
        kill_all(pids | tree(proc.pid))
        proc.wait(5)
