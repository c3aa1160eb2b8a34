"""The conversation store off the event loop: finalization to commit, and what the caller pays.

    python -m voice.bench store [--out DIR] [--turns N] [--gap-ms MS] [--dir DIR]   (default: docs/bench, 300, 10, out/)

A session's history gets N finalized turns, one every MS milliseconds (a
conversation is far slower: each write is on its own), on a fresh WAL
database in DIR (on this machine's disk). Measured, per turn:

- the window from its finalization (the wall-clock time the recorder stamps
  when the history tells it of the turn, stored as ``finalized_at``) to the
  return of its ``COMMIT`` on the writer thread, p50/p95/max in ms;
- the time ``History.add`` takes on the caller's thread (the event loop's, in
  the server), p50/max in µs.

Cases: the database to itself; another process holding the write lock for
0.5 s of every second (shorter than the 1 s busy timeout: the writer waits,
nothing fails), over all turns and over those finalized while it held the
lock; ``synchronous=FULL`` (an fsync per commit). For comparison: a history
with no store (what the caller pays anyway: at this pace the caller's Python
runs cold after each sleep, ~10x its back-to-back time), and the write as it
was before, ``add_turn`` on the caller's thread, where the caller's time is
the whole window. Prints a Markdown table and writes DIR/store.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from core.history import History, Turn
from voice.app.store import ConversationStore, open_history
from voice.bench.common import ROOT, parser

LOCK_S = 0.5  # the other process holds the write lock this long, then lets go as long


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def turn(i: int) -> Turn:
    t0 = 2.0 * i
    if i % 2 == 0:
        return Turn("user", f"question number {i}, about the weather tomorrow", t_start=t0, t_end=t0 + 1.2)
    text = f"Answer number {i}: it will be sunny in the morning and rain in the afternoon."
    return Turn("assistant", text, t_start=t0 + 1.4, t_end=t0 + 1.9, generated_text=text, response=i // 2 + 1)


class LockHolder:
    """Another process that holds the database's write lock for LOCK_S of every 2 * LOCK_S, and says when."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                textwrap.dedent(f"""
                    import select, sqlite3, sys, time
                    conn = sqlite3.connect({str(db)!r}, isolation_level=None)
                    print("ready", flush=True)
                    while not select.select([sys.stdin], [], [], 0)[0]:
                        conn.execute("BEGIN EXCLUSIVE")
                        start = time.time()
                        time.sleep({LOCK_S})
                        conn.execute("COMMIT")
                        print(start, time.time(), flush=True)
                        time.sleep({LOCK_S})
                """),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout.readline().strip() == "ready"

    def stop(self) -> list[tuple[float, float]]:
        """Its lock intervals (Unix time), once it has let go."""
        out, _ = self.proc.communicate("\n", timeout=30)
        return [(float(a), float(b)) for a, b in (line.split() for line in out.splitlines())]


def through_the_writer(db: Path, n: int, gap: float, *, synchronous: str = "NORMAL", locked: bool = False):
    """History.add with the recorder: (windows ms, caller µs, finalized_at) per turn, and the lock intervals."""
    store = ConversationStore.open(db, synchronous=synchronous)
    commits: dict[float, float] = {}  # finalized_at -> when its COMMIT returned
    add_row = store._add_row

    def timed(session_id, row, finalized_at, new=None):  # the writer thread's write (the first: with its session)
        seq = add_row(session_id, row, finalized_at, new)
        commits[finalized_at] = time.time()
        return seq

    store._add_row = timed
    _, history, recorder = open_history(store, None)
    assert recorder.flush()
    holder = LockHolder(db) if locked else None
    caller = paced_adds(history, n, gap)
    intervals = holder.stop() if holder is not None else []
    assert recorder.flush(60) and recorder.error is None, recorder.error
    store.close()
    assert len(commits) == n, f"{len(commits)} commits for {n} turns"
    finalized = sorted(commits)
    windows = [(commits[f] - f) * 1000 for f in finalized]
    return windows, caller, finalized, intervals


def without_a_store(n: int, gap: float) -> list[float]:
    """History.add with no listener at all: what the caller pays anyway, at the same pace (µs per turn)."""
    return paced_adds(History(), n, gap)


def paced_adds(history: History, n: int, gap: float) -> list[float]:
    """``n`` turns added to ``history``, one every ``gap`` seconds: what each History.add cost the caller (µs)."""
    caller: list[float] = []
    next_at = time.perf_counter()
    for i in range(n):
        next_at += gap
        time.sleep(max(0.0, next_at - time.perf_counter()))
        t0 = time.perf_counter()
        history.add(turn(i))
        caller.append((time.perf_counter() - t0) * 1e6)
    return caller


def on_the_caller(db: Path, n: int, gap: float, *, locked: bool = False):
    """add_turn on the caller's thread, as History.add did before: the caller waits for the commit."""
    store = ConversationStore.open(db)
    store.create_session("s")
    holder = LockHolder(db) if locked else None
    caller: list[float] = []
    next_at = time.perf_counter()
    for i in range(n):
        next_at += gap
        time.sleep(max(0.0, next_at - time.perf_counter()))
        t0 = time.perf_counter()
        store.add_turn("s", turn(i))
        caller.append((time.perf_counter() - t0) * 1e6)
    if holder is not None:
        holder.stop()
    store.close()
    return [c / 1000 for c in caller], caller


def row(case: str, windows: list[float] | None, caller: list[float]) -> dict:
    return {
        "case": case,
        "turns": len(caller),
        "window_ms_p50": round(pct(windows, 50), 2) if windows else None,
        "window_ms_p95": round(pct(windows, 95), 2) if windows else None,
        "window_ms_max": round(max(windows), 2) if windows else None,
        "caller_us_p50": round(pct(caller, 50), 1),
        "caller_us_max": round(max(caller), 1),
    }


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--gap-ms", type=float, default=10.0, help="between two turns")
    ap.add_argument("--dir", type=Path, default=ROOT / "out", help="where the databases are made (on this disk)")
    args = ap.parse_args(argv)
    n, gap = args.turns, args.gap_ms / 1000
    args.dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-store-", dir=args.dir) as tmp:
        dbs = (Path(tmp) / f"{k}.db" for k in range(100))
        windows, caller, _, _ = through_the_writer(next(dbs), n, gap)
        rows.append(row("writer thread", windows, caller))
        windows, caller, finalized, intervals = through_the_writer(next(dbs), n, gap, locked=True)
        rows.append(
            row(f"writer thread, another process locks {LOCK_S:g} s of every {2 * LOCK_S:g} s", windows, caller)
        )
        during = [i for i, f in enumerate(finalized) if any(a <= f < b for a, b in intervals)]
        if during:
            rows.append(
                row(
                    "  the turns finalized while it held the lock",
                    [windows[i] for i in during],
                    [caller[i] for i in during],
                )
            )
        windows, caller, _, _ = through_the_writer(next(dbs), n, gap, synchronous="FULL")
        rows.append(row("writer thread, synchronous=FULL", windows, caller))
        rows.append(row("no store: History.add without a listener", None, without_a_store(n, gap)))
        windows, caller = on_the_caller(next(dbs), n, gap)
        rows.append(row("before: add_turn on the caller's thread", windows, caller))
        windows, caller = on_the_caller(next(dbs), n, gap, locked=True)
        rows.append(row(f"before, another process locks {LOCK_S:g} s of every {2 * LOCK_S:g} s", windows, caller))

    print("\n| case | turns | finalization to commit p50 / p95 / max (ms) | History.add on the caller p50 / max (µs) |")
    print("|---|---|---|---|")
    for r in rows:
        window = "-"
        if r["window_ms_p50"] is not None:
            window = f"{r['window_ms_p50']:.2f} / {r['window_ms_p95']:.2f} / {r['window_ms_max']:.1f}"
        print(
            f"| {r['case'].strip()} | {r['turns']} | {window} | {r['caller_us_p50']:.0f} / {r['caller_us_max']:.0f} |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "what": "python -m voice.bench store: History.add -> TurnRecorder -> the store's writer thread -> COMMIT",
        "database": f"SQLite {sqlite3.sqlite_version}, WAL, a fresh file on this machine's disk",
        "turn_gap_ms": args.gap_ms,
        "machine": f"{os.cpu_count()}-core CPU",
        # Other work on the machine stretches every figure: the 1-minute load average before and after.
        "load_average": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "rows": rows,
    }
    (args.out / "store.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"\nwrote {args.out / 'store.json'}")
