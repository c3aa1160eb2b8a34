"""Work in flight over every session that shares one set of engines (pure).

Partial transcripts and speculative replies are optional: each is worth
starting only when the engines have room for it. A :class:`Budget` caps how
many run at once over all sessions; past the cap the work is skipped, not
queued, so that with many sessions it never takes the cores the work every
turn needs (the final pass, the reply) from them. One budget per kind of
work, held by the shared engines (``shell/engines.py``), read and
changed on the event loop's thread only.
"""

from __future__ import annotations


class Budget:
    def __init__(self, max_in_flight: int = 1) -> None:
        self.max_in_flight = max_in_flight
        self.in_flight = 0

    @property
    def available(self) -> bool:
        return self.in_flight < self.max_in_flight

    def take(self) -> None:
        self.in_flight += 1

    def release(self) -> None:
        self.in_flight -= 1
