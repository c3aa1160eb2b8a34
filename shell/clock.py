"""Injected time.

Every timestamp the pipeline produces comes from a :class:`Clock`. The real
clock follows ``time.monotonic``; the virtual clock is moved forward by the
audio feed, so a replay on virtual time is exact and repeatable whatever the
machine's speed. Both expose the same two operations, and the pipeline code
does not know which one it runs on.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Seconds on the session's timeline (0 = the microphone's first sample)."""

    def now(self) -> float: ...

    def start_at(self, t: float) -> None:
        """From now on, :meth:`now` reads ``t`` here: the timeline starts with the first audio."""
        ...

    async def sleep_until(self, t: float) -> None:
        """Return once :meth:`now` has reached ``t``."""
        ...


class MonotonicClock:
    """Wall time, as seconds since the clock was created."""

    def __init__(self) -> None:
        self._origin = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._origin

    def start_at(self, t: float) -> None:
        self._origin = time.monotonic() - t

    async def sleep_until(self, t: float) -> None:
        delay = t - self.now()
        if delay > 0:
            await asyncio.sleep(delay)


class VirtualClock:
    """Time that stands still until the feed moves it.

    ``sleep_until`` jumps straight to the requested time: whoever drives the
    feed decides when time passes (after the engines have settled).
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def start_at(self, t: float) -> None:
        self._now = t

    def advance_to(self, t: float) -> None:
        if t < self._now:
            raise ValueError(f"virtual time cannot go back ({t} < {self._now})")
        self._now = t

    async def sleep_until(self, t: float) -> None:
        if t > self._now:
            self._now = t
        # Yield once so that the call is a real suspension point on both clocks.
        await asyncio.sleep(0)
