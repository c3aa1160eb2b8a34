"""Where a turn's time goes in real time: every engine call at the pause, beside its time alone.

    python -m voice.bench trace [--reps N] [--out DIR] [--timelines] [--against 15|32] [RECORDING ...]

Replays one-sentence recordings (default: the 8 finished sentences of
``voice/bench/turns.py``, from ../shared/fixtures/speech) in real time
through the pipeline now and before issue 15 (``BEFORE_ISSUE_15``; with
``--against 32``, before issue 32: the engines' queues in arrival order), one set
of engines, taking turns at going first (one warm-up replay, not counted).
Every engine call is timed (``voice/bench/engine_calls.py``) against the end
of speech; then each replay's calls at the pause (the first of each kind
from the end of speech on) are run again one at a time, on a quiet machine.
Their time in the replay over their time alone is what sharing the CPU (and,
for the LLM's requests, the engine) cost them.

Prints, per pipeline, for each kind of call its start after the end of
speech, its duration there and alone, and their ratio (p50s; for the
reply's request its time to first token, and its time per token beside
alone), the endpoint and the first audio (voice-to-voice), and now over
before, replay by replay. Writes
DIR/trace.json; ``--timelines`` also prints each replay's calls and events.
"""

from __future__ import annotations

from voice.bench.common import ROOT, SHARED_SPEECH, parser

# isort: split

import asyncio
import datetime
import itertools
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from core.events import Event, PlaybackStart, SpeechEnd
from shell.clock import MonotonicClock
from shell.config import SessionConfig
from shell.engines import EngineConfig, Engines, load_engines
from shell.session import Session
from transport.files import load_audio
from transport.replay import replay
from voice.bench.engine_calls import FIRST_TOKENS, Call, CallLog, run_alone, timed
from voice.bench.turns import BEFORE_ISSUE_15, FINISHED

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR", "TQDM_DISABLE": "1"}

PIPELINES = {"now": SessionConfig(), "before": BEFORE_ISSUE_15}
# What "before" is (--against): issue 15's starting point, or issue 32's (interruption checks over
# the full window, every engine queue in arrival order: shell/scheduler.py).
# Each with whether the engines' queues run the most urgent work first.
BEFORE = {"15": (BEFORE_ISSUE_15, True), "32": (SessionConfig(interruption_check_window="full"), False)}
KINDS = ("partial", "final", "smart_turn", "reading", "llm", "tts")
WINDOW_S = (-0.05, 2.5)  # the calls of the pause: started this long around the end of speech


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def p50(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


async def one_replay(engines: Engines, log: CallLog, audio, config: SessionConfig) -> dict[str, Any] | None:
    """A real-time replay; the pause after its first utterance, every time in ms after the end of speech."""
    events: list[Event] = []
    clock = MonotonicClock()
    session = Session(engines, clock, config, on_event=events.append)
    log.clear()
    try:
        await replay(session, audio, settle=False)
    finally:
        await session.aclose()
    origin = time.monotonic() - clock.now()  # the session's timeline on time.monotonic
    end = next((e for e in events if isinstance(e, SpeechEnd)), None)
    if end is None:
        return None
    t0 = origin + end.end
    playback = next((e.t for e in events if isinstance(e, PlaybackStart)), None)
    pause: dict[str, Call] = {}
    for c in log.since(t0):
        if WINDOW_S[0] <= c.start - t0 <= WINDOW_S[1]:
            pause.setdefault(c.kind, c)
    calls = {k: {"start": ms(c.start - t0), "duration": ms(c.duration)} for k, c in pause.items()}
    if "llm" in pause:
        calls["llm"] |= token_times(pause["llm"].start, pause["llm"].tokens)
    return {
        "endpoint": ms(end.t - end.end),
        "voice_to_voice": ms(playback - end.end) if playback is not None else None,
        "calls": calls,
        "timeline": [(ms(c.start - t0), ms(c.end - t0), c.kind) for c in log.since(t0 - 0.3) if c.start - t0 < 3]
        + [(ms(e.t - end.end), None, e.type) for e in events if -0.3 <= e.t - end.end < 3],
        "_pause": pause,
    }


def token_times(start: float, stamps: list[float]) -> dict[str, float | None]:
    gaps = [b - a for a, b in itertools.pairwise(stamps[:FIRST_TOKENS])]
    return {"ttft": ms(stamps[0] - start) if stamps else None, "per_token": ms(p50(gaps))}


async def alone(log: CallLog, run: dict[str, Any]) -> None:
    """Each call of the pause again, by itself: its time alone beside its time in the replay."""
    for kind, call in run.pop("_pause").items():
        await asyncio.sleep(0.3)  # vLLM's processes poll for a while after a request
        quiet = await run_alone(log, call)
        run["calls"][kind] |= {f"{k}_alone": ms(v) for k, v in quiet.items()}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "replays": len(runs),
        "endpoint_p50": p50([r["endpoint"] for r in runs]),
        "voice_to_voice_p50": p50([r["voice_to_voice"] for r in runs]),
    }
    for kind in KINDS:
        calls = [r["calls"][kind] for r in runs if kind in r["calls"]]
        if not calls:
            continue
        row = {"n": len(calls)}
        for field in ("start", "duration", "duration_alone", "ttft", "ttft_alone", "per_token", "per_token_alone"):
            row[field] = p50([c.get(field) for c in calls])
        # A reply's request runs as long as the reply: its first token is what a turn waits for.
        took, quiet = ("ttft", "ttft_alone") if kind == "llm" else ("duration", "duration_alone")
        row["takes"], row["takes_alone"] = row[took], row[quiet]
        ratios = [c[took] / c[quiet] for c in calls if c.get(quiet) and c.get(took) is not None]
        row["slowdown"] = round(p50(ratios), 2) if ratios else None
        out[kind] = row
    return out


def fmt(v: float | None, unit: str = "") -> str:
    return "-" if v is None else f"{v:.0f}{unit}"


def print_tables(result: dict[str, Any]) -> None:
    for name in PIPELINES:
        s = result["summary"][name]
        print(
            f"\n### {name}: {s['replays']} replays; endpoint p50 {fmt(s['endpoint_p50'])} ms, "
            f"voice-to-voice p50 {fmt(s['voice_to_voice_p50'])} ms\n"
        )
        print("| call | calls | starts (ms after the end of speech) | takes (llm: to its first token) | alone | x |")
        print("|---|---|---|---|---|---|")
        for kind in KINDS:
            if kind in s:
                r = s[kind]
                print(
                    f"| {kind} | {r['n']} | {fmt(r['start'])} | {fmt(r['takes'])} ms | "
                    f"{fmt(r['takes_alone'])} ms | {r['slowdown'] or '-'} |"
                )
        if "llm" in s:
            r = s["llm"]
            print(
                f"\nthe reply's request: first token {fmt(r['ttft'])} ms after it started (alone "
                f"{fmt(r['ttft_alone'])}), then {fmt(r['per_token'])} ms a token (alone {fmt(r['per_token_alone'])})"
            )
    ratios = result["now_over_before"]
    if ratios:
        print(
            f"\nvoice-to-voice, now over before, replay by replay: p50 x{p50(ratios):.2f} "
            f"({min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} pairs)"
        )


def print_timeline(name: str, pipeline: str, run: dict[str, Any]) -> None:
    print(f"\n== {pipeline} {name}: endpoint {fmt(run['endpoint'])} ms, voice-to-voice {fmt(run['voice_to_voice'])} ms")
    for start, end, what in sorted(run["timeline"], key=lambda row: row[0]):
        print(f"  {start:7.0f}  {what}" + ("" if end is None else f" -> {end:.0f} ({end - start:.0f} ms)"))


def cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def find_recordings(args: list[str]) -> list[Path]:
    if args:
        return [Path(a) for a in args]
    shared = SHARED_SPEECH
    return [shared / f"{name}.wav" for name in FINISHED if (shared / f"{name}.wav").is_file()]


async def _main(argv: list[str] | None) -> None:
    ap = parser(__name__, description=__doc__.split("\n\n")[0])
    ap.add_argument("recordings", nargs="*", help="one-sentence recordings (default: the shared ones)")
    ap.add_argument("--reps", type=int, default=1, help="replays of each recording by each pipeline")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "trace-turns")
    ap.add_argument("--timelines", action="store_true", help="print each replay's calls and events")
    ap.add_argument("--against", choices=sorted(BEFORE), default="15", help="the pipeline before which issue")
    args = ap.parse_args(argv)
    pipelines = {"now": (PIPELINES["now"], True), "before": BEFORE[args.against]}
    paths = find_recordings(args.recordings)
    if not paths:
        sys.exit("trace_turns: no recordings (give some, or provide ../shared/fixtures/speech)")
    engines = await asyncio.to_thread(load_engines, EngineConfig())
    log = timed(engines)
    try:
        await one_replay(engines, log, load_audio(paths[0]), PIPELINES["now"])  # warm-up: not counted
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in PIPELINES}
        ratios = []
        for rep in range(args.reps):
            for i, path in enumerate(paths):
                audio = load_audio(path)
                order = list(PIPELINES) if (rep + i) % 2 == 0 else list(PIPELINES)[::-1]
                pair = {}
                for pipeline in order:
                    config, urgent = pipelines[pipeline]
                    engines.schedule_by_urgency(urgent)
                    run = await one_replay(engines, log, audio, config)
                    if run is None:
                        print(f"{path.name}: {pipeline} heard no end of speech", file=sys.stderr)
                        continue
                    await alone(log, run)
                    run["recording"] = path.name
                    runs[pipeline].append(run)
                    pair[pipeline] = run["voice_to_voice"]
                    if args.timelines:
                        print_timeline(path.name, pipeline, run)
                if pair.get("now") and pair.get("before"):
                    ratios.append(round(pair["now"] / pair["before"], 3))
    finally:
        await engines.aclose()
    result = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "llm": engines.llm.name},
        "recordings": [p.name for p in paths],
        "reps": args.reps,
        "against_issue": args.against,
        "summary": {name: summary(r) for name, r in runs.items()},
        "now_over_before": ratios,
        "replays": runs,
    }
    print_tables(result)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "trace.json").write_text(json.dumps(result, indent=1))
    print(f"\nwrote {args.out / 'trace.json'}")


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))
