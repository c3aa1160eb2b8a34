"""The sound card reopened after its stream stopped (``transport/sound.py``, ``transport/local.py``).

PortAudio is replaced by a stand-in ``sounddevice`` module (``StandInSoundDevice``,
for this logic only): the test calls the output stream's callback itself, as
PortAudio's thread would, so what reaches the "DAC" is exact.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from transport.local import SoundCardDevice
from transport.sound import DeviceChoice, SoundCard

RATE = 48000  # the device's
OUTPUT_RATE = 22050  # piper's


class StandInStream:
    latency = 0.02

    def __init__(self, callback, **_: object) -> None:
        self.callback = callback
        self.closed = False

    def start(self) -> None: ...

    def abort(self) -> None: ...

    def close(self) -> None:
        self.closed = True


class StandInSoundDevice(SimpleNamespace):
    """The few names of ``sounddevice`` that SoundCard uses: a stand-in, not PortAudio."""

    class PortAudioError(Exception): ...

    def __init__(self) -> None:
        super().__init__(InputStream=StandInStream, OutputStream=StandInStream, _exit_handler=lambda: None)

    @staticmethod
    def query_devices(device=None, kind=None) -> dict:
        return {"name": "stand-in", "default_samplerate": RATE}


@pytest.fixture
def card(monkeypatch) -> SoundCard:
    monkeypatch.setitem(sys.modules, "sounddevice", StandInSoundDevice())
    return SoundCard(DeviceChoice(), OUTPUT_RATE, lead_s=10.0)


def run_speaker(card: SoundCard, blocks: int, at: list[float]) -> None:
    """``blocks`` output callbacks of the current stream, each block at the DAC as it is written."""
    _, speaker = card._streams
    frames = card.block
    for _ in range(blocks):
        out = np.zeros((frames, 1), dtype=np.float32)
        when = SimpleNamespace(currentTime=at[0], outputBufferDacTime=at[0])
        speaker.callback(out, frames, when, SimpleNamespace(output_underflow=False))
        at[0] += frames / RATE


def test_a_reply_that_was_playing_when_the_stream_stopped_is_played_to_its_end_after_the_reopen(card):
    device = SoundCardDevice(card)
    reply = np.full(OUTPUT_RATE // 2, 0.1, dtype=np.float32)  # 0.5 s
    device.play(reply, 7)
    clock, played = [0.0], []
    run_speaker(card, 20, clock)  # 0.2 s reaches the DAC, then the stream stops
    played += device.played()
    old = card._streams
    card.restart()
    assert card._streams is not old and all(s.closed for s in old)
    run_speaker(card, 40, clock)  # the new stream plays the rest
    played += device.played()
    device.play(np.zeros(0, dtype=np.float32), 7)  # no more: the resampler lets out its last samples
    run_speaker(card, 10, clock)
    played += device.played()
    assert card.idle and card.dropped_device == 0
    # All of it: the reply can end (none counted as dropped, which would leave it waiting for ever).
    assert sum(p.samples for p in played if p.response == 7) == len(reply)
