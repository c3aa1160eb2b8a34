"""The scenario runner: how fast a scenario runs on virtual time, and whether it repeats exactly.

    python -m voice.bench scenarios [--out DIR] [--runs N] [FILE.yaml ...]   (default: docs/bench, 3,
                                                                            scenarios/*.yaml)

Loads the engines once (reported apart, as cold start), then runs each scenario ``--runs`` times in
one process: for each run, the wall-clock time against the conversation's own length on the
timeline (the ratio; lower is faster), and a hash of its JSON (the events, transcripts and checks,
``voice.scenario.report.result_json``) and of its recording. Identical hashes across the runs are
the determinism the runner promises. Prints a table and writes DIR/scenarios.json.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

from voice.bench.common import ROOT, parser
from voice.scenario.report import result_json
from voice.scenario.runner import LoadedEngines, run_scenario
from voice.scenario.spec import load_scenario

ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR", "TQDM_DISABLE": "1"}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


async def measure(files: list[Path], runs: int) -> tuple[list[dict], float]:
    engines = LoadedEngines()
    rows = []
    try:
        for path in files:
            scenario = load_scenario(path)
            walls, hashes, recordings = [], [], []
            passed = True
            duration = 0.0
            for _ in range(runs):
                load_before = engines.load_s
                t0 = time.monotonic()
                result = await run_scenario(scenario, engines)
                walls.append(time.monotonic() - t0 - (engines.load_s - load_before))
                duration = result.duration_s
                passed = passed and result.passed
                hashes.append(_digest(json.dumps(result_json(result), ensure_ascii=False).encode()))
                recordings.append(_digest(result.recording.stereo().tobytes()))
            rows.append(
                {
                    "scenario": scenario.name,
                    "file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
                    "turns": len(scenario.turns),
                    "timeline_s": round(duration, 2),
                    "wall_s": [round(w, 2) for w in walls],
                    "ratio_median": round(statistics.median(walls) / duration, 3),
                    "passed": passed,
                    "json_identical": len(set(hashes)) == 1,
                    "recording_identical": len(set(recordings)) == 1,
                    "json_sha256": hashes[0],
                }
            )
            print(f"{scenario.name}: {rows[-1]['ratio_median']}x", file=sys.stderr, flush=True)
    finally:
        await engines.aclose()
    return rows, engines.load_s


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, metavar="FILE.yaml")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    files = [p.resolve() for p in args.files] or sorted((ROOT / "scenarios").glob("*.yaml"))
    rows, cold_s = asyncio.run(measure(files, args.runs))
    print(f"\nengines loaded in {cold_s:.1f} s (cold start, not in any run); {args.runs} runs each, 2 cores\n")
    print("| scenario | turns | timeline (s) | wall per run (s) | wall / timeline (median) | passed | runs identical |")
    print("|---|---:|---:|---|---:|---|---|")
    for r in rows:
        same = "yes" if r["json_identical"] and r["recording_identical"] else "NO"
        walls = ", ".join(f"{w:.1f}" for w in r["wall_s"])
        print(
            f"| {r['scenario']} | {r['turns']} | {r['timeline_s']:.1f} | {walls} | {r['ratio_median']:.2f} "
            f"| {'yes' if r['passed'] else 'no'} | {same} |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    doc = {"runs": args.runs, "cold_start_s": round(cold_s, 1), "scenarios": rows}
    (args.out / "scenarios.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\nwrote {args.out / 'scenarios.json'}")


if __name__ == "__main__":
    main()
