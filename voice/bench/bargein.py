"""Barge-in over the labelled fixtures, on the real engines.

    python -m voice.bench bargein [--out DIR]        (default: out/bench-bargein)
    python -m voice.bench bargein --grid [...]       double talk at the reply's start (voice/bench/double_talk.py)

Builds the fixtures (scripts/make_bargein_fixtures), replays each on virtual
time (exact, repeatable timings; engine latency is measured by python -m voice.bench pipeline)
and reports:

- reaction time, interrupt onset to silent output (p50/p95/max), measured on
  the reply audio;
- truncation error in words: stored heard words minus the words Whisper hears
  in the audio played before the stop; the share within one word;
- false barge-ins against echo level (-20 to -6 dB) on the echo-only inputs,
  and on the backchannel and noise inputs.

Prints Markdown tables and writes DIR/bargein.json.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from voice.app.latency import percentile
from voice.bench import double_talk
from voice.bench.common import ROOT, parser

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR", "TQDM_DISABLE": "1"}

ECHO_LEVELS = (-20.0, -15.0, -12.0, -10.0, -8.0, -6.0)


async def _main(argv: list[str] | None) -> None:
    import argparse

    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="default: out/bench-bargein; with --grid, docs/bench")
    ap.add_argument("--grid", action="store_true", help="the double-talk grid: onset x echo x canceller x speaker")
    double_talk.add_arguments(ap)
    args = ap.parse_args(argv)
    if args.grid:
        args.out = args.out or ROOT / "docs" / "bench"
        await double_talk.main_grid(args)
        return
    args.out = args.out or ROOT / "out" / "bench-bargein"
    fixtures = args.out / "fixtures"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_bargein_fixtures"), "--out", str(fixtures)], check=True
    )

    from core.events import PlaybackPaused, PlaybackResumed
    from shell.engines import EngineConfig, load_engines
    from voice.bench.evaluate import run_fixture, truncation_error_words

    engines = await asyncio.to_thread(load_engines, EngineConfig())
    interrupts = []
    for wav in sorted(fixtures.glob("interrupt_*.wav")):
        run = await run_fixture(engines, wav)
        heard = run.heard_turn()
        interrupts.append({
            "fixture": wav.stem,
            "offset_into_reply_s": run.label["offset_into_reply_s"],
            "barge_in": bool(run.barge_ins),
            "reaction_s": run.reaction_s(),
            "truncation_error_words": truncation_error_words(run, engines),
            "heard": heard["text"] if heard else None,
        })  # fmt: skip
        print(f"{wav.stem}: {interrupts[-1]}", file=sys.stderr)
    echo_rows = []
    for db in ECHO_LEVELS:
        for wav in sorted(fixtures.glob("echo_*.wav"))[:1] + sorted(fixtures.glob("background_noise.wav")):
            run = await run_fixture(engines, wav, echo_db=db)
            echo_rows.append({
                "fixture": wav.stem, "echo_db": db, "false_barge_ins": len(run.barge_ins),
                "pauses": len(run.of(PlaybackPaused)),
            })  # fmt: skip
            print(f"{wav.stem} at {db} dB: {echo_rows[-1]}", file=sys.stderr)
    calm = []
    for wav in sorted(fixtures.glob("backchannel_*.wav")) + sorted(fixtures.glob("noise_burst.wav")):
        run = await run_fixture(engines, wav)
        calm.append({
            "fixture": wav.stem, "cut": bool(run.barge_ins), "paused": len(run.of(PlaybackPaused)),
            "resumed": len(run.of(PlaybackResumed)),
        })  # fmt: skip
    await engines.aclose()

    reactions = [r["reaction_s"] for r in interrupts if r["reaction_s"] is not None]
    errors = [r["truncation_error_words"] for r in interrupts if r["truncation_error_words"] is not None]
    converged = [r["reaction_s"] for r in interrupts if r["reaction_s"] is not None and r["offset_into_reply_s"] >= 1.5]
    summary = {
        "mode": "virtual time",
        "interrupts": len(interrupts),
        "detected": sum(r["barge_in"] for r in interrupts),
        "reaction_s": {
            "p50": percentile(reactions, 0.5),
            "p95": percentile(reactions, 0.95),
            "max": percentile(reactions, 1.0),
        },
        "reaction_after_1_5s_s": {"p50": percentile(converged, 0.5), "p95": percentile(converged, 0.95)},
        "truncation_within_one_word": round(sum(abs(e) <= 1 for e in errors) / max(1, len(errors)), 3),
        "truncation_error_words_mean_abs": round(sum(abs(e) for e in errors) / max(1, len(errors)), 2),
        "false_barge_ins_by_echo_db": {
            str(db): sum(r["false_barge_ins"] for r in echo_rows if r["echo_db"] == db) for db in ECHO_LEVELS
        },
        "backchannel_and_noise_cut": sum(c["cut"] for c in calm),
    }
    result = {"summary": summary, "interrupts": interrupts, "echo": echo_rows, "backchannel_and_noise": calm}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bargein.json").write_text(json.dumps(result, indent=2) + "\n")

    def ms(v):
        return "-" if v is None else f"{v * 1000:.0f}"

    print("\n| interrupt fixture | offset | reaction (ms) | truncation error (words) | heard |\n|---|---|---|---|---|")
    for r in interrupts:
        print(
            f"| {r['fixture']} | {r['offset_into_reply_s']} s | {ms(r['reaction_s'])} | "
            f"{r['truncation_error_words']} | {r['heard']} |"
        )
    s = summary
    print(f"\nReaction p50 {ms(s['reaction_s']['p50'])} ms, p95 {ms(s['reaction_s']['p95'])} ms, "
          f"max {ms(s['reaction_s']['max'])} ms over {len(reactions)} barge-ins "
          f"(from 1.5 s into the reply on: p50 {ms(s['reaction_after_1_5s_s']['p50'])}, "
          f"p95 {ms(s['reaction_after_1_5s_s']['p95'])} ms).")  # fmt: skip
    print(f"Truncation within one word: {s['truncation_within_one_word'] * 100:.0f}% "
          f"(mean |error| {s['truncation_error_words_mean_abs']} words).")  # fmt: skip
    print("\n| echo level | false barge-ins | pauses (resumed) |\n|---|---|---|")
    for db in ECHO_LEVELS:
        rows = [r for r in echo_rows if r["echo_db"] == db]
        print(f"| {db:.0f} dB | {sum(r['false_barge_ins'] for r in rows)} / {len(rows)} | "
              f"{sum(r['pauses'] for r in rows)} |")  # fmt: skip
    print("\n| backchannel / noise | cut | paused | resumed |\n|---|---|---|---|")
    for c in calm:
        print(f"| {c['fixture']} | {c['cut']} | {c['paused']} | {c['resumed']} |")
    print(f"\nwrote {args.out / 'bargein.json'}")


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))
