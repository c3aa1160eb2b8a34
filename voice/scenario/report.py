"""What a scenario run says: a table for the terminal, JSON, and JUnit XML for CI.

The JSON of a scenario holds nothing of the machine (no wall-clock time, no absolute path of its
own), so the same scenario gives the same JSON on every run: the determinism test compares it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from voice.scenario.runner import ScenarioResult

PASS, FAIL = "pass", "FAIL"


def result_json(result: ScenarioResult) -> dict[str, Any]:
    """One scenario's result: its turns, checks, transcript and every event, on the virtual timeline."""
    obs = result.observed
    turns = []
    for p in result.placed:
        utterances = obs.utterances(p)
        turns.append(
            {
                "turn": p.index + 1,
                "said": result.said(p.index),
                **{k: v for k, v in p.to_json().items() if k != "index"},
                "heard": obs.heard_text(utterances),
                "reply": obs.reply_text(obs.replies(utterances)),
            }
        )
    return {
        "scenario": result.scenario.name,
        "file": result.scenario.path.name,
        "passed": result.passed,
        "timeline_s": round(result.duration_s, 3),
        "turns": turns,
        "checks": [{**c.to_json(), "turn": None if c.turn is None else c.turn + 1} for c in result.checks],
        "transcript": obs.transcript,
        "events": [e.to_json() for e in obs.events],
    }


def table(results: list[ScenarioResult]) -> str:
    """One line per turn's expectation: the scenario, the turn, the check, pass or FAIL, the figure."""
    lines = [f"{'scenario':<28} {'turn':<4} {'check':<16} {'':<4} figure"]
    for r in results:
        name = r.scenario.name[:28]
        for c in r.checks:
            turn = "-" if c.turn is None else str(c.turn + 1)
            mark = PASS if c.passed else FAIL
            note = "" if c.deterministic else "  (judge: a model's opinion, not a measurement)"
            lines.append(f"{name:<28} {turn:<4} {c.name:<16} {mark:<4} {c.figure}{note}")
            if c.message and not c.passed:
                lines.append(f"{'':<28} {'':<4} {'':<16} {'':<4} ^ {c.message}")
            name = ""
        if not r.checks:
            lines.append(f"{name:<28} {'-':<4} {'(no expectations)':<16}")
    return "\n".join(lines)


def summary(results: list[ScenarioResult]) -> str:
    checks = [c for r in results for c in r.checks]
    failed = [c for c in checks if not c.passed]
    scenarios = sum(1 for r in results if not r.passed)
    said = f"{_count(len(results), 'scenario')}, {_count(len(checks), 'check')}: "
    said += f"{len(checks) - len(failed)} passed, {len(failed)} failed"
    return said + (f" (in {_count(scenarios, 'scenario')})" if failed else "")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def junit(results: list[ScenarioResult], wall_s: dict[str, float] | None = None) -> str:
    """JUnit XML: a test suite per scenario, a test case per check (``wall_s``: each scenario's run time)."""
    root = ET.Element("testsuites", name="voice.scenario")
    for r in results:
        failures = sum(1 for c in r.checks if not c.passed)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=r.scenario.name,
            tests=str(len(r.checks)),
            failures=str(failures),
            errors="0",
            time=f"{(wall_s or {}).get(r.scenario.name, 0.0):.3f}",
            file=str(r.scenario.path),
        )
        for c in r.checks:
            where = "conversation" if c.turn is None else f"turn {c.turn + 1}"
            case = ET.SubElement(suite, "testcase", classname=r.scenario.name, name=f"{where}: {c.name}", time="0")
            if not c.passed:
                failure = ET.SubElement(case, "failure", message=c.message or c.name)
                failure.text = f"measured: {c.figure}"
            ET.SubElement(case, "system-out").text = c.figure
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_outputs(
    results: list[ScenarioResult],
    *,
    record: Path | None = None,
    report: Path | None = None,
    junit_xml: Path | None = None,
    json_dir: Path | None = None,
    wall: dict[str, float] | None = None,
) -> None:
    """What the options ask to be written: recordings, HTML pages (beside their recordings), JUnit, JSON."""
    if junit_xml is not None:
        junit_xml.parent.mkdir(parents=True, exist_ok=True)
        junit_xml.write_text(junit(results, wall), encoding="utf-8")
        print(f"wrote {junit_xml}")
    if json_dir is not None:
        json_dir.mkdir(parents=True, exist_ok=True)
        for r in results:
            out = json_dir / f"{file_name(r.scenario.name)}.json"
            out.write_text(json.dumps(result_json(r), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {json_dir}/*.json")
    for folder in (record, report):
        if folder is None:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for r in results:
            r.recording.save_as(folder / f"{file_name(r.scenario.name)}.wav")
        print(f"wrote {folder}/*.wav")
    if report is not None:
        from voice.scenario.html import write_report

        for r in results:
            name = file_name(r.scenario.name)
            write_report(report / f"{name}.html", r, f"{name}.wav")
        print(f"wrote {report}/*.html")


def file_name(name: str) -> str:
    """A scenario's name as a file's."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-") or "scenario"
