"""scripts/provision_models.py's Smart Turn step: skipped when present, one clear line when offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from shell import models
from tests.conftest import ROOT

STEP = "import sys; sys.path.insert(0, 'scripts'); import provision_models as p; from pathlib import Path; "


def smart_turn_step(models_dir, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    code = STEP + f"p.smart_turn(Path({str(models_dir)!r}))"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env or dict(os.environ)
    )


def test_present_is_skipped_without_the_network(tmp_path):
    model = tmp_path / models.SMART_TURN_FILE
    model.parent.mkdir(parents=True)
    model.write_bytes(b"onnx")
    (tmp_path / models.SMART_TURN_FLOAT_FILE).write_bytes(b"onnx")
    (model.parent / "LICENSE").write_text("BSD-2-Clause")
    proc = smart_turn_step(tmp_path, offline_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "smart turn v3.2: present"


def test_the_float32_model_is_made_offline_when_only_the_int8_one_is_there(tmp_path):
    # A models folder provisioned before the float32 model was made at set-up.
    model = tmp_path / models.SMART_TURN_FILE
    model.parent.mkdir(parents=True)
    shutil.copy(models.smart_turn_model_path(int8=True), model)
    (model.parent / "LICENSE").write_text("BSD-2-Clause")
    proc = smart_turn_step(tmp_path, offline_env())
    assert proc.returncode == 0, proc.stderr
    assert "float32" in proc.stdout
    assert (tmp_path / models.SMART_TURN_FLOAT_FILE).read_bytes() == models.smart_turn_model_path().read_bytes()


def offline_env() -> dict[str, str]:
    """No package index (a proxy nobody listens on) and no local wheels."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return env | {
        "PIP_CONFIG_FILE": os.devnull,
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
    }


def test_offline_is_one_line_that_says_so(tmp_path):
    proc = smart_turn_step(tmp_path, offline_env())
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("provision: could not download pipecat-ai==1.14.0") and "offline" in line, line
    assert not (tmp_path / models.SMART_TURN_FILE).exists()


def test_missing_model_names_the_setup_command(tmp_path, monkeypatch):
    monkeypatch.setenv("VOICE_MODELS_DIR", str(tmp_path))
    with pytest.raises(models.MissingModelError, match="scripts/setup"):
        models.smart_turn_model_path()
