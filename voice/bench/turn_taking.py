"""Turn-taking over the issue-15 fixtures, now against before, on the real engines, on virtual time.

    python -m voice.bench turn_taking [--out DIR] [--fixtures DIR]     (default: docs/bench, a fresh build)
                              [--kinds finished pause interrupt] [--pipelines now before]

Builds the fixtures (scripts/make_turn_fixtures) unless given, loads the
engines once, and replays them through two pipelines on the same engines:
``now`` (``SessionConfig()``: Smart Turn, speculative replies, the ASR on
the linear echo canceller) and ``before`` (silence ends the turn after 500
ms, no speculation, the ASR on AEC3's output). Virtual time makes the
endpoint delay the decision alone (Smart Turn's own 70-100 ms a call is not
in it; ``python -m voice.bench endpoint --real-time`` and ``python -m voice.bench pipeline`` have it).

- endpoint delay (end of speech to the endpoint) on the 8 finished sentences,
  p50 and max, and how many waits ran to the maximum (2 s);
- false cut-offs by pause length (0.3, 0.6, 1.0, 1.5 s) on the 32 pause
  fixtures: an endpoint before the sentence's end (voice/bench/turns.py);
- speculation on all 40 (voice/bench/speculation.py): replies ready at the
  endpoint, discards, tokens wasted per turn (on virtual time an upper bound);
- interruption WER by echo level on the 18 interruption fixtures
  (voice/bench/interruptions.py), with the echo canceller on as each
  pipeline runs it, and off (the reference, without echo only).

Prints Markdown tables and writes DIR/turn_taking.json with every run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from shell.config import SessionConfig
from shell.engines import EngineConfig, load_engines
from transport.files import load_audio
from voice.app.latency import percentile
from voice.bench.common import ROOT, parser
from voice.bench.evaluate import run_fixture
from voice.bench.fixtures import ECHO_DB, PAUSES_S, load_manifest
from voice.bench.interruptions import InterruptionRun, path_config
from voice.bench.speculation import SpeculationFigures, speculation_figures
from voice.bench.turns import BEFORE_ISSUE_15, run_turns

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}

NOW = SessionConfig()
BEFORE = BEFORE_ISSUE_15
PIPELINES = {"now": NOW, "before": BEFORE}
KINDS = ("finished", "pause", "interrupt")


async def measure(folder: Path, kinds: list[str], pipelines: list[str]) -> dict:
    engines = await asyncio.to_thread(load_engines, EngineConfig())
    labels = [label for label in load_manifest(folder) if label["kind"] in kinds]
    runs: list[dict] = []
    try:
        for label in labels:
            wav = folder / f"{label['name']}.wav"
            if label["kind"] in ("finished", "pause"):
                for pipeline in pipelines:
                    config = PIPELINES[pipeline]
                    run = await run_turns(engines, load_audio(wav), config)
                    duration_s = len(load_audio(wav)) / 16000
                    spec = speculation_figures(run.events)
                    max_wait = (config.end_of_turn.max_wait_s if config.end_of_turn else None) or 99.0
                    runs.append({
                        "fixture": label["name"], "kind": label["kind"], "pause_s": label.get("pause_s"),
                        "pipeline": pipeline, "endpoints": len(run.endpoints),
                        "endpoint_delay_s": round(run.endpoint_delay_s, 3) if run.endpoints else None,
                        "waited_max": bool(run.endpoints) and run.endpoint_delay_s >= max_wait - 0.05,
                        "cut": run.cut(duration_s), "user_turns": sum(t["role"] == "user" for t in run.transcript),
                        "heard": run.user_text(), "speculation": spec.to_json(), "errors": run.errors,
                    })  # fmt: skip
            else:
                paths = {p: path for p, path in {"now": "linear", "before": "suppressed"}.items() if p in pipelines}
                if label["echo_db"] is None and "now" in pipelines:
                    paths["off"] = "off"
                for pipeline, path in paths.items():
                    base = NOW if pipeline != "before" else BEFORE
                    run = await run_fixture(engines, wav, config=path_config(path, base))
                    r = InterruptionRun(label, path, run)
                    runs.append({"fixture": label["name"], "kind": "interrupt", "echo_db": label["echo_db"],
                                 "pipeline": pipeline, "wer": round(r.wer, 3), "barged_in": r.barged_in,
                                 "heard": r.heard, "errors": run.errors})  # fmt: skip
            print(f"{label['name']}: done", file=sys.stderr, flush=True)
    finally:
        await engines.aclose()
    return {"summary": summarize(runs, pipelines), "runs": runs}


def summarize(runs: list[dict], pipelines: list[str]) -> dict:
    out: dict = {}
    for pipeline in pipelines:
        mine = [r for r in runs if r["pipeline"] == pipeline]
        finished = [r for r in mine if r["kind"] == "finished" and r["endpoint_delay_s"] is not None]
        delays = [r["endpoint_delay_s"] for r in finished]
        spec = SpeculationFigures()
        for r in mine:
            if r["kind"] in ("finished", "pause"):
                spec.add(SpeculationFigures(**{k: r["speculation"][k] for k in dataclasses.asdict(spec)}))
        s: dict = {
            "endpoint_delay_p50_s": percentile(delays, 0.5), "endpoint_delay_max_s": max(delays, default=None),
            "waits_to_max": sum(r["waited_max"] for r in finished), "finished": len(finished),
            "speculation": spec.to_json(),
        }  # fmt: skip
        for pause_s in PAUSES_S:
            paused = [r for r in mine if r["kind"] == "pause" and r["pause_s"] == pause_s]
            s[f"cut_{pause_s}s"] = f"{sum(r['cut'] for r in paused)} of {len(paused)}"
        for db in ECHO_DB:
            inter = [r for r in mine if r["kind"] == "interrupt" and r["echo_db"] == db]
            s[f"interruption_wer_{db}"] = round(sum(r["wer"] for r in inter) / len(inter), 3) if inter else None
        out[pipeline] = s
    off = [r for r in runs if r["pipeline"] == "off"]
    out["off"] = {"interruption_wer_None": round(sum(r["wer"] for r in off) / len(off), 3) if off else None}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--fixtures", type=Path, help="a folder made by scripts/make_turn_fixtures (default: build one)")
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="which fixtures (default: all)")
    ap.add_argument("--pipelines", nargs="+", choices=list(PIPELINES), default=list(PIPELINES))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.fixtures or Path(tmp)
        if args.fixtures is None:
            subprocess.run([sys.executable, str(ROOT / "scripts" / "make_turn_fixtures"), "--out", tmp], check=True)
        report = asyncio.run(measure(folder, args.kinds, args.pipelines))
    s = report["summary"]
    ms = lambda v: "-" if v is None else f"{round(v * 1000)} ms"  # noqa: E731
    rows = [
        ("endpoint delay, finished sentences, p50", lambda p: ms(s[p]["endpoint_delay_p50_s"])),
        ("... max", lambda p: ms(s[p]["endpoint_delay_max_s"])),
        ("waits that ran to the maximum", lambda p: f"{s[p]['waits_to_max']} of {s[p]['finished']}"),
        *((f"sentences cut by a {x} s pause", lambda p, x=x: s[p][f"cut_{x}s"]) for x in PAUSES_S),
        *((f"interruption WER, echo {db}", lambda p, db=db: s[p][f"interruption_wer_{db}"]) for db in ECHO_DB),
        ("replies ready at the endpoint", lambda p: s[p]["speculation"]["ready_share"]),
        ("speculations discarded", lambda p: s[p]["speculation"]["discarded"]),
        ("tokens wasted per turn", lambda p: s[p]["speculation"]["wasted_tokens_per_turn"]),
    ]
    print("\n| | " + " | ".join(args.pipelines) + " |\n" + "|---" * (len(args.pipelines) + 1) + "|")
    for name, get in rows:
        print(f"| {name} | " + " | ".join(str(get(p)) for p in args.pipelines) + " |")
    print(f"\ninterruption WER without echo, no canceller: {s['off']['interruption_wer_None']}")
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "turn_taking.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"saved {out}")
