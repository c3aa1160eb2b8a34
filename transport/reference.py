"""Where the echo canceller's reference lines up with the microphone (pure).

The sound card's two streams carry timestamps on one clock, and each captured
block is lined up with what the speaker played at that moment. Those
timestamps jitter: through PulseAudio, measured here, the place they give
moves by up to 6 ms from one 10 ms block to the next while the true echo path
stays put. Cut at those places, the reference skips and repeats a few
milliseconds every block: in recorded desk sessions the microphone's echo
correlated 0.2-0.6 with it at the best lag (0.5-1.0 with this track), and
WebRTC's echo canceller, whose filter models one fixed path, stopped
cancelling for seconds after a single 20 ms jump of its reference.

:class:`ReferenceTrack` keeps the reference one continuous stream instead:
each block follows on from the last, and the timestamps only steer it,
averaged over a few hundred milliseconds and at most ``slew`` of a sample per
sample (a drift of 0.2% is inaudible to the canceller). It jumps only while
the speaker is silent, where a jump costs nothing, or when the timestamps
move by more than ``snap_s`` at once (an underrun, a restarted stream).
"""

from __future__ import annotations

import math


class ReferenceTrack:
    def __init__(self, rate: int, slew: float = 0.002, smoothing: float = 0.05, snap_s: float = 0.05) -> None:
        self.slew = slew
        self.smoothing = smoothing  # per block: about 20 blocks (200 ms at 10 ms blocks) of averaging
        self.snap = round(snap_s * rate)
        self._next: int | None = None  # where the next block follows on from this one
        self._error = 0.0  # the timestamps' place minus ours, averaged

    def place(self, measured: int, frames: int, silent: bool) -> int:
        """The speaker sample (a running count) that a captured block of ``frames`` starts at.

        ``measured``: where the timestamps put it. ``silent``: the speaker played
        nothing around there, so a jump would not be heard by the canceller.
        """
        if self._next is None or abs(measured - self._next) > self.snap:
            start, self._error = measured, 0.0
        else:
            self._error += self.smoothing * (measured - self._next - self._error)
            if silent:
                step = round(self._error)
            else:
                most = max(1, math.floor(self.slew * frames))
                step = max(-most, min(most, round(self._error)))
            start = self._next + step
            self._error -= step
        self._next = start + frames
        return start
