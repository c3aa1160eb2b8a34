"""The local conversation: a :class:`~transport.sound.SoundCard` driving a session.

Every 10 ms, on the session's (real) clock: the microphone's audio goes into
the session in 20 ms blocks; what the DAC has played is reported to the
session (playback ledger, echo canceller's reference); reply audio tops up the
device buffer. The session's pause, resume and stop reach the device buffer at
once (frozen, unfrozen, flushed), so a barge-in silences the speaker within a
device block. Same shape as a network client's connection
(``transport/ws_server.py``), with the sound card as the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np

from transport.playback import RemotePlayback
from transport.sound import AudioDeviceError, SoundCard
from voice.core.audio import ASR_RATE
from voice.core.events import Event, PlaybackPaused, PlaybackResumed, PlaybackStopped
from voice.shell.session import Session

TICK_S = 0.01
BLOCK = round(0.02 * ASR_RATE)


class LocalAudio:
    """Glue between one session and the sound card; feed :meth:`event` every session event."""

    def __init__(self, session: Session, card: SoundCard) -> None:
        self.session = session
        self.card = card
        # The device buffer is the jitter buffer; the ledger only needs the order.
        self.playback = RemotePlayback(session.output_rate, lead_s=3600.0, acks=True)
        self._mic = np.zeros(0, dtype=np.float32)
        self._far = np.zeros(0, dtype=np.float32)
        self.level_db: float | None = None

    def event(self, e: Event) -> None:
        match e:
            case PlaybackPaused():
                self.card.freeze(True)
            case PlaybackResumed():
                self.card.freeze(False)
            case PlaybackStopped():
                self.card.flush()
                self.card.freeze(False)

    async def run(self, stop: asyncio.Event, hearing: Callable[[], None] | None = None) -> None:
        """Until ``stop`` is set; raises AudioDeviceError if the device fails.

        ``hearing`` is called once, when the microphone's first audio arrives: a
        stream can take a while to deliver after it starts (1.8 s on PulseAudio's
        virtual devices), and what is said before then is not heard.
        """
        session, card, playback = self.session, self.card, self.playback
        card.start()
        tick = 0
        while not stop.is_set():
            tick += 1
            await session.clock.sleep_until(tick * TICK_S)
            if card.failed or card.stalled(2.0):
                reason = card.failed or "the audio device stopped responding"
                if card.restarts >= 5:
                    raise AudioDeviceError(
                        f"{reason}, {card.restarts} times: giving up (a loaded machine, or a failing device?)"
                    )
                try:  # a stream stopped by an xrun opens again; a device unplugged does not
                    await asyncio.to_thread(card.restart)  # bounded, but seconds: not on the loop
                except AudioDeviceError as e:
                    raise AudioDeviceError(
                        f"{reason} and could not be opened again ({e}): check that it is plugged in and"
                        " its sound server is running (--list-devices shows what is there), then run again"
                    ) from e
            mic, far = card.captured()
            if hearing is not None and len(mic):
                hearing()
                hearing = None
            self._mic, self._far = np.concatenate([self._mic, mic]), np.concatenate([self._far, far])
            while len(self._mic) >= BLOCK:
                block, self._mic = self._mic[:BLOCK], self._mic[BLOCK:]
                echo, self._far = self._far[:BLOCK], self._far[BLOCK:]
                rms = float(np.sqrt(np.mean(block**2)))
                self.level_db = 20 * np.log10(rms) if rms > 1e-6 else -120.0
                session.push_audio(block, far=echo)
            played, dropped = card.played()
            # Resampling rounds: never report more than was sent, and once the
            # device has played all it was given, that is all that was sent.
            dropped = min(dropped, playback.sent - playback.played)
            played = playback.sent - dropped if card.idle else min(played, playback.sent - dropped)
            if played >= playback.played and dropped >= playback.dropped:
                for audio, response in playback.report(played, dropped):
                    session.audio_played(audio, response)
            room = card.room()
            if room > 0:
                audio, response = session.take_audio(room)
                if len(audio):
                    playback.sent_audio(audio, response, session.clock.now())
                    card.play(audio)
                else:
                    card.drain()
