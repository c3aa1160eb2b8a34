"""Interruptions heard whole (issue 15, item 4): how well the words said over a reply are transcribed.

Shared by ``tests/integration/test_interruptions.py`` and the benchmark (``python -m voice.bench interruptions``).
On the ``interrupt_*`` fixtures of ``scripts/make_turn_fixtures`` (a question,
then another speaker 2.2 s after it, inside the reply; echo none, -20, -10 dB):

- interruption WER: the interrupter's transcript against the final
  transcripts of every utterance that began at or after the labelled onset
  (less 0.3 s: the VAD's onset may lead the energy one) and was not let pass
  as a backchannel, joined: what the assistant was given to answer (a blip of
  the reply's own echo later on is a backchannel, and no part of it);
- the ways the ASR can hear it: ``linear`` (the default: SpeexDSP's linear
  filter), ``suppressed`` (AEC3's output, as before), ``off`` (no echo
  canceller at all: the reference, on the no-echo fixtures only; with echo,
  the assistant's own voice is a person to it).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.events import AsrFinal, Backchannel, SpeechStart
from shell.config import SessionConfig
from shell.engines import EngineConfig, Engines, load_engines
from voice.bench.common import ROOT, parser
from voice.bench.evaluate import FixtureRun, run_fixture
from voice.bench.fixtures import ECHO_DB, load_manifest
from voice.bench.scoring import word_error_rate

ONSET_LEAD_S = 0.3
ASR_PATHS = ("linear", "suppressed", "off")


def path_config(path: str, base: SessionConfig | None = None) -> SessionConfig:
    base = base or SessionConfig()
    if path == "off":
        return replace(base, echo_cancel=False)
    return replace(base, echo_cancel=True, asr_audio=path)  # type: ignore[arg-type]


@dataclass
class InterruptionRun:
    label: dict[str, Any]
    path: str
    run: FixtureRun

    @property
    def heard(self) -> str:
        onsets = {e.utterance: e.onset for e in self.run.of(SpeechStart)}
        passed = {e.utterance for e in self.run.of(Backchannel)}
        since = self.label["interrupt_onset_s"] - ONSET_LEAD_S
        return " ".join(
            e.text
            for e in self.run.of(AsrFinal)
            if onsets.get(e.utterance, 0.0) >= since and e.utterance not in passed and e.text
        )

    @property
    def wer(self) -> float:
        return word_error_rate(self.label["interrupter_transcript"], self.heard)

    @property
    def barged_in(self) -> bool:
        return bool(self.run.barge_ins)


async def run_interruption(engines: Engines, folder: Path, label: dict[str, Any], path: str) -> InterruptionRun:
    """Replay one interruption fixture (its echo as labelled) with the ASR hearing ``path``."""
    run = await run_fixture(engines, folder / f"{label['name']}.wav", config=path_config(path))
    return InterruptionRun(label, path, run)


BENCHMARK = """Interruptions heard whole: the words said over a reply, as the ASR hears them (issue 15, item 4).

    python -m voice.bench interruptions [--out DIR] [--fixtures DIR]     (default: docs/bench, a fresh build)

Builds the turn-taking fixtures (scripts/make_turn_fixtures) unless given,
loads the engines once, and replays each of the 18 ``interrupt_*`` fixtures
(6 questions, each interrupted 2.2 s after it by another speaker; no echo,
-20 and -10 dB of the reply echoed back) on virtual time, with the ASR
hearing ``linear`` (SpeexDSP's linear filter; the default), ``suppressed``
(AEC3's output, as before) and, without echo, ``off`` (no echo canceller at
all: the reference; with echo, the assistant's voice is a person to it). The
pipeline is the default one otherwise (Smart Turn, speculation).

Prints the interruption WER (voice/bench/interruptions.py) by echo level and
path, mean and max over the 6, barge-ins, and writes DIR/interruptions.json
with every run's transcript.
"""

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}


def echo_name(db: float | None) -> str:
    return "none" if db is None else f"{round(db)} dB"


async def measure(folder: Path) -> dict:
    engines = await asyncio.to_thread(load_engines, EngineConfig())
    runs = []
    try:
        for label in (m for m in load_manifest(folder) if m["kind"] == "interrupt"):
            for path in ASR_PATHS if label["echo_db"] is None else ASR_PATHS[:2]:
                r = await run_interruption(engines, folder, label, path)
                runs.append({"fixture": label["name"], "echo_db": label["echo_db"], "path": path,
                             "wer": round(r.wer, 3), "barge_ins": len(r.run.barge_ins), "heard": r.heard,
                             "said": label["interrupter_transcript"], "errors": r.run.errors})  # fmt: skip
                print(f"{label['name']:<48} {path:<10} WER {r.wer:.3f}  heard {r.heard!r}", flush=True)
    finally:
        await engines.aclose()
    summary = {}
    for db in ECHO_DB:
        for path in ASR_PATHS:
            mine = [r for r in runs if r["echo_db"] == db and r["path"] == path]
            if not mine:
                continue
            summary[f"{echo_name(db)} / {path}"] = {
                "echo": echo_name(db), "path": path, "fixtures": len(mine),
                "wer_mean": round(sum(r["wer"] for r in mine) / len(mine), 3),
                "wer_max": max(r["wer"] for r in mine), "barged_in": sum(r["barge_ins"] > 0 for r in mine),
            }  # fmt: skip
    return {"summary": summary, "runs": runs}


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=BENCHMARK.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--fixtures", type=Path, help="a folder made by scripts/make_turn_fixtures (default: build one)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.fixtures or Path(tmp)
        if args.fixtures is None:
            subprocess.run([sys.executable, str(ROOT / "scripts" / "make_turn_fixtures"), "--out", tmp], check=True)
        report = asyncio.run(measure(folder))
    print("\n| echo | ASR hears | interruption WER, mean (max) of 6 | barged in |")
    print("|---|---|---|---|")
    for s in report["summary"].values():
        print(f"| {s['echo']} | {s['path']} | {s['wer_mean']:.3f} ({s['wer_max']:.3f}) | {s['barged_in']} of 6 |")
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "interruptions.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nsaved {out}")
