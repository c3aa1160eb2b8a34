"""Replaying labelled fixtures and measuring barge-in behaviour.

Shared by the tests and ``python -m voice.bench bargein``: one place that says what
"reaction time" and "truncation error" mean.

- reaction time: from the labelled onset of the interrupting speech to the
  first sample after which the reply audio stays silent (measured on the
  reply track, not taken from the log);
- truncation error: the number of words in the stored (heard) assistant text
  minus the number of words Whisper (base, full 30 s window) hears in the
  reply audio that was actually played before the stop.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from core.events import BargeIn, Event, PlaybackStart
from shell.clock import MonotonicClock, VirtualClock
from shell.config import SessionConfig
from shell.engines import Engines
from shell.session import Session
from transport.echo_path import EchoPath
from transport.files import load_audio
from transport.replay import replay

E = TypeVar("E", bound=Event)


@dataclass
class FixtureRun:
    label: dict[str, Any]
    events: list[Event]
    transcript: list[dict[str, Any]]
    reply: np.ndarray
    rate: int
    errors: list[str] = field(default_factory=list)

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def barge_ins(self) -> list[BargeIn]:
        return self.of(BargeIn)

    def reaction_s(self) -> float | None:
        """Interrupt onset to silent output, measured on the reply audio."""
        onset = self.label.get("interrupt_onset_s")
        if onset is None:
            return None
        n = self.rate // 200  # 5 ms
        start = round(onset * self.rate)
        env = np.abs(self.reply[start:])
        env = env[: len(env) // n * n].reshape(-1, n).max(axis=1)
        quiet = env < 1e-3
        # The first 5 ms step from which the output stays silent for 200 ms.
        run = 40
        for k in range(len(quiet) - run):
            if quiet[k : k + run].all():
                return k * n / self.rate
        return None

    def heard_turn(self) -> dict[str, Any] | None:
        return next((t for t in self.transcript if t.get("interrupted")), None)

    def played_audio_before_stop(self) -> np.ndarray | None:
        """The first reply's audio from its start to the pause that cut it."""
        if not self.barge_ins:
            return None
        cut = self.barge_ins[0]
        start = next(e.t for e in self.of(PlaybackStart) if e.response == cut.response)
        stop = cut.paused_at + 0.02
        return self.reply[round(start * self.rate) : round(stop * self.rate)]


def load_label(wav: Path) -> dict[str, Any]:
    return json.loads(wav.with_suffix(".json").read_text())


# The barge-in fixtures place speech over the reply by where it starts: one 500 ms
# hangover after the question (scripts/make_bargein_fixtures). Smart Turn's
# endpoint moves with its answer (0.2 s, or up to its 2 s maximum on a sentence it
# doubts), so they are replayed with silence ending the turn, as they were made.
FIXTURE_CONFIG = SessionConfig(end_of_turn=None)


async def run_fixture(
    engines: Engines,
    wav: Path,
    fast: bool = True,
    echo_db: float | None = None,
    config: SessionConfig | None = None,
) -> FixtureRun:
    """Replay one fixture with the echo its label asks for (or ``echo_db``), by default
    with :data:`FIXTURE_CONFIG`."""
    label = load_label(wav)
    db = label.get("echo_db") if echo_db is None else echo_db
    echo = None if db is None else EchoPath(db, label.get("echo_delay_ms", 30))
    return await run_audio(engines, load_audio(wav), config or FIXTURE_CONFIG, echo, fast, label)


async def run_audio(
    engines: Engines,
    audio: np.ndarray,
    config: SessionConfig,
    echo: EchoPath | None = None,
    fast: bool = True,
    label: dict[str, Any] | None = None,
) -> FixtureRun:
    """Replay ``audio`` (16 kHz) through a session of ``config``, with the reply echoed back
    through ``echo`` (None: headphones), on virtual time (``fast``) or real time."""
    events: list[Event] = []
    clock = VirtualClock() if fast else MonotonicClock()
    session = Session(engines, clock, config, on_event=events.append, lockstep=fast)
    try:
        result = await replay(session, audio, settle=fast, echo=echo)
    finally:
        await session.aclose()
    return FixtureRun(label or {}, events, session.history.to_json(), result.reply, engines.output_rate, session.errors)


def truncation_error_words(run: FixtureRun, engines: Engines) -> int | None:
    """Stored heard words minus the words Whisper hears in what was played."""
    turn = run.heard_turn()
    played = run.played_audio_before_stop()
    if turn is None or played is None:
        return None
    from core.audio import ASR_RATE, resample

    audio = resample(played, run.rate, ASR_RATE)
    # The full window: on audio cut off mid-word it is the steadier yardstick.
    clip = np.concatenate([audio, np.zeros(ASR_RATE // 2, np.float32)])
    heard_by_asr = engines.asr_final.recognize(clip, full_window=True).text
    return len(_words(turn["text"])) - len(_words(heard_by_asr))


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())  # "two-minute" is two words, as spoken
