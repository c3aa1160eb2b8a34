"""Interruptions heard whole (issue 15, item 4): how well the words said over a reply are transcribed.

Shared by ``tests/integration/test_interruptions.py`` and ``scripts/bench_interruptions``.
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

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from voice.bench.evaluate import FixtureRun, run_fixture
from voice.bench.scoring import word_error_rate
from voice.core.events import AsrFinal, Backchannel, SpeechStart
from voice.shell.engines import Engines
from voice.shell.session import SessionConfig

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
