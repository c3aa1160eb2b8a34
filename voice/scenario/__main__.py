"""``python -m voice.scenario run FILE.yaml... [--junit OUT.xml] [--json DIR] [--report DIR] [--record DIR]
[--coverage]``.

Runs each scenario on virtual time (engines loaded once and shared), prints a line per
expectation (with ``--coverage``, the agents' steps and transitions reached), and exits 0 when
every one passed, 1 when one failed, 2 when a file or option is wrong (said in one line, before
anything is loaded).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from shell.reaper import start_reaper
from voice.app.runtime import EXIT_USAGE, set_up_logging
from voice.scenario.coverage import coverage, coverage_table
from voice.scenario.report import summary, table, write_outputs
from voice.scenario.runner import LoadedEngines, ScenarioResult, agent_setup, run_scenario
from voice.scenario.spec import Scenario, ScenarioError, load_scenario


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m voice.scenario", description=__doc__.split("\n\n")[1])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run scenario files and check what they expect")
    run.add_argument("files", nargs="+", type=Path, metavar="FILE.yaml")
    run.add_argument("--junit", type=Path, metavar="OUT.xml", help="write JUnit XML (a test case per expectation)")
    run.add_argument("--json", type=Path, metavar="DIR", help="write each scenario's result as DIR/NAME.json")
    run.add_argument(
        "--report", type=Path, metavar="DIR", help="write an HTML page per scenario (waveforms, events) into DIR"
    )
    run.add_argument("--record", type=Path, metavar="DIR", help="write each conversation as DIR/NAME.wav (stereo)")
    run.add_argument(
        "--judge-url",
        metavar="URL",
        help="an OpenAI-compatible server (a larger model) for the judge's questions (default: the agent's model)",
    )
    run.add_argument(
        "--coverage", action="store_true", help="list the agents' steps and transitions the scenarios reached, and not"
    )
    run.add_argument("--verbose", action="store_true", help="the engines' logs too")
    return parser


def main(argv: list[str] | None = None) -> int:
    start_reaper()  # first: the engine processes end with this one, however it ends (shell/reaper.py)
    args = build_parser().parse_args(argv)
    set_up_logging(argparse.Namespace(verbose=args.verbose, log_json=False))
    try:
        scenarios = [load_scenario(f) for f in args.files]
        # Every agent checked (tools imported, models found) before a minute of loading.
        flows = {s.name: agent_setup(s)[1].session.flow for s in scenarios}
    except ScenarioError as e:
        print(f"voice.scenario: {e}", file=sys.stderr)
        return EXIT_USAGE
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        print("voice.scenario: two scenarios have the same name (name: in the file)", file=sys.stderr)
        return EXIT_USAGE
    try:
        results, wall = asyncio.run(_run_all(scenarios, args.judge_url))
    except ScenarioError as e:
        print(f"voice.scenario: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(table(results))
    print()
    print(summary(results))
    if args.coverage:
        runs = [
            (r.scenario.name, str(r.scenario.agent["agent"]), flow, r.events)
            for r in results
            if (flow := flows[r.scenario.name]) is not None and "agent" in r.scenario.agent
        ]
        print()
        print(coverage_table(coverage(runs)))
    write_outputs(results, record=args.record, report=args.report, junit_xml=args.junit, json_dir=args.json, wall=wall)
    return 0 if all(r.passed for r in results) else 1


async def _run_all(scenarios: list[Scenario], judge_url: str | None) -> tuple[list[ScenarioResult], dict[str, float]]:
    engines = LoadedEngines()
    judge = None
    if judge_url:
        from llm.openai_http import OpenAIChatClient

        judge = OpenAIChatClient(judge_url)
    results: list[ScenarioResult] = []
    wall: dict[str, float] = {}
    try:
        for s in scenarios:
            print(f"{s.name} ...", file=sys.stderr, flush=True)
            load_before = engines.load_s
            t0 = time.monotonic()
            result = await run_scenario(s, engines, judge=judge)
            took = time.monotonic() - t0 - (engines.load_s - load_before)
            wall[s.name] = took
            results.append(result)
            verdict = "passed" if result.passed else "FAILED"
            print(
                f"{s.name}: {verdict}, {result.duration_s:.1f} s of conversation in {took:.1f} s"
                f" ({took / max(result.duration_s, 1e-9):.2f}x; engines loaded in {engines.load_s:.1f} s, not counted)",
                file=sys.stderr,
                flush=True,
            )
    finally:
        await engines.aclose()
        if judge is not None:
            await judge.close()
    return results, wall


if __name__ == "__main__":
    sys.exit(main())
