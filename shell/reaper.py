"""Every process this program starts ends with it, however it ends: a watchdog process, the reaper.

``start_reaper()`` is the first thing every entry point does (``python -m voice.run`` in every mode,
``python -m voice.bench``, ``python -m voice.scenario``, the pytest session). It starts this file as
a script, ``python -I -S shell/reaper.py PID``: a process in a session of its own (a terminal's
Ctrl+C, or a ``killpg`` of the program's group, does not reach it) that imports only the standard
library, and returns once it watches (25 ms). While the program lives, the reaper notes every
process descended from it, by pid and start time, from ``/proc`` every 0.25 s (1-2 ms a scan), and
keeps a process once noted even after it leaves the tree; one that leaves it faster (a daemon) is
handed over by :func:`adopt` (PostgreSQL's postmaster, which ``pg_ctl`` starts in a session of its
own). Once the program has ended, however it ended (it learns at once: the parent-death signal, and
its stdin pipe's end), it sends them SIGTERM, and SIGKILL 1 s later to what is left, then waits
for them to be gone. Python's multiprocessing resource tracker is spared until then (it ignores
SIGTERM), and then given 1 s to free the shared memory vLLM's processes left before it is killed.

Why, measured (``python -m voice.bench orphans``, docs/bench/orphans.md): ``kill -9`` of
``python -m voice.run --serve``, or SIGTERM while its engines load, runs no code of the program's,
and vLLM's ``EngineCore``, its ``Worker`` and the resource tracker ran on (GBs of memory, a busy
core); with the reaper all had ended 3.6-5.1 s after the signal, on a CPU that other vLLM instances
kept busy. The other ways, on a stand-in tree, do not hold for every way of ending:

- the parent kills its process group from ``atexit`` and its signal handlers: on SIGKILL nothing
  runs, and a daemon (a session of its own) is never in the group;
- ``PR_SET_PDEATHSIG`` in each child: it needs code in every child (vLLM's are not ours), a
  grandchild is not covered, the daemon neither, and it fires when the *thread* that started the
  child ends: an engine core started from voice.run's loading thread died as the loading ended.

Why these times: vLLM's engine core takes note of a SIGTERM but acts on it only once its model is
loaded, and serving, its orderly shutdown took over 3 s on a busy 2-core CPU. A 1 s grace lets the
processes that can end cleanly do so (MCP servers, PostgreSQL, HAProxy). After SIGKILL the kernel
still tears a process down, and a vLLM worker (2 GB, pinned to one core) took 2.5 s, up to 6 s
while two other vLLM instances kept that core busy: the reaper waits, and the tracker after it.

Pids are checked against their start time before every signal (a pidfd holds the process once
found), so a pid reused by an unrelated process is never signalled. A process the program started
in the last 0.25 s before it died, and that was orphaned at once, is found by its place (a child of
the reaper's new parent, in the program's session, started since the last scan).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time

SCAN_S = 0.25  # how often the tree is read while the program lives
TERM_S = 1.0  # SIGTERM, then this long before SIGKILL
KILLED_S = 30.0  # then at most this long for the killed to be gone (a vLLM worker took 2.5-6 s)
TRACKER_S = 1.0  # then this long for the resource tracker to free the shared memory and exit
START_S = 5.0  # start_reaper waits at most this long for the reaper to watch
_PR_SET_PDEATHSIG = 1
_PF_EXITING = 0x4  # /proc/PID/stat's flags: the process has begun to exit


# --- in the program ---------------------------------------------------------------------------


class Reaper:
    """The watchdog of this process (``start_reaper``): ``pid`` is its process."""

    def __init__(self, process: subprocess.Popen[bytes], watched: int) -> None:
        self._process = process
        self.watched = watched  # this process's pid when it started the reaper (not a forked child's)

    @property
    def pid(self) -> int:
        return self._process.pid

    def adopt(self, pid: int) -> None:
        """End ``pid`` (and its descendants) with this process too: one that left its tree (a daemon)."""
        assert self._process.stdin is not None
        with contextlib.suppress(OSError):  # the reaper is gone: nothing more it could do
            self._process.stdin.write(f"adopt {pid}\n".encode())
            self._process.stdin.flush()


_reaper: Reaper | None = None


def start_reaper() -> Reaper:
    """This process's reaper, started on the first call (in each process: a forked child gets its own).

    Cheap (25 ms, once: it returns once the reaper watches); the reaper prints nothing, and exits
    within moments of this process.
    """
    global _reaper
    if _reaper is not None and _reaper.watched == os.getpid():
        return _reaper
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", os.path.abspath(__file__), str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,  # stderr is the program's: the reaper's own errors are worth seeing
        start_new_session=True,
        close_fds=True,
    )
    # Once it says it watches: a child started before then, and orphaned by a quick end, would be
    # missed (on a busy CPU its start took longer than the stand-in tree's, 0.3 s).
    assert process.stdout is not None
    select.select([process.stdout], [], [], START_S)
    process.stdout.close()
    _reaper = Reaper(process, os.getpid())
    return _reaper


def adopt(pid: int) -> None:
    """Have this process's reaper end ``pid`` with it (nothing where none was started)."""
    if _reaper is not None and _reaper.watched == os.getpid():
        _reaper.adopt(pid)


# --- reading /proc (both sides: the benchmark and the tests use these too) ---------------------


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the name, from the state on; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The name in parentheses may hold spaces and parentheses: the fields start after the last ')'.
    fields = data[data.rfind(b")") + 2 :].split()
    return fields if len(fields) >= 20 else None  # fewer: read as the process was reaped


def proc_stat(pid: int | str) -> tuple[str, int, int, int] | None:
    """(state, ppid, session, start time in clock ticks since boot) of ``pid``; None if it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return fields[0].decode(), int(fields[1]), int(fields[3]), int(fields[19])


def processes() -> dict[int, tuple[str, int, int, int]]:
    """``proc_stat`` of every process now."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := proc_stat(name)) is not None:
            table[int(name)] = stat
    return table


def descendants(roots: set[int], table: dict[int, tuple[str, int, int, int]] | None = None) -> dict[int, int]:
    """Every process descended from ``roots`` (not the roots themselves): pid -> start time."""
    table = processes() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, int] = {}
    todo = [c for r in roots for c in children.get(r, [])]
    while todo:
        pid = todo.pop()
        if pid not in found and pid not in roots:
            found[pid] = table[pid][3]
            todo.extend(children.get(pid, []))
    return found


def exiting(pid: int) -> bool:
    """``pid`` is being torn down: it is exiting, or a SIGKILL is pending (a vLLM worker on a busy
    CPU took seconds to be gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return False
    flags = int(fields[6])
    try:
        with open(f"/proc/{pid}/status") as f:
            pending = [int(line.split()[1], 16) for line in f if line.startswith(("SigPnd:", "ShdPnd:"))]
    except (OSError, ValueError, IndexError):
        return False
    return bool(flags & _PF_EXITING) or any(mask & (1 << (signal.SIGKILL - 1)) for mask in pending)


def alive(pid: int, start: int) -> bool:
    """``pid`` is the process that started at ``start``, and has not exited (a zombie has)."""
    stat = proc_stat(pid)
    return stat is not None and stat[3] == start and stat[0] not in "ZX"


# --- the reaper process -------------------------------------------------------------------------


def _now_ticks() -> int:
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK"))


def _is_resource_tracker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"resource_tracker" in f.read()
    except OSError:
        return False


class _Tree:
    """What the reaper knows of the watched process's descendants."""

    def __init__(self, parent: int) -> None:
        self.parent = parent
        stat = proc_stat(parent)
        self.session = stat[2] if stat is not None else None
        self.parent_start = stat[3] if stat is not None else None
        self.known: dict[int, int] = {}  # pid -> start time, kept once seen while alive
        self.last_scan = _now_ticks()
        self.me = os.getpid()

    def scan(self) -> None:
        started = _now_ticks()
        table = processes()
        self.known = {p: s for p, s in self.known.items() if p in table and table[p][3] == s}
        roots = set(self.known)
        if self.parent in table and table[self.parent][3] == self.parent_start:  # not a reused pid
            roots.add(self.parent)
        found = descendants(roots, table)
        found.pop(self.me, None)
        self.known.update(found)
        self.last_scan = started

    def adopt(self, pid: int) -> None:
        stat = proc_stat(pid)
        if stat is not None and pid != self.me:
            self.known[pid] = stat[3]

    def late_orphans(self, table: dict[int, tuple[str, int, int, int]]) -> set[int]:
        """Processes the parent started since the last scan and left to the reaper's new parent."""
        since = self.last_scan - os.sysconf("SC_CLK_TCK")  # a second's margin: ticks are coarse
        adopter = os.getppid()
        return {
            pid
            for pid, (_, ppid, session, start) in table.items()
            if ppid == adopter and session == self.session and start >= since and pid != self.me
        }


class _Target:
    """One process to end, held by a pidfd: a signal can never reach a process that reused its pid."""

    def __init__(self, pid: int, start: int, fd: int, tracker: bool) -> None:
        self.pid, self.start, self.fd, self.tracker = pid, start, fd, tracker

    def exited(self) -> bool:
        return not alive(self.pid, self.start)  # a zombie has exited

    def signal(self, signum: int) -> None:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self.fd, signum)


def _hold(pid: int, start: int) -> _Target | None:
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if not alive(pid, start):  # checked after the pidfd is open: the fd is this process's
        os.close(fd)
        return None
    return _Target(pid, start, fd, _is_resource_tracker(pid))


def _end(tree: _Tree) -> None:
    """The watched process has ended: end every process of its tree."""
    for pid in tree.late_orphans(processes()):
        tree.adopt(pid)
    targets: dict[int, _Target] = {}

    def gather() -> list[_Target]:
        tree.scan()
        new = [t for pid, start in tree.known.items() if pid not in targets and (t := _hold(pid, start))]
        targets.update((t.pid, t) for t in new)
        return new

    def term(new: list[_Target]) -> None:
        for t in new:
            if not t.tracker:
                t.signal(signal.SIGTERM)
                t.signal(signal.SIGCONT)  # a stopped process acts on its SIGTERM only once continued

    def running(trackers: bool = True) -> list[_Target]:  # of those found
        return [t for t in targets.values() if (trackers or not t.tracker) and not t.exited()]

    term(gather())
    deadline = time.monotonic() + TERM_S
    while running(trackers=False) and time.monotonic() < deadline:
        time.sleep(0.05)
        term(gather())  # they may start others as they shut down: those are ended too
    gather()
    _kill_until_gone(running(trackers=False))
    # The tracker reads its pipe's end once every other holder is gone, frees what they left, exits.
    deadline = time.monotonic() + TRACKER_S
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    _kill_until_gone(running())


def _kill_until_gone(targets: list[_Target]) -> None:
    """SIGKILL, then wait for them to be gone: a killed vLLM worker took seconds to be torn down on a
    busy CPU (it is pinned to one core, which other vLLM instances kept busy)."""
    deadline = time.monotonic() + KILLED_S
    while (left := [t for t in targets if not t.exited()]) and time.monotonic() < deadline:
        for t in left:
            t.signal(signal.SIGKILL)
        time.sleep(0.05)
    for t in left:  # not seen: a process in an uninterruptible wait all this time
        print(f"reaper: pid {t.pid} still runs after SIGKILL ({proc_stat(t.pid)})", file=sys.stderr, flush=True)


def _set_parent_death_signal(signum: int) -> None:
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)


def watch(parent: int) -> None:
    """The reaper's life: note ``parent``'s descendants until it ends, then end them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl+C is for the program, which may handle it
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # SIGTERM (the parent-death signal, or anyone's) only wakes the loop, which then looks at the parent.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGTERM, lambda *_: None)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # the parent's mask is inherited
    _set_parent_death_signal(signal.SIGTERM)
    tree = _Tree(parent)
    inputs = [0, wake_r]
    pending = b""
    tree.scan()
    with contextlib.suppress(OSError):  # start_reaper returns
        os.write(1, b"watching\n")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # the pipe closed, and fd 1 never reused
    os.close(null)
    # Checked after the parent-death signal is set: the parent may have died before it was.
    while os.getppid() == parent:
        ready = select.select(inputs, [], [], SCAN_S)[0]
        if wake_r in ready:
            os.read(wake_r, 512)
        if 0 in ready:
            data = os.read(0, 4096)
            if not data:  # the parent closed it, or died (the next check tells)
                inputs.remove(0)
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                match line.split():
                    case [b"adopt", pid] if pid.isdigit():
                        tree.adopt(int(pid))
        tree.scan()
    _end(tree)


if __name__ == "__main__":
    watch(int(sys.argv[1]))
