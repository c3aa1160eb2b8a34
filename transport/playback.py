"""Playback accounting for a speaker at the other end of a network (pure).

The server sends reply audio a little ahead of what the client has played
(``lead``, its jitter buffer) and learns what was actually played from the
client's reports: totals of samples played and of samples dropped unplayed
(a buffer flushed on a barge-in), both counted over everything sent, in order.
A client that sends no reports is taken to play each frame as soon as it
arrives, one after the other. Either way the audio that was played comes out
of :meth:`RemotePlayback.report` or :meth:`RemotePlayback.estimate`, tagged
with the reply it belongs to, for the session's playback ledger and echo
canceller. No I/O and no clock: times and counts in, segments out.
"""

from __future__ import annotations

from collections import deque

import numpy as np

Segment = tuple[np.ndarray, int | None]  # audio and the reply it belongs to


class ReportError(ValueError):
    """A played report that cannot be true (totals going back, or beyond what was sent)."""


class RemotePlayback:
    def __init__(self, rate: int, lead_s: float, acks: bool) -> None:
        self.rate = rate
        self.lead = max(1, round(lead_s * rate))
        self.acks = acks
        self.sent = 0  # samples sent so far
        self.played = 0  # ... reported (or estimated) played
        self.dropped = 0  # ... reported dropped unplayed
        self._pending: deque[Segment] = deque()  # sent, neither played nor dropped, in order
        self._cursor = 0.0  # without acks: when the client will have played all it was sent

    @property
    def outstanding(self) -> int:
        """Samples sent and not yet played or dropped: the client's buffer."""
        return self.sent - self.played - self.dropped

    def budget(self, now: float) -> int:
        """How many samples may be sent at ``now`` without running more than ``lead`` ahead."""
        if self.acks:
            return max(0, self.lead - self.outstanding)
        ahead = max(0.0, self._cursor - now) * self.rate
        return max(0, self.lead - round(ahead))

    def sent_audio(self, audio: np.ndarray, response: int | None, now: float) -> None:
        if not len(audio):
            return
        self._pending.append((audio, response))
        self.sent += len(audio)
        self._cursor = max(self._cursor, now) + len(audio) / self.rate

    def report(self, played: int, dropped: int = 0) -> list[Segment]:
        """The client's totals; returns the audio newly played (dropped audio is discarded)."""
        if played < self.played or dropped < self.dropped:
            raise ReportError(f"played/dropped totals only grow (had {self.played}/{self.dropped})")
        if played + dropped > self.sent:
            raise ReportError(f"{played + dropped} samples reported, {self.sent} sent")
        out = self._take(played - self.played)
        self.played = played
        self._take(dropped - self.dropped)
        self.dropped = dropped
        return out

    def estimate(self, now: float) -> list[Segment]:
        """Without reports: the audio that has played by ``now``."""
        ahead = max(0.0, self._cursor - now) * self.rate
        played = max(self.played, self.sent - round(ahead))
        out = self._take(played - self.played)
        self.played = played
        return out

    def _take(self, n: int) -> list[Segment]:
        out: list[Segment] = []
        while n > 0 and self._pending:
            audio, response = self._pending[0]
            if len(audio) <= n:
                self._pending.popleft()
                out.append((audio, response))
                n -= len(audio)
            else:
                out.append((audio[:n], response))
                self._pending[0] = (audio[n:], response)
                n = 0
        return out
