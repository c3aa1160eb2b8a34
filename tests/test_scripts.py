"""What scripts/ holds, and the two ways in: the Python scripts run as the README shows them
(``scripts/make_bargein_fixtures --out DIR``) with no .venv activated (the first python3 on PATH is
the system's, without the pipeline's packages, and scripts/use_venv.py re-runs them with
.venv/bin/python); the benchmarks run as ``python -m voice.bench NAME``."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import tomllib

import pytest

from tests.conftest import ROOT
from voice.bench.__main__ import BENCHMARKS
from voice.bench.__main__ import main as bench

SCRIPTS = sorted(
    p.name for p in (ROOT / "scripts").iterdir() if p.is_file() and p.read_text().startswith("#!/usr/bin/env python3")
)

# A shell with no .venv activated, as after `scripts/setup` in a fresh terminal.
PLAIN = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
PLAIN["PATH"] = "/usr/local/bin:/usr/bin:/bin"


def test_scripts_holds_set_up_test_demo_provisioning_and_the_fixture_makers():
    found = {p.name for p in (ROOT / "scripts").iterdir() if p.is_file()}
    assert found == {"setup", "test", "demo", "provision_models.py", "use_venv.py", *SCRIPTS}
    # The fixture makers only; the benchmarks are python -m voice.bench NAME.
    assert SCRIPTS == ["make_bargein_fixtures", "make_noise_fixtures", "make_turn_fixtures"]


def test_ruff_checks_the_python_scripts_without_a_py_name():
    ruff = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    assert {f"scripts/{name}" for name in SCRIPTS} <= set(ruff.get("extend-include", []))


def test_every_benchmark_module_is_listed_and_lists_its_options(capsys, monkeypatch):
    monkeypatch.setattr(os, "environ", dict(os.environ))  # a benchmark's ENV stays in this test
    with_main = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "voice" / "bench").rglob("*.py")
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in ast.parse(p.read_text()).body)
    } - {"voice.bench.__main__"}
    assert with_main == {module for module, _ in BENCHMARKS.values()}
    assert bench(["--help"]) == 0
    listing = capsys.readouterr().out
    for name in BENCHMARKS:
        assert f"\n  {name} " in listing
        with pytest.raises(SystemExit) as done:
            bench([name, "--help"])
        assert done.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: python -m voice.bench {name} ")


def test_an_unknown_benchmark_is_an_error_with_the_list(capsys):
    assert bench(["no_such_bench"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m voice.bench: no benchmark 'no_such_bench'") and "pipeline" in err


def test_the_benchmarks_never_import_tests():
    for path in (ROOT / "voice" / "bench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n == "tests" or n.startswith("tests.") for n in names), path


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
