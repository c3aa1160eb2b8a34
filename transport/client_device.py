"""A network client as the pipeline's device (``shell/device.py``).

Shared by every network transport whose client plays the reply itself and
may report what it played: our ``/ws`` protocol, the OpenAI Realtime
dialect, and the next ones (telephony, WebRTC).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from core.audio import ASR_BLOCK, ASR_RATE, BLOCK_S
from shell.device import Captured, Played, UncontrolledSpeaker
from transport.playback import PlaybackAccount
from transport.resample import Resampler


class ClientDevice(UncontrolledSpeaker):  # the client holds and drops its own buffer
    """A network client as the pipeline's device (``shell/device.py``).

    Its microphone is the audio the client sends, fed to the session at real
    time however it arrives (bursts are spread over the ticks they cover);
    its speaker is the client's player: reply audio is sent ``lead`` ahead of
    what the client reports played (or, without reports, of when it would
    have played what it was sent), and what it played is the echo
    canceller's reference. Pause, resume and flush reach the client as the
    protocol's events (``playback_paused``, ...), which it acts on itself.
    """

    tick_s = BLOCK_S

    def __init__(self, output_rate: int, lead_s: float, acks: bool, send: Callable[[np.ndarray, int | None], None]):
        self.account = PlaybackAccount(output_rate, lead_s, acks, keep_audio=True)
        self._send = send
        self._input = np.zeros(0, dtype=np.float32)  # 16 kHz, received and not yet fed
        self._input_start: float | None = None  # when the first audio arrived
        self._fed = 0  # blocks fed so far
        self._to_16k = Resampler(output_rate, ASR_RATE)  # what the client played: the echo reference
        self._far = np.zeros(0, dtype=np.float32)  # what the client played, at 16 kHz, not yet given
        self._reported: list[Played] = []

    @property
    def buffered_s(self) -> float:
        """Microphone audio received and not yet fed."""
        return len(self._input) / ASR_RATE

    def receive(self, samples: np.ndarray) -> None:
        """Microphone audio from the client, at 16 kHz."""
        if self._input_start is None:
            self._input_start = time.monotonic()
        self._input = np.concatenate([self._input, samples])

    def report(self, played: int, dropped: int) -> None:
        """The client's played report (totals); raises ReportError if it cannot be true."""
        self._reported += self.account.report(played, dropped)

    def capture(self) -> Captured:
        if self._input_start is None:
            return Captured(np.zeros(0, dtype=np.float32))
        due = int((time.monotonic() - self._input_start) / BLOCK_S) + 1
        n = min(due - self._fed, len(self._input) // ASR_BLOCK)
        if n <= 0:
            return Captured(np.zeros(0, dtype=np.float32))
        k = n * ASR_BLOCK
        mic, self._input = self._input[:k], self._input[k:]
        self._fed += n
        self._far = np.concatenate([self._far, self._to_16k(self.account.take_played_audio())])
        # Played reports come in bursts, not per block: a gap is silence then.
        far, self._far = self._far[:k], self._far[k:]
        return Captured(mic, np.pad(far, (0, k - len(far))))

    def room(self) -> int:
        return self.account.budget(time.monotonic())

    def play(self, audio: np.ndarray, response: int | None) -> None:
        if len(audio):
            self.account.sent_audio(audio, response, time.monotonic())
            self._send(audio, response)

    def played(self) -> list[Played]:
        if not self.account.acks:
            return self.account.estimate(time.monotonic())
        out, self._reported = self._reported, []
        return out
