"""Labelled inputs made from the real recordings, and what their labels mean.

Shared by ``scripts/make_bargein_fixtures``, ``scripts/make_turn_fixtures``,
the tests that build and replay them, and the benchmarks. A fixture is
``NAME.wav`` (16 kHz mono, 16-bit) with ``NAME.json`` beside it, its label.

Turn-taking fixtures (issue 15), ``make_turn_fixtures``:

- ``pause_<recording>_<ms>ms``: one sentence with a silence inserted at a
  word boundary inside it (cut at Whisper base's word timestamps, in the gap
  between the two words). Expected: one user turn.
- ``finished_<recording>``: the sentence as recorded. Expected: one user turn,
  ended soon after its last word.
- ``interrupt_<question>_<echo>``: a question, then another speaker's
  sentence starting ``after_question_s`` after the question's speech ends
  (inside the reply), replayed with the reply echoed back at ``echo_db``
  (``null``: no echo). Expected: a barge-in, and the interruption's words
  in the history.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from core.audio import ASR_RATE
from voice.bench.common import SHARED_SPEECH

# One sentence each, said as one turn (JFK and LJ001-0001 pause for over half a
# second inside their sentences, so they are several utterances even by silence).
SENTENCES = [
    "cmu_arctic_us_aew_a0001",
    "cmu_arctic_us_aew_a0002",
    "cmu_arctic_us_aew_a0003",
    "cmu_arctic_us_axb_a0004",
    "cmu_arctic_us_axb_a0006",
    "ljspeech_LJ001-0002",
    "ljspeech_LJ001-0005",
    "ljspeech_LJ001-0007",
]
PAUSES_S = (0.3, 0.6, 1.0, 1.5)
# (question, interrupter): always two different speakers; the interrupters short, as
# interruptions are, and heard right by Whisper base on their own (axb_a0005's "Will we
# ever forget it." is not: "Will be over for greater."), so what is lost is the onset.
INTERRUPTIONS = [
    ("cmu_arctic_us_aew_a0003", "ljspeech_LJ001-0002"),
    ("cmu_arctic_us_aew_a0002", "cmu_arctic_us_axb_a0004"),
    ("cmu_arctic_us_axb_a0006", "ljspeech_LJ001-0002"),
    ("cmu_arctic_us_axb_a0004", "cmu_arctic_us_aew_a0003"),
    ("ljspeech_LJ001-0002", "cmu_arctic_us_axb_a0004"),
    ("cmu_arctic_us_aew_a0001", "cmu_arctic_us_axb_a0006"),
]
ECHO_DB: tuple[float | None, ...] = (None, -20.0, -10.0)
AFTER_QUESTION_S = 2.2  # the interruption's onset after the question's speech ends: inside the reply
REPLY_ROOM_S = 14.0  # silence after the question: room for the reply


@dataclass(frozen=True)
class Word:
    text: str
    start: float
    end: float


def shared_transcripts(speech: Path = SHARED_SPEECH) -> dict[str, str]:
    """Recording name to its transcript, from the shared fixtures' manifest.tsv."""
    rows = (speech.parent / "manifest.tsv").read_text().splitlines()[1:]
    return {Path(r.split("\t")[0]).stem: r.split("\t")[5].strip('"').replace('""', '"') for r in rows}


def speech_edges(audio: np.ndarray, floor_db: float = -35.0) -> tuple[float, float]:
    """First and last 10 ms frame above ``floor_db`` (RMS), in seconds: onsets measured on
    the audio, not by the VAD under test."""
    n = ASR_RATE // 100
    frames = audio[: len(audio) // n * n].reshape(-1, n)
    loud = np.flatnonzero(20 * np.log10(np.sqrt((frames**2).mean(axis=1)) + 1e-9) > floor_db)
    return loud[0] / 100, (loud[-1] + 1) / 100


def _plain(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]", " ", text.lower()).split()


def inner_boundary(words: list[Word], transcript: str) -> tuple[float, int]:
    """Where to insert a pause: the gap between two words nearest the sentence's middle,
    inside a clause (not after a comma), not after its first word or before its last;
    the time is the middle of that gap. Returns the time and how many words come before it.

    Both words must follow each other in ``transcript`` as Whisper heard them: a
    misheard word ("Philip" as "fill up") has a gap inside it, not a boundary."""
    said = f" {' '.join(_plain(transcript))} "
    mid = (words[0].start + words[-1].end) / 2

    def said_together(i: int) -> bool:
        return f" {' '.join(_plain(words[i].text + ' ' + words[i + 1].text))} " in said

    inside = [i for i in range(1, len(words) - 2) if words[i].text[-1:].isalnum() and said_together(i)]
    cuts = [((words[i].end + words[i + 1].start) / 2, i + 1) for i in inside]
    return min(cuts, key=lambda cut: abs(cut[0] - mid))


def with_silence(audio: np.ndarray, at_s: float, silence_s: float) -> np.ndarray:
    """``audio`` with ``silence_s`` of digital silence inserted at ``at_s`` (what the replay
    feeds after a recording: these recordings have no room tone of their own to repeat)."""
    at = round(at_s * ASR_RATE)
    return np.concatenate([audio[:at], np.zeros(round(silence_s * ASR_RATE), np.float32), audio[at:]])


def over_reply(question: np.ndarray, clip: np.ndarray, onset_s: float) -> np.ndarray:
    """The question and room for the reply, with ``clip`` added so its speech starts at ``onset_s``."""
    audio = np.concatenate([question, np.zeros(round(REPLY_ROOM_S * ASR_RATE), dtype=np.float32)])
    at = round((onset_s - speech_edges(clip)[0]) * ASR_RATE)
    audio[at : at + len(clip)] += clip[: len(audio) - at]
    return audio


def write_fixture(out: Path, name: str, audio: np.ndarray, label: dict[str, Any]) -> None:
    sf.write(out / f"{name}.wav", np.clip(audio, -1, 1), ASR_RATE, subtype="PCM_16")
    (out / f"{name}.json").write_text(json.dumps({"name": name, **label}, indent=2) + "\n")


def load_manifest(folder: Path) -> list[dict[str, Any]]:
    """The labels of the fixtures in ``folder``, as ``make_turn_fixtures`` listed them."""
    return json.loads((folder / "manifest.json").read_text())["fixtures"]
