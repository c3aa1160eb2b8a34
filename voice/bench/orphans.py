"""What a killed program leaves running, per way of ending and per guard.

    python -m voice.bench orphans [--out DIR] [--part all|stand-in|voice.run] [--wait-s 5]

Two programs are ended in four ways: SIGKILL, SIGTERM, SIGINT (to the process, not its group) and
an exception raised in its main thread (SIGUSR2, whose handler raises: a start-up that fails).

- ``stand-in``: voice/bench/stand_in_tree.py, a stand-in for voice.run's tree built in a second (a
  parent, its shared memory and Python's resource tracker, an engine core started from a loading
  thread, its worker, a daemon), under each guard: ``none``, ``group`` (the parent kills its
  process group from ``atexit`` and its SIGTERM handler), ``pdeathsig`` (``PR_SET_PDEATHSIG`` in
  each direct child), ``reaper`` (shell/reaper.py). Ended once its tree stands.
- ``voice.run``: ``python -m voice.run --serve`` on the real engines, without its reaper (``none``:
  as before it had one) and with it (``reaper``). SIGKILL once it serves; the others while vLLM's
  engine core loads the model (its worker started), when its own handlers can do least. 30-60 s
  a run on a 2-core CPU.

Per run: the program's processes (the parent, every process descended from it just before the
end, the daemon); those still running WAIT_S seconds after the signal, and which of them were
being torn down (exiting, or a SIGKILL pending); when the last one ended (watched on while a
reaper still works, up to 30 s); the shared memory in /dev/shm they had mapped that was still
there then; and which had ended before the signal, half a second after the tree stood (a
guard may end part of it early). Whatever is left is killed and unlinked after each run. Prints a
Markdown table and writes DIR/orphans.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from shell.reaper import alive, descendants, exiting, proc_stat
from voice.bench.common import ROOT, free_port, parser
from voice.bench.stand_in_tree import GUARDS

ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR"}

LAST_S = 30.0  # the longest a run is watched for its last process to end

WAYS = {"SIGKILL": signal.SIGKILL, "SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT, "exception": signal.SIGUSR2}

# voice.run with SIGUSR2 raising in its main thread, and without its reaper for the "none" guard.
VOICE_RUN = """\
import signal, sys

def fail(*_):
    raise RuntimeError("orphans: a start-up that fails")

signal.signal(signal.SIGUSR2, fail)
if sys.argv[1] == "none":
    import shell.reaper

    shell.reaper.start_reaper = lambda: None  # voice.run as it was before it had a reaper
from voice.app.cli import main

sys.exit(main(sys.argv[2:]))
"""


def _start(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``cmd`` in a session of its own, SIGINT at its default (as from a terminal; a benchmark started
    in the background ignores SIGINT, and an ignored signal stays ignored through exec)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with open(log, "wb") as out:
            return subprocess.Popen(
                cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=out, start_new_session=True, env={**os.environ, **ENV}
            )
    finally:
        signal.signal(signal.SIGINT, previous)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _role(pid: int, parent: int, daemon: int | None) -> str:
    """What ``pid`` is in the program's tree."""
    cmdline = _read(f"/proc/{pid}/cmdline")
    if pid == parent:
        return "parent"
    if pid == daemon:
        return "daemon"
    if b"shell/reaper.py" in cmdline:
        return "reaper"
    if b"resource_tracker" in cmdline:
        return "resource tracker"
    if cmdline.startswith(b"VLLM::"):  # vLLM names its processes (comm keeps 15 characters of it)
        return cmdline.split(b"\0")[0].decode().strip()
    return _read(f"/proc/{pid}/comm").decode().strip()  # the stand-in names its processes


def _tree(parent: int, daemon: int | None) -> dict[int, tuple[int, str]]:
    """The program's processes now: pid -> (start time, role)."""
    pids = descendants({parent} | ({daemon} if daemon else set()))
    pids |= {p: s[3] for p in (parent, daemon) if p and (s := proc_stat(p)) is not None}
    return {pid: (start, _role(pid, parent, daemon)) for pid, start in pids.items()}


def _shared_memory(pids: dict[int, tuple[int, str]]) -> set[str]:
    """The files in /dev/shm that these processes map."""
    found = set()
    for pid in pids:
        for line in _read(f"/proc/{pid}/maps").decode(errors="replace").splitlines():
            if "/dev/shm/" in line:
                found.add(line[line.index("/dev/shm/") :].removesuffix(" (deleted)"))
    return found


def _end(
    proc: subprocess.Popen[bytes], daemon: int | None, way: str, wait_s: float, before: dict[int, tuple[int, str]]
) -> dict[str, Any]:
    """Signal the program once its tree is ``before``; what is left ``wait_s`` later."""
    time.sleep(0.5)  # a guard that ends part of the tree early (pdeathsig) has done so by now
    early = sorted(role for pid, (start, role) in before.items() if not alive(pid, start))
    tree = before | _tree(proc.pid, daemon)
    shm = {p for p in _shared_memory(tree) if os.path.exists(p)}  # named: not a semaphore unlinked at once
    os.kill(proc.pid, WAYS[way])
    t0 = time.monotonic()

    def running() -> dict[int, tuple[int, str]]:
        proc.poll()  # the parent reaped once it ends: a zombie has ended
        return {pid: (start, role) for pid, (start, role) in tree.items() if alive(pid, start)}

    while running() and time.monotonic() - t0 < wait_s:
        time.sleep(0.05)
    left = sorted(role for pid, (_, role) in running().items())
    torn_down = sorted(role for pid, (_, role) in running().items() if exiting(pid))
    # Then, while a reaper still works (the tree's end under way), until the last one has ended.
    while (now := running()) and "reaper" in {role for _, role in now.values()} and time.monotonic() - t0 < LAST_S:
        time.sleep(0.05)
    gone_s = None if running() else round(time.monotonic() - t0, 2)
    shm_left = sorted(p for p in shm if os.path.exists(p))
    _clean_up(proc, tree, shm_left)
    return {
        "tree": sorted(role for _, role in tree.values()),
        "ended_early": early,
        "left": left,
        "exiting": torn_down,
        "gone_s": gone_s,
        "shm": len(shm),
        "shm_left": len(shm_left),
    }


def _clean_up(proc: subprocess.Popen[bytes], tree: dict[int, tuple[int, str]], shm_left: list[str]) -> None:
    """Kill what was left (and what it started since), unlink its shared memory."""
    for _ in range(3):
        live = {pid: start for pid, (start, _) in tree.items() if alive(pid, start)}
        live |= descendants(set(live))
        for pid, start in live.items():
            if alive(pid, start):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if not live:
            break
        time.sleep(0.2)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
    for path in shm_left:
        with contextlib.suppress(OSError):
            os.unlink(path)


def stand_in(guard: str, way: str, wait_s: float, work: Path) -> dict[str, Any]:
    proc = _start([sys.executable, "-m", "voice.bench.stand_in_tree", guard], work / f"stand-in-{guard}-{way}.log")
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"the stand-in exited: {(work / f'stand-in-{guard}-{way}.log').read_text()[-2000:]}")
    started = json.loads(line)  # those that left the tree, or may have: the daemon, an orphaned worker
    tree = _tree(proc.pid, started["daemon"]) | {
        # One already gone has ended early: its start time is none a process has (-1).
        pid: ((stat[3] if (stat := proc_stat(pid)) is not None else -1), role)
        for role, pid in started.items()
    }
    return _told(guard, _end(proc, started["daemon"], way, wait_s, tree), work / f"stand-in-{guard}-{way}.log")


def voice_run(guard: str, way: str, wait_s: float, work: Path) -> dict[str, Any]:
    port = free_port()
    log = work / f"voice-run-{guard}-{way}.log"
    cmd = [sys.executable, "-c", VOICE_RUN, guard, "--serve", "--port", str(port), "--db", str(work / "c.db")]
    proc = _start(cmd, log)
    deadline = time.monotonic() + 600
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"voice.run exited or never got there: {log.read_text()[-3000:]}")
        tree = _tree(proc.pid, None)
        if way != "SIGKILL" and "VLLM::Worker" in {role for _, role in tree.values()}:
            break  # the engine core loads the model
        if way == "SIGKILL" and _serving(port):
            break
        time.sleep(0.2)
    return _told(guard, _end(proc, None, way, wait_s, tree), log)


def _told(guard: str, result: dict[str, Any], log: Path) -> dict[str, Any]:
    """``result``; where the reaper left a process, with the program's stderr (the reaper's is there too)."""
    if guard == "reaper" and result["left"]:
        print(f"{log.name}, the end:\n{log.read_text()[-3000:]}", file=sys.stderr)
    return result


def _serving(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
            return json.loads(r.read())["status"] == "ready"
    except OSError:
        return False


def measure(part: str, wait_s: float, logs: Path) -> list[dict[str, Any]]:
    """Every run of ``part``; each program's stderr is kept in a folder of ``logs`` until the end."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-orphans-", dir=logs) as tmp:
        work = Path(tmp)
        if part in ("all", "stand-in"):
            for guard in GUARDS:
                for way in WAYS:
                    row = {"program": "stand-in", "guard": guard, "way": way, "when": "running"}
                    rows.append(row | stand_in(guard, way, wait_s, work))
                    print(_line(rows[-1]), file=sys.stderr, flush=True)
        if part in ("all", "voice.run"):
            for guard in ("none", "reaper"):
                for way in WAYS:
                    when = "serving" if way == "SIGKILL" else "loading"
                    row = {"program": "voice.run --serve", "guard": guard, "way": way, "when": when}
                    rows.append(row | voice_run(guard, way, wait_s, work))
                    print(_line(rows[-1]), file=sys.stderr, flush=True)
    return rows


def _line(row: dict[str, Any]) -> str:
    left = ", ".join(row["left"]) or "none"
    if row["exiting"]:
        left += f" (being torn down: {', '.join(row['exiting'])})"
    if row["ended_early"]:
        left += f" (ended before the signal: {', '.join(row['ended_early'])})"
    gone = f"{row['gone_s']} s" if row["gone_s"] is not None else "-"
    shm = f"{row['shm_left']} of {row['shm']}"
    ended = f"{row['way']} ({row['when']})"
    return f"| {row['program']} | {row['guard']} | {ended} | {len(row['left'])}: {left} | {gone} | {shm} |"


def table(rows: list[dict[str, Any]], wait_s: float) -> str:
    head = [
        f"| program | guard | ended by | processes left after {wait_s:g} s | all ended after | shared memory left |",
        "|---|---|---|---|---|---|",
    ]
    return "\n".join(head + [_line(r) for r in rows])


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--part", choices=("all", "stand-in", "voice.run"), default="all")
    ap.add_argument("--wait-s", type=float, default=5.0, help="after the signal, before counting what is left")
    args = ap.parse_args(argv)
    (ROOT / "out").mkdir(exist_ok=True)
    rows = measure(args.part, args.wait_s, ROOT / "out")
    print(table(rows, args.wait_s))
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"wait_s": args.wait_s, "runs": rows}
    (args.out / "orphans.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out / 'orphans.json'}", file=sys.stderr)
