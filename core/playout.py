"""The reply audio waiting for the speaker (pure: arrays in, arrays out).

The transport pulls fixed blocks; :meth:`Playout.pull` says how many of the
samples in a block were reply audio, which is what the playback ledger counts.
Pausing fades out within the next block (a few milliseconds, so no click) and
then plays silence while keeping the queue; resuming fades back in; clearing
drops everything queued.
"""

from __future__ import annotations

from collections import deque

import numpy as np


class Playout:
    def __init__(self, rate: int, fade_ms: float = 5.0) -> None:
        self.rate = rate
        self._fade = max(1, round(rate * fade_ms / 1000))
        self._queue: deque[np.ndarray] = deque()
        self._queued = 0
        self.paused = False
        self._fade_out = False  # the next pull fades out, then silence
        self._fade_in = False  # the next samples pulled fade in

    @property
    def queued(self) -> int:
        """Samples waiting to be played."""
        return self._queued

    def append(self, audio: np.ndarray) -> None:
        if len(audio):
            self._queue.append(np.asarray(audio, dtype=np.float32))
            self._queued += len(audio)

    def pause(self) -> None:
        if not self.paused:
            self.paused = True
            self._fade_out = True
            self._fade_in = False

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            self._fade_out = False
            self._fade_in = True

    def clear(self) -> None:
        self._queue.clear()
        self._queued = 0

    def pull(self, n: int) -> tuple[np.ndarray, int]:
        """The next block of ``n`` samples, and how many of them were reply audio."""
        out = np.zeros(n, dtype=np.float32)
        if self.paused:
            if not self._fade_out:
                return out, 0
            self._fade_out = False
            k = self._take(out, min(n, self._fade))
            out[:k] *= np.linspace(1.0, 0.0, k, endpoint=False, dtype=np.float32)
            return out, k
        k = self._take(out, n)
        if self._fade_in and k:
            m = min(k, self._fade)
            out[:m] *= np.linspace(0.0, 1.0, m, endpoint=False, dtype=np.float32)
            self._fade_in = False
        return out, k

    def _take(self, out: np.ndarray, n: int) -> int:
        filled = 0
        while filled < n and self._queue:
            head = self._queue[0]
            k = min(n - filled, len(head))
            out[filled : filled + k] = head[:k]
            filled += k
            if k == len(head):
                self._queue.popleft()
            else:
                self._queue[0] = head[k:]
        self._queued -= filled
        return filled
