"""The pump: one loop that drives any device against a session.

Every ``device.tick_s`` on the session's clock: the microphone's audio goes
into the session in 20 ms blocks (``BLOCK_S``) with the echo canceller's
reference; reply audio tops up the speaker; what the speaker really played is
counted. On virtual time (``settle=True``) the pump then waits for the
engines, so engine work takes no time on the timeline; on real time it does
not, and the very same code runs concurrently.

The session's timeline starts with the device's first audio: sample 0 of the
microphone is time 0, so the times of speech edges, transcripts and replies
are all on one clock (see the README, "One timeline").
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np

from core.audio import ASR_BLOCK, ASR_RATE
from shell.device import AudioDevice
from shell.session import Session


@dataclass
class PumpStats:
    ticks: int = 0
    blocks: int = 0  # 20 ms microphone blocks fed
    lateness: list[float] = field(default_factory=list)  # how late each tick ran (real time: the loop behind)

    @property
    def lateness_max_s(self) -> float:
        return round(max(self.lateness, default=0.0), 4)

    @property
    def lateness_p99_s(self) -> float:
        return round(float(np.percentile(self.lateness, 99)), 4) if self.lateness else 0.0


class Pump:
    def __init__(self, session: Session, device: AudioDevice, settle: bool = False) -> None:
        """``settle=True`` is virtual time: the session should then be in lockstep."""
        self.session = session
        self.device = device
        self.settle = settle
        self.stats = PumpStats()
        self._mic = np.zeros(0, dtype=np.float32)
        self._far = np.zeros(0, dtype=np.float32)
        self._far_known = False
        self._heard = False  # the device's first audio has come: the timeline has started
        self._start = 0.0  # on the session's clock: tick k is due at _start + k * tick_s
        self._k = 0

    async def run(self, stop: asyncio.Event | None = None, max_ticks: int | None = None) -> PumpStats:
        """Until the device's input is over, ``stop`` is set, ``max_ticks`` have run or the
        session has ended (``Session.ended``: a tool hung up)."""
        session, device, stats = self.session, self.device, self.stats
        session.attach(device)
        clock = session.clock
        while (stop is None or not stop.is_set()) and (max_ticks is None or stats.ticks < max_ticks):
            if session.ended.is_set():
                break  # a tool ended the conversation, and its goodbye has been played
            self._k += 1
            due = self._start + self._k * device.tick_s
            await clock.sleep_until(due)
            stats.lateness.append(clock.now() - due)
            stats.ticks += 1
            if not self.tick():
                break
            if self.settle:
                await session.settle(device.tick_s)
        return stats

    def tick(self) -> bool:
        """One round: capture in, reply audio out, played counted. False once the input is over."""
        session, device = self.session, self.device
        captured = device.capture()
        if captured is None:
            return False
        if not self._heard and len(captured.mic):
            # Time 0 is the microphone's first sample: what was just captured ends now.
            self._heard = True
            self._start, self._k = len(captured.mic) / ASR_RATE, 0
            session.clock.start_at(self._start)
        self._mic = np.concatenate([self._mic, captured.mic])
        if captured.far is not None:
            self._far_known = True
            self._far = np.concatenate([self._far, captured.far])
        while len(self._mic) >= ASR_BLOCK:
            block, self._mic = self._mic[:ASR_BLOCK], self._mic[ASR_BLOCK:]
            far = None
            if self._far_known:
                far, self._far = self._far[:ASR_BLOCK], self._far[ASR_BLOCK:]
            session.push_audio(block, far)
            self.stats.blocks += 1
        room = device.room()
        if room > 0:
            audio, response = session.take_audio(room)
            device.play(audio, response)
        for p in device.played():
            session.played(p.response, p.samples)
        return True
