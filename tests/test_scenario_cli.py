"""The scenario runner as its users run it: ``python -m voice.scenario run`` and ``pytest scenarios/``.

Real processes on the real engines (each loads them once, ~20 s): the exit codes, the table, the
files it writes, and a failing scenario's report.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.engines

FAILING = """\
name: too slow
turns:
  - say: What is the capital of France?
    expect:
      answered_within_ms: 10
      reply: {says: Berlin}
"""


def test_the_runner_writes_its_table_junit_json_and_recordings_and_fails_on_a_failed_expectation(tmp_path):
    failing = tmp_path / "too_slow.yaml"
    failing.write_text(FAILING)
    proc = subprocess.run(
        [sys.executable, "-m", "voice.scenario", "run", "scenarios/question.yaml", str(failing),
         "--junit", str(tmp_path / "junit.xml"), "--json", str(tmp_path / "json"), "--record", str(tmp_path / "rec")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    rows = [line.split()[-5:] for line in proc.stdout.splitlines()]
    assert ["1", "answered", "pass", "310", "ms"] in rows and ["1", "answered", "FAIL", "310", "ms"] in rows
    assert "^ the reply does not say 'Berlin'" in proc.stdout
    assert "2 scenarios, 7 checks: 5 passed, 2 failed (in 1 scenario)" in proc.stdout
    suites = ET.parse(tmp_path / "junit.xml").getroot().findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in suites] == [
        ("question", "5", "0"),
        ("too slow", "2", "2"),
    ]
    assert {p.name for p in (tmp_path / "json").iterdir()} == {"question.json", "too-slow.json"}
    both, rate = sf.read(tmp_path / "rec" / "question.wav")
    assert rate == 24000 and both.shape[1] == 2 and abs(both[:, 1]).max() > 0.1


def test_a_wrong_scenario_file_is_one_line_and_exit_code_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("turns:\n  - say: hi\n    expect: {answred_within_ms: 3}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "voice.scenario", "run", str(bad)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"voice.scenario: {bad}: turns[0].expect: unknown key 'answred_within_ms' (one of answered_within_ms, "
        "ended, heard, ignored, interrupts, judge, one_turn, reply, said, state, step, tool, transferred)"
    ]


def test_pytest_collects_scenario_files_as_tests(tmp_path):
    project = tmp_path / "project"
    (project / "scenarios").mkdir(parents=True)
    (project / "scenarios" / "question.yaml").write_text((ROOT / "scenarios" / "question.yaml").read_text())
    (project / "scenarios" / "too_slow.yaml").write_text(FAILING)
    (project / "scenarios" / "compose.yaml").write_text("services: {}\n")  # not a scenario: not collected
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "-q", "--scenario-record", "rec"],
        cwd=project, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "1 failed, 1 passed" in proc.stdout
    assert "2 expectation(s) failed:" in proc.stdout and "^ the reply does not say 'Berlin'" in proc.stdout
    assert {p.name for p in (project / "rec").iterdir()} == {"question.wav", "too-slow.wav"}
