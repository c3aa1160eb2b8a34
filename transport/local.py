"""The sound card as the pipeline's device (``shell/device.py``).

:class:`SoundCardDevice` wraps a :class:`~transport.sound.SoundCard`: every
10 ms the pump takes the microphone's audio, with what the speaker played
over the same span (lined up by the device's own timestamps: the echo
canceller's reference), tops up the device buffer and learns what the DAC
has played. Pause, resume and flush freeze, unfreeze and empty the device
buffer at once, so a barge-in silences the speaker within a device block.

A stream that stops (an xrun, a sound server that went away) is reopened in a
thread, never on the event loop (PortAudio can block for seconds there), up
to five times; a device that cannot be opened again is an
:class:`~transport.sound.AudioDeviceError` raised from :meth:`capture`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable

import numpy as np

from shell.device import Captured, Played
from transport.playback import PlaybackAccount
from transport.sound import AudioDeviceError, SoundCard

log = logging.getLogger(__name__)

MAX_RESTARTS = 5
STALL_S = 2.0  # a stream without a callback this long has stopped without saying so


class SoundCardDevice:
    tick_s = 0.01

    def __init__(self, card: SoundCard, on_first_audio: Callable[[], None] | None = None) -> None:
        """``on_first_audio`` is called once, when the microphone's first audio arrives: a
        stream can take a while to deliver after it starts (1.8 s on PulseAudio's virtual
        devices), and what is said before then is not heard."""
        self.card = card
        # The device buffer is the jitter buffer: the account only needs the order.
        self.account = PlaybackAccount(card.output_rate, lead_s=3600.0, acks=True)
        self.level_db: float | None = None  # the microphone's loudness lately, for a meter
        self._on_first_audio = on_first_audio
        self._restart: concurrent.futures.Future | asyncio.Future | None = None
        self._reason = ""
        self._started = False

    def capture(self) -> Captured | None:
        card = self.card
        if not self._started:
            card.start()
            self._started = True
        if self._restarting():
            return Captured(np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.float32))
        mic, far = card.captured()
        if len(mic):
            rms = float(np.sqrt(np.mean(mic**2)))
            self.level_db = 20 * np.log10(rms) if rms > 1e-6 else -120.0
            if self._on_first_audio is not None:
                self._on_first_audio()
                self._on_first_audio = None
        return Captured(mic, far)

    def room(self) -> int:
        return self.card.room()

    def play(self, audio: np.ndarray, response: int | None) -> None:
        if len(audio):
            self.account.sent_audio(audio, response, 0.0)
            self.card.play(audio)
        else:
            self.card.drain()

    def played(self) -> list[Played]:
        account = self.account
        played, dropped = self.card.played()
        # Resampling rounds: never report more than was sent, and once the
        # device has played all it was given, that is all that was sent.
        dropped = min(dropped, account.sent - account.played)
        played = account.sent - dropped if self.card.idle else min(played, account.sent - dropped)
        if played < account.played or dropped < account.dropped:
            return []
        return account.report(played, dropped)

    def pause(self) -> None:
        self.card.freeze(True)

    def resume(self) -> None:
        self.card.freeze(False)

    def flush(self) -> None:
        self.card.flush()
        self.card.freeze(False)

    def _restarting(self) -> bool:
        """Whether a reopen is running; starts one when a stream has stopped."""
        card = self.card
        if self._restart is not None:
            if not self._restart.done():
                return True
            error, self._restart = self._restart.exception(), None
            if isinstance(error, AudioDeviceError):
                raise AudioDeviceError(
                    f"{self._reason} and could not be opened again ({error}): check that it is plugged in and"
                    " its sound server is running (--list-devices shows what is there), then run again"
                ) from error
            if error is not None:
                raise error
        if not (card.failed or card.stalled(STALL_S)):
            return False
        self._reason = card.failed or "the audio device stopped responding"
        if card.restarts >= MAX_RESTARTS:
            raise AudioDeviceError(
                f"{self._reason}, {card.restarts} times: giving up (a loaded machine, or a failing device?)"
            )
        log.warning("%s: opening it again (%d of %d)", self._reason, card.restarts + 1, MAX_RESTARTS)
        # Bounded, but seconds: not on the loop. A stream stopped by an xrun opens again; an unplugged one does not.
        self._restart = asyncio.get_running_loop().run_in_executor(None, card.restart)
        return True
