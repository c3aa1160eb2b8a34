"""Speculative replies on the real pipeline: how often the reply was ready at the endpoint, and what
the discarded ones cost (issue 15, item 2).

Shared by ``scripts/bench_speculation`` and the turn-taking benchmark: one place that says what the
figures mean. A speculative reply is started on the early final, before the endpoint
(``voice/core/turns.py``); at the endpoint it is committed or, if the person went on, discarded.

- turns: replies started (``response_start``: answered user turns, speculated or not);
- ready: committed replies whose first chunk's audio was synthesized by the endpoint
  (``speculative_commit.ready``): played at once; the share is of all turns;
- late: committed before their first chunk was ready (they go on from the endpoint);
- discarded, and the tokens they generated for nothing (``speculative_discard.tokens``), per turn.

On virtual time engine work takes no time, so a speculation started before the endpoint is always
ready at it, and a discarded one had generated its whole reply (up to ``max_tokens``) before the
person went on: the waste is an upper bound. On real time both depend on the machine (the early
final's Whisper pass, the LLM's decode speed); there a discarded request is aborted mid-generation
and counts the tokens it had streamed by then.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from voice.bench.turns import run_turns
from voice.core.events import Event, ResponseStart, SpeculativeCommit, SpeculativeDiscard, SpeculativeStart
from voice.shell.engines import Engines
from voice.shell.session import SessionConfig


@dataclass
class SpeculationFigures:
    turns: int = 0
    speculated: int = 0
    ready: int = 0
    late: int = 0
    discarded: int = 0
    wasted_tokens: int = 0
    discard_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def ready_share(self) -> float | None:
        """Of the turns answered, those whose reply was ready to play at the endpoint."""
        return round(self.ready / self.turns, 3) if self.turns else None

    @property
    def wasted_tokens_per_turn(self) -> float | None:
        return round(self.wasted_tokens / self.turns, 2) if self.turns else None

    def add(self, other: SpeculationFigures) -> None:
        for name in ("turns", "speculated", "ready", "late", "discarded", "wasted_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for reason, n in other.discard_reasons.items():
            self.discard_reasons[reason] = self.discard_reasons.get(reason, 0) + n

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"ready_share": self.ready_share, "wasted_tokens_per_turn": self.wasted_tokens_per_turn}


def speculation_figures(events: Iterable[Event]) -> SpeculationFigures:
    """The figures of one session (or several, one after the other) from its events."""
    f = SpeculationFigures()
    for e in events:
        match e:
            case ResponseStart():
                f.turns += 1
            case SpeculativeStart():
                f.speculated += 1
            case SpeculativeCommit():
                if e.ready:
                    f.ready += 1
                else:
                    f.late += 1
            case SpeculativeDiscard():
                f.discarded += 1
                f.wasted_tokens += e.tokens
                f.discard_reasons[e.reason] = f.discard_reasons.get(e.reason, 0) + 1
    return f


@dataclass
class SpeculationRun:
    """One recording replayed: its events, the conversation stored, and the figures."""

    events: list[Event]
    transcript: list[dict[str, Any]]
    errors: list[str]
    figures: SpeculationFigures


async def measure_speculation(
    engines: Engines, audio: np.ndarray, config: SessionConfig | None = None, fast: bool = True
) -> SpeculationRun:
    """Replay ``audio`` through a session (virtual time with ``fast``) and measure its speculation."""
    run = await run_turns(engines, audio, config or SessionConfig(), fast)
    return SpeculationRun(run.events, run.transcript, run.errors, speculation_figures(run.events))
