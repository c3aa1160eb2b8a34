"""The playback port: what every transport is to the pipeline.

A transport is a device with a microphone and a speaker. The pump
(``shell/pump.py``) asks it, on the session's clock, for what it
captured, how much reply audio it can take, and what it really played; the
session commands its speaker (pause, resume, flush) directly. Replay, the
sound card and a WebSocket client are three implementations
(``transport/replay.py``, ``transport/sound.py``, ``transport/ws_server.py``);
a new transport (telephony, WebRTC) is a new device, nothing else.

Sample counts, not audio, travel back: :meth:`AudioDevice.played` says how
many samples of which reply came out of the speaker, which is all the
playback ledger needs. The echo canceller's reference travels with the
capture, because only the device knows how its speaker and microphone line
up in time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Captured:
    """Microphone audio (16 kHz mono float32) since the last capture, and what the speaker
    played over the same span at 16 kHz (the echo canceller's reference): a continuous
    stream that may run a little behind the microphone; None where the device knows none."""

    mic: np.ndarray
    far: np.ndarray | None = None


@dataclass(frozen=True)
class Played:
    """``samples`` of reply ``response`` came out of the speaker (None: audio of no reply)."""

    response: int | None
    samples: int


class AudioDevice(Protocol):
    """A microphone and a speaker, driven by the pump every ``tick_s`` seconds."""

    tick_s: float

    def capture(self) -> Captured | None:
        """What the microphone heard since the last call (None: the input is over)."""
        ...

    def room(self) -> int:
        """How many samples of reply audio the speaker can take now."""
        ...

    def play(self, audio: np.ndarray, response: int | None) -> None:
        """Queue reply audio (at the session's output rate) for the speaker; may be empty."""
        ...

    def played(self) -> list[Played]:
        """Reply samples really played since the last call, in order."""
        ...

    def pause(self) -> None:
        """Hold the speaker now (what it holds is kept): speech over the reply is being judged."""
        ...

    def resume(self) -> None:
        """Play on from where it was held."""
        ...

    def flush(self) -> None:
        """Drop what the speaker holds and play on (the reply was cut)."""
        ...


class UncontrolledSpeaker:
    """For a device whose speaker holds nothing the pipeline can hold or drop:
    pause, resume and flush have nothing to do (the session's own queue stops)."""

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def flush(self) -> None:
        pass
