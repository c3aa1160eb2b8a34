"""When the person's turn ends: Smart Turn against silence alone, on the real engines, on virtual time.

    python -m voice.bench endpoint [--out DIR] [--recordings DIR] [--llm-model NAME]
        (default: out/bench-endpoint, ../shared/fixtures/speech, the default model reads the words)

Replays, through the whole pipeline on virtual time (so the endpoint delay is
the decision alone, and exactly repeatable), with each turn detector:

- finished turns: each one-sentence recording as it is; the endpoint delay of
  its last endpoint (end of speech to the endpoint decision), p50 and max;
- mid-sentence pauses: 0.3, 0.6 and 1.0 s of silence inserted at a word
  boundary inside 6 of those sentences; how many of the sentences were cut
  into more than one turn (and how many at the pause).

The detectors: ``smart-turn`` (the default: Smart Turn once a pause, after
0.2 s of silence, as Pipecat does; 2 s of silence end the turn anyway),
``smart-turn-recheck`` (asked again every 0.3 s of further silence) and
``silence`` (the 500 ms hangover, as before). ``--real-time`` replays the
finished sentences in real time too, where the model's own time counts. See
``voice/bench/turns.py`` for what the figures mean.

Prints Markdown tables and writes DIR/endpoint.json.
"""

from __future__ import annotations

from voice.bench.common import ROOT, SHARED_SPEECH, parser

# isort: split

import argparse
import asyncio
import dataclasses
import datetime
import json
import os
import sys
import time
from pathlib import Path

from core.audio import ASR_RATE
from core.end_of_turn import EndOfTurnConfig
from shell.config import SessionConfig
from transport.files import load_audio
from voice.app.latency import percentile
from voice.bench.fixtures import with_silence
from voice.bench.turns import BOUNDARIES, FINISHED, PAUSES_S, TurnRun, run_turns

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR", "TQDM_DISABLE": "1"}

DETECTORS: dict[str, EndOfTurnConfig | None] = {
    "smart-turn": EndOfTurnConfig(),
    "smart-turn-recheck": EndOfTurnConfig(recheck_s=0.3),
    "silence": None,
}


def row(run: TurnRun) -> dict:
    return {
        "endpoints": [{"end": e.end, "t": e.t} for e in run.endpoints],
        "endpoint_delay_s": round(run.endpoint_delay_s, 3),
        "checks": [{"silence_s": c.silence_s, "p": c.probability, "decision": c.decision} for c in run.checks],
        "user_text": run.user_text(),
        "errors": run.errors,
    }


async def _main(argv: list[str] | None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-endpoint")
    ap.add_argument("--recordings", type=Path, default=SHARED_SPEECH)
    ap.add_argument("--detectors", nargs="+", default=list(DETECTORS), choices=list(DETECTORS))
    ap.add_argument("--real-time", action="store_true", help="the finished sentences in real time too")
    ap.add_argument("--llm-model", help="the model that reads the words of each pause (default: the default model)")
    args = ap.parse_args(argv)

    from shell.engines import EngineConfig, load_engines

    engine_config = EngineConfig(llm_model=args.llm_model) if args.llm_model else EngineConfig()
    engines = await asyncio.to_thread(load_engines, engine_config)
    audio = {name: load_audio(args.recordings / f"{name}.wav") for name in FINISHED}
    finished, pauses = [], []
    t0 = time.monotonic()
    for detector in args.detectors:
        config = SessionConfig(end_of_turn=DETECTORS[detector])
        for name in FINISHED:
            run = await run_turns(engines, audio[name], config)
            finished.append({"detector": detector, "recording": name} | row(run))
            print(f"{time.monotonic() - t0:6.0f} s  {detector} {name}: {finished[-1]['endpoint_delay_s']}",
                  file=sys.stderr, flush=True)  # fmt: skip
        for name, at_s, words in BOUNDARIES:
            for pause_s in PAUSES_S:
                run = await run_turns(engines, with_silence(audio[name], at_s, pause_s), config)
                r = {"detector": detector, "recording": name, "at_s": at_s, "words": words, "pause_s": pause_s}
                duration_s = len(audio[name]) / ASR_RATE + pause_s
                pauses.append(r | {"cut": run.cut(duration_s), "cut_at_pause": run.cut_at(at_s, pause_s)} | row(run))
                print(f"{time.monotonic() - t0:6.0f} s  {detector} {name} +{pause_s} s: cut {pauses[-1]['cut']}",
                      file=sys.stderr, flush=True)  # fmt: skip
    real_time = []
    for detector in args.detectors if args.real_time else []:
        config = SessionConfig(end_of_turn=DETECTORS[detector])
        for name in FINISHED:
            run = await run_turns(engines, audio[name], config, fast=False)
            real_time.append({"detector": detector, "recording": name} | row(run))
            print(f"{time.monotonic() - t0:6.0f} s  real time {detector} {name}: {real_time[-1]['endpoint_delay_s']}",
                  file=sys.stderr, flush=True)  # fmt: skip
    await engines.aclose()

    summary = {}
    for detector in args.detectors:
        delays = [r["endpoint_delay_s"] for r in finished if r["detector"] == detector]
        s = {
            "endpoint_delay_p50_ms": round(percentile(delays, 0.5) * 1000),
            "endpoint_delay_max_ms": round(max(delays) * 1000),
            "finished_cut": f"{sum(len(r['endpoints']) > 1 for r in finished if r['detector'] == detector)}"
            f"/{len(delays)}",
            "finished_at_max_wait": sum(
                r["endpoint_delay_s"] >= (DETECTORS[detector] or EndOfTurnConfig()).max_wait_s
                for r in finished
                if r["detector"] == detector and DETECTORS[detector] is not None
            ),
        }
        rt = [r["endpoint_delay_s"] for r in real_time if r["detector"] == detector]
        if rt:
            s["real_time_endpoint_delay_p50_ms"] = round(percentile(rt, 0.5) * 1000)
            s["real_time_endpoint_delay_max_ms"] = round(max(rt) * 1000)
        for pause_s in PAUSES_S:
            runs = [r for r in pauses if r["detector"] == detector and r["pause_s"] == pause_s]
            s[f"cut_{pause_s}s"] = f"{sum(r['cut'] for r in runs)}/{len(runs)}"
            s[f"cut_at_pause_{pause_s}s"] = f"{sum(r['cut_at_pause'] for r in runs)}/{len(runs)}"
        summary[detector] = s
    load = [round(x, 2) for x in os.getloadavg()]
    machine = {"date": datetime.date.today().isoformat(), "cpus": os.cpu_count(), "load_average": load}
    configs = {d: (dataclasses.asdict(c) if c else {"hangover_s": 0.5}) for d, c in DETECTORS.items()}
    out = {
        "machine": machine,
        "llm_model": engine_config.llm_model,
        "detectors": configs,
        "summary": summary,
        "finished": finished,
        "pauses": pauses,
        "finished_real_time": real_time,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "endpoint.json").write_text(json.dumps(out, indent=2) + "\n")

    print(f"\nEnd of turn on virtual time: {len(FINISHED)} finished sentences, {len(BOUNDARIES)} sentences "
          f"with a pause inserted at a word boundary\n")  # fmt: skip
    head = " | ".join(f"cut by a {p} s pause" for p in PAUSES_S)
    print(f"| detector | endpoint delay p50 | max | finished: waited the max / cut | {head} |")
    print("|---|---|---|---|" + "---|" * len(PAUSES_S))
    for detector, s in summary.items():
        cuts = " | ".join(f"{s[f'cut_{p}s']} (at the pause {s[f'cut_at_pause_{p}s']})" for p in PAUSES_S)
        print(f"| {detector} | {s['endpoint_delay_p50_ms']} ms | {s['endpoint_delay_max_ms']} ms | "
              f"{s['finished_at_max_wait']} / {s['finished_cut']} | {cuts} |")  # fmt: skip
    if real_time:
        print("\nReal time, finished sentences: " + ", ".join(
            f"{d} p50 {s['real_time_endpoint_delay_p50_ms']} ms (max {s['real_time_endpoint_delay_max_ms']} ms)"
            for d, s in summary.items() if "real_time_endpoint_delay_p50_ms" in s))  # fmt: skip
    print(f"\nwrote {args.out / 'endpoint.json'}")


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))
