"""What a speaker the pipeline does not drive sample by sample was sent, and played (pure).

A network client and the sound card both buffer reply audio ahead of what
they play (``lead``, a jitter buffer or the device buffer) and tell what was
played as totals: samples played and samples dropped unplayed (a buffer
flushed on a barge-in), both counted over everything sent, in order. A
client that sends no reports is taken to play each frame as soon as it
arrives, one after the other (:meth:`PlaybackAccount.estimate`). Either way
what comes out is sample counts per reply (:class:`~shell.device.Played`),
for the session's playback ledger. With ``keep_audio`` the played audio
itself is kept too (:meth:`PlaybackAccount.take_played_audio`): a network
client's echo-canceller reference is what it played. No I/O and no clock:
times and counts in, counts out.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from shell.device import Played


class ReportError(ValueError):
    """A played report that cannot be true (totals going back, or beyond what was sent)."""


class PlaybackAccount:
    def __init__(self, rate: int, lead_s: float, acks: bool = True, keep_audio: bool = False) -> None:
        self.rate = rate
        self.lead = max(1, round(lead_s * rate))
        self.acks = acks
        self.keep_audio = keep_audio
        self.sent = 0  # samples sent so far
        self.played = 0  # ... reported (or estimated) played
        self.dropped = 0  # ... reported dropped unplayed
        self._pending: deque[tuple[int | None, int]] = deque()  # (reply, samples) sent, not yet played or dropped
        self._audio: deque[np.ndarray] = deque()  # the same, as audio (keep_audio)
        self._played_audio: list[np.ndarray] = []
        self._cursor = 0.0  # without acks: when the client will have played all it was sent

    @property
    def outstanding(self) -> int:
        """Samples sent and not yet played or dropped: the speaker's buffer."""
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
        self._pending.append((response, len(audio)))
        if self.keep_audio:
            self._audio.append(audio)
        self.sent += len(audio)
        self._cursor = max(self._cursor, now) + len(audio) / self.rate

    def report(self, played: int, dropped: int = 0) -> list[Played]:
        """The speaker's totals; returns what was newly played, per reply."""
        if played < self.played or dropped < self.dropped:
            raise ReportError(f"played/dropped totals only grow (had {self.played}/{self.dropped})")
        if played + dropped > self.sent:
            raise ReportError(f"{played + dropped} samples reported, {self.sent} sent")
        out = self._take(played - self.played, keep=True)
        self.played = played
        self._take(dropped - self.dropped, keep=False)
        self.dropped = dropped
        return out

    def estimate(self, now: float) -> list[Played]:
        """Without reports: what has played by ``now``."""
        ahead = max(0.0, self._cursor - now) * self.rate
        played = max(self.played, self.sent - round(ahead))
        out = self._take(played - self.played, keep=True)
        self.played = played
        return out

    def take_played_audio(self) -> np.ndarray:
        """The audio played since the last call (``keep_audio``), in order."""
        out, self._played_audio = self._played_audio, []
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)

    def _take(self, n: int, keep: bool) -> list[Played]:
        out: list[Played] = []
        while n > 0 and self._pending:
            response, k = self._pending[0]
            taken = min(k, n)
            if taken == k:
                self._pending.popleft()
            else:
                self._pending[0] = (response, k - taken)
            if out and out[-1].response == response:
                out[-1] = Played(response, out[-1].samples + taken)
            else:
                out.append(Played(response, taken))
            if self.keep_audio:
                self._take_audio(taken, keep)
            n -= taken
        return out

    def _take_audio(self, n: int, keep: bool) -> None:
        while n > 0:
            head = self._audio[0]
            if len(head) <= n:
                self._audio.popleft()
                piece = head
            else:
                piece, self._audio[0] = head[:n], head[n:]
            if keep:
                self._played_audio.append(piece)
            n -= len(piece)
