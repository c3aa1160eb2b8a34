"""Speculative replies on the real pipeline: how often the reply was ready at the endpoint, and what
the discarded ones cost (issue 15, item 2).

Shared by its benchmark (``python -m voice.bench speculation``) and the turn-taking one: one place that says what the
figures mean. A speculative reply is started on the early final, before the endpoint
(``core/turns.py``); at the endpoint it is committed or, if the person went on, discarded.

- turns: replies started (``response_start``: answered user turns, speculated or not);
- ready: committed replies whose first chunk's audio was synthesized by the endpoint
  (``speculative_commit.ready``): played at once; the share is of all turns;
- late: committed before their first chunk was ready (they go on from the endpoint);
- discarded, and the tokens they generated for nothing (``speculative_discard.tokens``), per turn.

On virtual time engine work takes no time, so a speculation started before the endpoint is always
ready at it, and a discarded one had generated its whole reply (up to ``max_tokens``) before the
person went on: the waste is an upper bound. On real time both depend on the machine (the early
final's Whisper pass, the LLM's decode speed); there a discarded request is aborted mid-generation
and counts the tokens it had streamed by then.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.end_of_turn import EndOfTurnConfig
from core.events import Event, ResponseStart, SpeculativeCommit, SpeculativeDiscard, SpeculativeStart
from shell.config import SessionConfig
from shell.engines import Engines
from transport.files import load_audio
from voice.bench.common import ROOT, SHARED_SPEECH, parser
from voice.bench.fixtures import with_silence
from voice.bench.turns import BOUNDARIES, PAUSES_S, run_turns


@dataclass
class SpeculationFigures:
    turns: int = 0
    speculated: int = 0
    ready: int = 0
    late: int = 0
    discarded: int = 0
    wasted_tokens: int = 0
    discard_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def ready_share(self) -> float | None:
        """Of the turns answered, those whose reply was ready to play at the endpoint."""
        return round(self.ready / self.turns, 3) if self.turns else None

    @property
    def wasted_tokens_per_turn(self) -> float | None:
        return round(self.wasted_tokens / self.turns, 2) if self.turns else None

    def add(self, other: SpeculationFigures) -> None:
        for name in ("turns", "speculated", "ready", "late", "discarded", "wasted_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for reason, n in other.discard_reasons.items():
            self.discard_reasons[reason] = self.discard_reasons.get(reason, 0) + n

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"ready_share": self.ready_share, "wasted_tokens_per_turn": self.wasted_tokens_per_turn}


def speculation_figures(events: Iterable[Event]) -> SpeculationFigures:
    """The figures of one session (or several, one after the other) from its events."""
    f = SpeculationFigures()
    for e in events:
        match e:
            case ResponseStart():
                f.turns += 1
            case SpeculativeStart():
                f.speculated += 1
            case SpeculativeCommit():
                if e.ready:
                    f.ready += 1
                else:
                    f.late += 1
            case SpeculativeDiscard():
                f.discarded += 1
                f.wasted_tokens += e.tokens
                f.discard_reasons[e.reason] = f.discard_reasons.get(e.reason, 0) + 1
    return f


@dataclass
class SpeculationRun:
    """One recording replayed: its events, the conversation stored, and the figures."""

    events: list[Event]
    transcript: list[dict[str, Any]]
    errors: list[str]
    figures: SpeculationFigures


async def measure_speculation(
    engines: Engines, audio: np.ndarray, config: SessionConfig | None = None, fast: bool = True
) -> SpeculationRun:
    """Replay ``audio`` through a session (virtual time with ``fast``) and measure its speculation."""
    run = await run_turns(engines, audio, config or SessionConfig(), fast)
    return SpeculationRun(run.events, run.transcript, run.errors, speculation_figures(run.events))


BENCHMARK = """Speculative replies: how often the reply was ready at the endpoint, and the tokens wasted.

    python -m voice.bench speculation [--out DIR] [--recordings DIR] [--pauses] [--real-time]
                                                     (default: out/bench-speculation, tests/fixtures)

Replays each speech recording (each ``*.wav`` of DIR but noise) through the
whole pipeline with Smart Turn deciding the end of the turn and speculation
on, on virtual time (``--real-time``: real time), and reports per recording
and in all: turns answered, speculations started, committed with the reply
ready at the endpoint (and its share of the turns), committed late,
discarded, and the tokens the discarded ones generated for nothing (per
turn). ``--pauses`` adds the mid-sentence pauses of python -m voice.bench endpoint
(0.3, 0.6 and 1.0 s of silence inserted at a word boundary inside 6
sentences of ../shared/fixtures/speech), where the person goes on after the
early final. See ``voice/bench/speculation.py`` for what the figures mean.

Prints a Markdown table and writes DIR/speculation.json.
"""

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR", "TQDM_DISABLE": "1"}


def cells(f: SpeculationFigures) -> str:
    share = "-" if f.ready_share is None else f"{f.ready_share:.0%}"
    per_turn = "-" if f.wasted_tokens_per_turn is None else f"{f.wasted_tokens_per_turn:.1f}"
    return (f"{f.turns} | {f.speculated} | {f.ready} ({share}) | {f.late} | {f.discarded} | "
            f"{f.wasted_tokens} ({per_turn}) |")  # fmt: skip


async def _main(argv: list[str] | None) -> None:
    ap = parser(__name__, description=BENCHMARK, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-speculation")
    ap.add_argument("--recordings", type=Path, default=ROOT / "tests" / "fixtures")
    ap.add_argument(
        "--pauses", action="store_true", help="and the mid-sentence pauses of python -m voice.bench endpoint"
    )
    ap.add_argument("--real-time", action="store_true", help="real time instead of virtual time")
    args = ap.parse_args(argv)

    from shell.engines import EngineConfig, load_engines

    engines = await asyncio.to_thread(load_engines, EngineConfig())
    inputs = {p.stem: load_audio(p) for p in sorted(args.recordings.glob("*.wav")) if not p.stem.startswith("noise")}
    if args.pauses:
        shared = SHARED_SPEECH
        for name, at_s, _ in BOUNDARIES:
            for pause_s in PAUSES_S:
                inputs[f"{name} +{pause_s} s"] = with_silence(load_audio(shared / f"{name}.wav"), at_s, pause_s)
    config = SessionConfig(end_of_turn=EndOfTurnConfig())
    rows, total = [], SpeculationFigures()
    t0 = time.monotonic()
    for name, audio in inputs.items():
        run = await measure_speculation(engines, audio, config, fast=not args.real_time)
        total.add(run.figures)
        rows.append({"recording": name, "figures": run.figures.to_json(), "errors": run.errors,
                     "user": [t["text"] for t in run.transcript if t["role"] == "user"]})  # fmt: skip
        print(f"{time.monotonic() - t0:6.0f} s  {name}: {run.figures.to_json()}", file=sys.stderr, flush=True)
    await engines.aclose()

    load = [round(x, 2) for x in os.getloadavg()]
    out = {
        "machine": {"date": datetime.date.today().isoformat(), "cpus": os.cpu_count(), "load_average": load},
        "clock": "real time" if args.real_time else "virtual time",
        "turn_detector": "smart-turn",
        "total": total.to_json(),
        "recordings": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "speculation.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nSpeculation, smart-turn, {out['clock']}\n")
    print("| recording | turns | speculated | ready at the endpoint (share) | late | discarded | "
          "wasted tokens (per turn) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        f = SpeculationFigures(
            **{k: v for k, v in r["figures"].items() if k in SpeculationFigures.__dataclass_fields__}
        )
        print(f"| {r['recording']} | {cells(f)}")
    print(f"| **all** | {cells(total)}")
    print(f"\nwrote {args.out / 'speculation.json'}")


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))
