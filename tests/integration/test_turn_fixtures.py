"""scripts/make_turn_fixtures: the turn-taking fixtures of issue 15, built from the shared recordings."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from core.audio import ASR_RATE
from tests.conftest import ROOT
from transport.files import load_audio
from voice.bench.fixtures import ECHO_DB, INTERRUPTIONS, PAUSES_S, SENTENCES, SHARED_SPEECH, load_manifest

pytestmark = pytest.mark.engines  # Whisper base finds the word boundaries


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    def make():
        out = tmp_path_factory.mktemp("turn-fixtures")
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_turn_fixtures"), "--out", str(out)], check=True)
        return out

    return make(), make()


def test_every_sentence_pause_and_interruption_is_made(made):
    labels = load_manifest(made[0])
    kinds = [m["kind"] for m in labels]
    assert kinds.count("pause") == len(SENTENCES) * len(PAUSES_S) == 32
    assert kinds.count("finished") == len(SENTENCES) == 8
    assert kinds.count("interrupt") == len(INTERRUPTIONS) * len(ECHO_DB) == 18
    assert {p.stem for p in made[0].glob("*.wav")} == {m["name"] for m in labels}


def test_a_pause_is_silence_inserted_between_two_words_of_the_sentence(made):
    for label in load_manifest(made[0]):
        if label["kind"] != "pause":
            continue
        original = load_audio(SHARED_SPEECH / f"{label['recording']}.wav")
        fixture = load_audio(made[0] / f"{label['name']}.wav")
        at, n = round(label["pause_at_s"] * ASR_RATE), round(label["pause_s"] * ASR_RATE)
        assert len(fixture) == len(original) + n
        assert not fixture[at : at + n].any()
        np.testing.assert_allclose(fixture[:at], original[:at], atol=1 / 32768)
        np.testing.assert_allclose(fixture[at + n :], original[at:], atol=1 / 32768)
        before, after = label["words_before"].split(), label["words_after"].split()
        assert len(before) >= 2 and len(after) >= 2, label  # inside the sentence, not at its edges
        assert before[-1][-1] not in ",.;:", label  # inside a clause


def test_an_interruption_is_another_speaker_inside_the_reply(made):
    for label in load_manifest(made[0]):
        if label["kind"] == "interrupt":
            assert label["question"] != label["interrupter"]
            assert label["echo_db"] in ECHO_DB and label["interrupt_onset_s"] > 2.2


def test_the_same_recordings_make_the_same_files(made):
    first, second = made
    for wav in first.iterdir():
        assert wav.read_bytes() == (second / wav.name).read_bytes(), wav.name
