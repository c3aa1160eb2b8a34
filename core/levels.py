"""How loud the microphone is: the current utterance, and the background during a reply.

Pure: frame energies in, decibels out. The barge-in policy compares them
(``core.barge_in.BargeInPolicy``): speech over the reply must be about as loud
as the person's own turns and stand out of what the microphone hears while
the assistant talks and nobody speaks.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

import numpy as np


def mean_db(energies: Iterable[float]) -> float:
    """The mean of frame energies (mean squares), in dB; at least one energy."""
    values = list(energies)
    return 10 * math.log10(sum(values) / len(values) + 1e-12)


class LevelMeter:
    """Mean energy of the voiced frames of one utterance, in dB (None before any)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._sum = 0.0
        self._n = 0

    def add(self, energy: float) -> None:
        self._sum += energy
        self._n += 1

    @property
    def db(self) -> float | None:
        return None if self._n == 0 else 10 * math.log10(self._sum / self._n + 1e-12)


class BackgroundMeter:
    """Median energy (dB) of the last few seconds of frames without speech, heard during a reply:
    noise and what the echo canceller left."""

    def __init__(self, frames: int = 94) -> None:  # 3 s of 32 ms frames
        self._energies: deque[float] = deque(maxlen=frames)

    def add(self, energy: float) -> None:
        self._energies.append(energy)

    @property
    def db(self) -> float | None:
        if len(self._energies) < 16:  # half a second: too little to say
            return None
        return 10 * math.log10(float(np.median(self._energies)) + 1e-12)
