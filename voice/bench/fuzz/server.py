"""The server under attack, as a user runs it: ``python -m voice.run --serve`` in its own process group."""

from __future__ import annotations

import contextlib
import re
import signal
import sqlite3
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from voice.bench.common import free_port
from voice.bench.serve_process import ServeProcess

TOKEN = "fuzz-token-3f9c"


# -- the server, as a user runs it ----------------------------------------------


class Server(ServeProcess):
    """The server as a user runs it (a token, a store, metrics), its output in ``work/server.log``."""

    def __init__(self, work: Path, max_sessions: int) -> None:
        self.work = work
        self.db = work / "store.db"
        self.max_sessions = max_sessions
        self.metrics_port = free_port()
        self.port = 0  # it chooses one, and says which in its log
        args = ["--port", "0", "--db", str(self.db), "--token", TOKEN, "--max-sessions", str(max_sessions),
                "--metrics-port", str(self.metrics_port)]  # fmt: skip
        super().__init__(args, work / "server.log")

    def serve(self, timeout_s: float = 900) -> float:
        """Start it and wait until it serves; returns how long that took."""
        t0 = time.monotonic()
        self.start()
        assert self.proc is not None
        while time.monotonic() - t0 < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log_text()[-3000:]}")
            if m := re.search(r"serving http://127\.0\.0\.1:(\d+)/", self.log_text()):
                self.port = int(m.group(1))
                if self.health() == 200:
                    return time.monotonic() - t0
            time.sleep(0.5)
        self.kill()
        raise RuntimeError(f"the server did not come up in {timeout_s:.0f} s")

    def health(self) -> int | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                return r.status
        except OSError:
            return None

    def metric(self, name: str) -> float | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return None
        return sum(float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M))

    def rss_mb_with_engines(self) -> tuple[float | None, float | None]:
        """VmRSS of the server process, and of it with every process it started (the engines' own)."""
        if not self.alive():
            return None, None
        assert self.proc is not None
        own = _vmrss_kb(self.proc.pid)
        family = sum(_vmrss_kb(pid) or 0 for pid in _descendants(self.proc.pid)) + (own or 0)
        return (round(own / 1024, 1) if own else None), round(family / 1024, 1)

    def stop_timed(self) -> dict[str, Any]:
        """Ctrl+C, as a person stops it; killed if it has not exited in 60 s."""
        if self.proc is None:
            return {}
        if self.proc.poll() is not None:
            return {"exit_code": self.proc.returncode, "note": "it had exited on its own"}
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.kill()
            return {"exit_code": None, "note": "did not exit in 60 s after SIGINT: killed"}
        return {"exit_code": code, "stop_s": round(time.monotonic() - t0, 1)}


def _vmrss_kb(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    return int(m.group(1)) if m else None


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        children = [p for p, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def store_counts(db: Path) -> dict[str, int]:
    """Sessions with and without turns, and turns, read from the store without writing to it."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)) as conn:
        sessions, with_turns = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(EXISTS(SELECT 1 FROM turns t WHERE t.session_id = s.id)), 0) FROM sessions s"
        ).fetchone()
        turns = conn.execute("SELECT COUNT(*) FROM turns").fetchone()[0]
    size = sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
    return {
        "sessions": sessions,
        "sessions_with_turns": with_turns,
        "sessions_without_turns": sessions - with_turns,
        "turns": turns,
        "bytes": size,
    }
