"""The Python scripts run as the README shows them (``scripts/bench --out DIR``),
with no .venv activated: the first python3 on PATH is the system's, without the
pipeline's packages, and scripts/use_venv.py re-runs them with .venv/bin/python."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

SCRIPTS = sorted(
    p.name for p in (ROOT / "scripts").iterdir() if p.is_file() and p.read_text().startswith("#!/usr/bin/env python3")
)

# A shell with no .venv activated, as after `scripts/setup` in a fresh terminal.
PLAIN = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
PLAIN["PATH"] = "/usr/local/bin:/usr/bin:/bin"


def test_the_scripts_are_found():
    assert {"bench", "bench_bargein", "make_bargein_fixtures"} <= set(SCRIPTS)


@pytest.mark.skipif(shutil.which("python3", path=PLAIN["PATH"]) is None, reason="no system python3")
@pytest.mark.parametrize("script", SCRIPTS)
def test_a_script_runs_without_the_venv_activated(script):
    assert "\nimport use_venv  #" in (ROOT / "scripts" / script).read_text()  # some say --help without it
    proc = subprocess.run(
        [f"scripts/{script}", "--help"], cwd=ROOT, env=PLAIN, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {script}"), proc.stdout


@pytest.mark.skipif(shutil.which("python3", path=PLAIN["PATH"]) is None, reason="no system python3")
def test_without_a_venv_a_script_says_to_run_setup(tmp_path):
    (tmp_path / "scripts").mkdir()
    for name in ("use_venv.py", "make_bargein_fixtures"):
        shutil.copy2(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    proc = subprocess.run(
        ["scripts/make_bargein_fixtures", "--help"], cwd=tmp_path, env=PLAIN, capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"make_bargein_fixtures: no {tmp_path / '.venv'}; run scripts/setup first"
    ]
