"""Interruptions heard whole (issue 15, item 4), on the real engines, on virtual time.

Another speaker talks over the reply (scripts/make_turn_fixtures' ``interrupt_*``
fixtures). AEC3's suppressor, which the VAD hears, eats the first words of
such speech; the ASR hears SpeexDSP's linear output, which keeps them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT
from voice.bench.fixtures import load_manifest
from voice.bench.interruptions import run_interruption

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="session")]

QUESTION = "cmu_arctic_us_aew_a0003"  # "For the twentieth time ...", then "in being comparatively modern."


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    out = tmp_path_factory.mktemp("turn-fixtures")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_turn_fixtures"), "--out", str(out)], check=True)
    return out, {m["name"]: m for m in load_manifest(out)}


@pytest.mark.parametrize("echo", ["echo_10db", "no_echo"])
async def test_an_interruption_is_transcribed_whole_with_the_canceller_on(engines, fixtures, echo):
    folder, labels = fixtures
    r = await run_interruption(engines, folder, labels[f"interrupt_{QUESTION}_{echo}"], "linear")
    assert r.run.errors == []
    assert r.barged_in
    assert r.wer <= 0.2, r.heard
    user = [t["text"] for t in r.run.transcript if t["role"] == "user"]
    assert len(user) >= 2 and r.heard.split()[0].lower() in " ".join(user[1:]).lower()  # and it is answered
