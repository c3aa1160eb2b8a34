"""The conversation's recording (shell/recording.py): the person left, the assistant as heard right, on one timeline."""

from __future__ import annotations

import numpy as np
import soundfile as sf
import soxr
from stand_in_engines import OUTPUT_RATE, StandInEngines, StandInLLM, StandInRecognizer, silence, tone

from core.audio import ASR_BLOCK, ASR_RATE
from shell.clock import VirtualClock
from shell.config import SessionConfig
from shell.device import Captured, Played
from shell.recording import RecordingDevice
from shell.session import Session
from transport.replay import replay


async def test_a_replay_recording_holds_the_input_left_and_reply_wav_right(tmp_path):
    engines = StandInEngines(StandInRecognizer({300: "what time is it"}), StandInLLM(["It is noon, as it was."]))
    session = Session(engines, VirtualClock(), SessionConfig(echo_cancel=False, end_of_turn=None), lockstep=True)
    audio = np.concatenate([silence(0.5), tone(1.2), silence(0.3)])
    result = await replay(session, audio, settle=True, record=True)
    await session.aclose()
    assert result.recording is not None
    both = result.recording.stereo()
    n = len(both)
    assert np.array_equal(both[:, 1], result.reply[:n]) and not result.reply[n:].any()
    assert np.abs(result.reply).max() > 0.1
    assert np.array_equal(both[:, 0], soxr.resample(np.pad(audio, (0, n * 2 // 3 - len(audio))), ASR_RATE, OUTPUT_RATE))
    path = result.recording.save(tmp_path, "replay")
    again = result.recording.save(tmp_path, "replay")
    assert (path.name, again.name) == ("replay.wav", "replay-2.wav")
    read, rate = sf.read(path, dtype="float32")
    assert rate == OUTPUT_RATE and read.shape == both.shape


class Client:
    """A remote speaker: it buffers what it is given, and plays ``plays`` samples a tick."""

    tick_s = 0.02

    def __init__(self, plays: int) -> None:
        self.plays = plays
        self.queue: list[tuple[int | None, int]] = []
        self.reports: list[Played] = []

    def capture(self) -> Captured:
        return Captured(np.full(ASR_BLOCK, 0.1, dtype=np.float32))

    def room(self) -> int:
        return 10_000

    def play(self, audio, response):
        if len(audio):
            self.queue.append((response, len(audio)))

    def played(self) -> list[Played]:
        out, left = [], self.plays
        while self.queue and left:
            response, n = self.queue[0]
            k = min(n, left)
            out.append(Played(response, k))
            left -= k
            self.queue[0] = (response, n - k)
            if not self.queue[0][1]:
                self.queue.pop(0)
        return out

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def flush(self) -> None:
        self.queue.clear()


def test_audio_flushed_from_a_clients_buffer_is_not_in_the_recording():
    device = RecordingDevice(Client(plays=100), output_rate=16000)
    device.capture()
    device.play(np.full(300, 0.5, dtype=np.float32), 1)  # given at sample 320
    device.played()  # 100 of them played
    device.flush()  # the reply was cut: the other 200 never were
    device.capture()
    device.play(np.full(50, 0.25, dtype=np.float32), 2)  # the next reply, given at sample 640
    device.played()
    right = device.recording.assistant()
    assert np.array_equal(np.flatnonzero(right == 0.5), np.arange(320, 420))
    assert np.array_equal(np.flatnonzero(right == 0.25), np.arange(640, 690))
    left = device.recording.stereo()[:, 0]
    assert len(left) == len(right) == 690 and (left[:640] == np.float32(0.1)).all() and not left[640:].any()
