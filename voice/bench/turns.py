"""When the person's turn ends, on the real pipeline: endpoint delay and cut-offs (issue 15).

Shared by ``tests/integration/test_turn_detector.py`` and ``python -m voice.bench endpoint``:
one place that says what the figures mean.

- endpoint delay: the endpoint's time minus where the VAD heard the speech
  end (``SpeechEnd.t - SpeechEnd.end``), on virtual time, so it is the
  decision alone (the model's own 70-100 ms is not in it; on real time it is);
- a cut: a sentence said as one turn that had an endpoint before its end.
  The inputs are single sentences from the shared recordings with a silence
  inserted at a word boundary inside them (cut at Whisper base's word
  timestamps), so any endpoint before its end is a cut, at the pause or at
  one of the sentence's own shorter pauses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from core.events import EndOfTurnCheck, Event, SpeechEnd
from shell.clock import MonotonicClock, VirtualClock
from shell.config import SessionConfig
from shell.engines import Engines
from shell.session import Session
from transport.replay import replay

# The pipeline before issue 15's turn-taking, to compare with on the same engines: silence
# (a 500 ms hangover) ends the turn, no speculative reply, the ASR hears AEC3's output.
BEFORE_ISSUE_15 = SessionConfig(end_of_turn=None, speculate=False, asr_audio="suppressed")

# One sentence each, said as one turn (recordings of ../shared/fixtures/speech;
# JFK and LJ001-0001 pause for over half a second inside their sentences, so
# they are several utterances even by silence, and are left out).
FINISHED = [
    "cmu_arctic_us_aew_a0001",
    "cmu_arctic_us_aew_a0002",
    "cmu_arctic_us_aew_a0003",
    "cmu_arctic_us_axb_a0004",
    "cmu_arctic_us_axb_a0005",
    "ljspeech_LJ001-0002",
    "ljspeech_LJ001-0005",
    "ljspeech_LJ001-0007",
]

# Word boundaries inside those sentences (Whisper base's word timestamps, where
# one word ends as the next begins): recording, seconds, the words around it.
BOUNDARIES = [
    ("cmu_arctic_us_aew_a0003", 1.50, "For the twentieth time that | evening the two men shook hands."),
    ("cmu_arctic_us_aew_a0002", 0.74, "Not at this | particular case, Tom, apologized Whittemore."),
    ("cmu_arctic_us_aew_a0001", 0.72, "Author of | the danger trail, Philip Steels, etc."),
    ("cmu_arctic_us_axb_a0004", 1.40, "Lord, but I'm glad | to see you again, Phil."),
    ("ljspeech_LJ001-0002", 0.32, "in being | comparatively modern."),
    ("ljspeech_LJ001-0005", 2.20, "... of movable metal letters in | the middle of the fifteenth century ..."),
]

PAUSES_S = (0.3, 0.6, 1.0)


@dataclass
class TurnRun:
    """One replay: its events, and what they say about where the turns ended."""

    events: list[Event]
    transcript: list[dict[str, Any]]
    errors: list[str]

    @property
    def endpoints(self) -> list[SpeechEnd]:
        return [e for e in self.events if isinstance(e, SpeechEnd)]

    @property
    def checks(self) -> list[EndOfTurnCheck]:
        return [e for e in self.events if isinstance(e, EndOfTurnCheck)]

    @property
    def endpoint_delay_s(self) -> float:
        """Of the last endpoint: where the sentence ends."""
        last = self.endpoints[-1]
        return last.t - last.end

    def cut(self, duration_s: float) -> bool:
        """Whether a sentence ``duration_s`` long was cut: an endpoint for speech that ended over
        0.5 s before the input does (its last word ends within 0.2 s of it, in these recordings).
        The words after a cut may never become a turn of their own (issue 15, item 3), so the
        endpoints are not merely counted."""
        return any(e.end < duration_s - 0.5 for e in self.endpoints)

    def cut_at(self, at_s: float, pause_s: float) -> bool:
        """An endpoint in the inserted pause (speech that ended where it begins, give or take a frame or two)."""
        return any(at_s - 0.1 <= e.end <= at_s + 0.1 and e.t <= at_s + pause_s + 0.1 for e in self.endpoints)

    def user_text(self) -> str:
        return " ".join(t["text"] for t in self.transcript if t["role"] == "user")


async def run_turns(engines: Engines, audio: np.ndarray, config: SessionConfig, fast: bool = True) -> TurnRun:
    """Replay ``audio`` through a session, replies and all, on virtual time (``fast``) or real time."""
    events: list[Event] = []
    clock = VirtualClock() if fast else MonotonicClock()
    session = Session(engines, clock, config, on_event=events.append, lockstep=fast)
    try:
        await replay(session, audio, settle=fast)
    finally:
        await session.aclose()
    return TurnRun(events, session.history.to_json(), session.errors)
