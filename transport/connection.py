"""One client's connection: its dialect, its session and the loops that drive them.

For each client the server makes a :class:`Connection` that carries out what
its dialect (``transport/dialect.py``) asks: it feeds the microphone to a
:class:`~shell.session.Session` at real time (resampled to 16 kHz here,
at this transport's edge, once), paces the reply audio to the client's
playback (:class:`~transport.client_device.ClientDevice`) and sends the
pipeline's events through its :class:`~transport.outbox.Outbox`. A client's
message that fails to be handled is said once in the log; the session goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from core.audio import ASR_RATE
from core.events import Event
from core.history import History
from core.language import LanguageConfig
from shell.clock import MonotonicClock
from shell.config import SessionConfig
from shell.pump import Pump
from shell.recording import RecordingDevice
from shell.session import Session
from transport.client_device import ClientDevice
from transport.dialect import Dialect
from transport.outbox import Outbox
from transport.playback import ReportError
from transport.protocol import (
    Action,
    AudioIn,
    CancelReply,
    Close,
    Configure,
    KeyPressed,
    Limits,
    PlayedReport,
    Send,
    ToolOutput,
    TruncateReply,
    UserText,
)
from transport.resample import Resampler, resampler
from transport.server_types import ServedAgent, Server, ServerConfig
from transport.twilio_calls import TwilioCall
from transport.wire import quote

log = logging.getLogger("voice.server")


@dataclass(frozen=True)
class ClosedSession:
    """What ``VoiceServer.closed`` (transport/ws_server.py) keeps of a session whose connection ended:
    its record, not its state."""

    id: str
    history: History | None  # the conversation (None: the client never said hello)
    events: list[Event]  # every pipeline event of the session
    errors: list[str]  # the pipeline's errors
    close_code: int | None
    # How late the session's audio ticks ran (the session behind real time), worst and p99.
    lateness_max_s: float = 0.0
    lateness_p99_s: float = 0.0


class Connection:
    """One client: its protocol state, its session and the loops that drive them."""

    def __init__(
        self, server: Server, ws: ServerConnection | Any, session_id: str, dialect: Dialect, peer: Any = None
    ) -> None:
        """``ws``: the client's WebSocket, or a WebRTC peer's data channel (``peer``, whose RTP is its audio)."""
        self.server = server
        self.ws = ws
        self.peer = peer
        self.id = session_id
        self.dialect = dialect
        self.limits: Limits = server.config.limits
        self.session: Session | None = None
        self.device: ClientDevice | None = None
        self.pump: Pump | None = None  # drives the session once it has started
        self.recorder: Any = None  # persists the turns (None: in memory only)
        self.recorded: RecordingDevice | None = None  # the device as --record keeps it
        self._store_warned = False
        self.clock = MonotonicClock()
        self.events: list[Event] = []  # every pipeline event of this session
        self.close_code: int | None = None
        self.failures = 0  # client messages whose handling raised (logged once)
        self._to_16k: Resampler | None = None  # the client's audio to 16 kHz: this transport's edge
        self._input_rate = ASR_RATE  # the client's audio's rate (Configure.input_rate)
        self._last_rx = time.monotonic()
        self._last_too_fast = -1.0
        self.outbox = Outbox(ws, self.limits, self._last_words, self._begin_closing)
        self._closing = False
        self._close_code: int | None = None  # what we closed with, once we began to
        self._ended_by_tool = False
        self._tasks: list[asyncio.Task] = []

    @property
    def history(self):
        return self.session.history if self.session is not None else None

    async def run(self) -> None:
        self._tasks.append(asyncio.create_task(self.outbox.run(), name=f"send-{self.id[:8]}"))
        self._tasks.append(asyncio.create_task(self._watchdog(), name=f"watch-{self.id[:8]}"))
        try:
            await self._apply(self.dialect.start())
            async for message in self.ws:
                self._last_rx = time.monotonic()
                try:
                    if isinstance(message, str):
                        actions = self.dialect.receive_text(message)
                    else:
                        actions = self.dialect.receive_binary(message)
                    await self._apply(actions)
                except ConnectionClosed:
                    raise
                except Exception:  # a bug, not the client's fault: said once, and the session goes on
                    self._message_failed()
                if self._closing:
                    break
        except ConnectionClosed:
            pass  # the client went away: its session ends here, finalized turns kept
        finally:
            # (a close of ours may still be under way: its code is the one that counts)
            self.close_code = self.ws.close_code if self.ws.close_code is not None else self._close_code
            if self.failures > 1:
                log.warning("session %s: %d client messages could not be handled", self.id, self.failures)
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if self.session is not None:
                await self.session.aclose()
            if self.recorder is not None:  # the last turns are committed before the session counts as closed
                await asyncio.to_thread(self.recorder.flush)
            if self.recorded is not None:
                await keep_recording(self.recorded, self.server.config.record_dir, self.id, self.recorder)

    def _message_failed(self) -> None:
        self.failures += 1
        if self.failures == 1:
            log.exception("session %s: a client message could not be handled; the session goes on", self.id)
        self._send_error("internal", "this message could not be handled; the session goes on")

    def release(self) -> ClosedSession:
        """Once :meth:`run` has returned: the session's record, and let go of everything else now.

        The session's state (its echo canceller, VAD streams, audio buffers and
        playout), the device with its resamplers, the protocol's state, the
        socket and what it buffered, the finished tasks: the references between
        them and this connection are cycles, which would otherwise wait for a
        full garbage collection (rare in a process this size) to be freed.
        """
        session = self.session
        record = ClosedSession(
            self.id,
            session.history if session is not None else None,
            self.events,
            list(session.errors) if session is not None else [],
            1008 if self.outbox.cut_off else self.close_code,  # (a cut-off client's close may still be under way)
            self.pump.stats.lateness_max_s if self.pump is not None else 0.0,
            self.pump.stats.lateness_p99_s if self.pump is not None else 0.0,
        )
        self.session = self.device = self.recorder = self._to_16k = self.pump = self.recorded = None
        self.dialect = self.peer = None
        self.outbox.clear()
        self._tasks.clear()
        return record

    # -- carrying out the protocol's actions ------------------------------------

    async def _apply(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self._send(action.message)
            elif isinstance(action, AudioIn):
                self._receive_audio(action.samples)
            elif isinstance(action, PlayedReport):
                self._played(action)
            elif isinstance(action, Configure):
                await self._configure(action)
            elif isinstance(action, CancelReply):
                if self.session is not None:
                    self.session.cancel_response()
            elif isinstance(action, TruncateReply):
                if self.session is not None:
                    text = self.session.truncate_response(action.response, action.audio_end_ms)
                    self._apply_now(self.dialect.truncated(action, text))
            elif isinstance(action, ToolOutput):
                if self.session is None or not self.session.client_tool_output(action.call_id, action.output):
                    said = f"no call {quote(action.call_id)} of the client's tools is waiting for its output"
                    self._send_error("unknown_call", said)
            elif isinstance(action, UserText | KeyPressed):
                if self.session is None:
                    self._send_error("not_ready", "the session is not configured yet")
                elif isinstance(action, KeyPressed):
                    self.session.key_pressed(action.key)
                else:
                    self.session.user_text(action.text)
            elif isinstance(action, Close):
                await self._close(action.code, action.reason)

    def _apply_now(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self._send(action.message)
            elif isinstance(action, PlayedReport):  # a dialect that knows what was played (Twilio's marks)
                self._played(action)

    async def _configure(self, cfg: Configure) -> None:
        if self.session is not None:  # a later session.update: what may change mid-session
            if cfg.instructions is not None:
                self.session.conversation.system_prompt = cfg.instructions
            if cfg.tools is not None:
                self.session.set_client_tools(list(cfg.tools))
            if cfg.input_rate != self._input_rate:  # Realtime's audio/pcmu: 8 kHz from now on
                self._set_input_rate(cfg.input_rate)
            if cfg.language is not None:  # Realtime's transcription language: the next utterances'
                self.session.conversation.language.hold(cfg.language)
            if cfg.denoise is not None:  # Realtime's noise_reduction: from the next block on
                self.session.set_denoise(cfg.denoise)
            return
        agent, unknown = chosen_agent(self.server.config, cfg.agent)
        if unknown is not None:  # the session goes on with the default
            self._send_error("unknown_agent", unknown)
        session_cfg = client_session_config(self.server.config, cfg, webrtc=self.peer is not None)
        if agent is not None:
            session_cfg = dataclasses.replace(session_cfg, flow=agent.flow)
        history = None
        conversations = self.server.conversations
        if conversations is None:
            if cfg.resume is not None:
                self._send_error(
                    "unknown_session", "this server keeps no conversations (no --db): a new one is started"
                )
        else:
            # Reading a stored conversation is disk I/O: not on the loop, where other sessions' audio runs.
            opened = await asyncio.to_thread(
                conversations.open,
                cfg.resume,
                session_cfg.system_prompt,
                self.server.config.token,
                in_use=set(self.server.connections),
                meta=cfg.meta,
            )
            for code, message in opened.notices:
                self._send_error(code, message)
            if opened.store_error is not None:
                log.error("session %s: %s", self.id, opened.store_error)
            if opened.session_id is not None:
                self.server.rekey(self, opened.session_id)
            history, self.recorder = opened.history, opened.recorder
        self.clock = MonotonicClock()  # restarted at the first audio (the pump): the session's timeline
        tools = agent.tools if agent is not None else self.server.config.tools
        engines, on_event, calls = self.server.engines, self._on_event, TwilioCall.of(cfg.meta)  # (transfers)
        self.session = Session(engines, self.clock, session_cfg, on_event, history, tools=tools, calls=calls)
        if cfg.tools:
            self.session.set_client_tools(list(cfg.tools))
        self._apply_now(self.dialect.ready(self.id, self.session.history.to_json()))
        if self.peer is not None:
            self.device = self.peer.device()
        else:
            self.device = ClientDevice(self.session.output_rate, cfg.lead_s, cfg.acks, self._send_audio)
        self._set_input_rate(cfg.input_rate)
        if self.server.config.record_dir is not None:
            self.recorded = RecordingDevice(self.device, self.session.output_rate)
        self.pump = Pump(self.session, self.recorded or self.device)
        self._tasks.append(asyncio.create_task(self.pump.run(), name=f"audio-{self.id[:8]}"))

    def _set_input_rate(self, rate: int) -> None:
        self._input_rate = rate
        self._to_16k = resampler(rate, ASR_RATE)

    def _send_audio(self, audio: np.ndarray, response: int | None) -> None:
        self._apply_now(self.dialect.audio(audio, response))

    def _on_event(self, event: Event) -> None:
        self.events.append(event)
        recorder = self.recorder
        if recorder is not None and recorder.error is not None and not self._store_warned:
            self._store_warned = True  # once: the recorder retries, and says when it catches up in the log
            self._send_error("store_unavailable", "the conversation is not being saved now; it goes on in memory")
        for sink in (self.server.on_event,):
            if sink is not None:
                sink(self.id, event)
        if self.server.metrics is not None:
            self.server.metrics.observe(event, self)
        self._apply_now(self.dialect.event(event))

    def _receive_audio(self, samples: np.ndarray) -> None:
        if self.device is None:
            return
        if self._to_16k is not None:
            samples = self._to_16k(samples)
        room = round(self.limits.max_ahead_s * ASR_RATE) - round(self.device.buffered_s * ASR_RATE)
        if len(samples) > room:
            now = time.monotonic()
            if now - self._last_too_fast >= 1.0:  # one error a second, not one a frame
                self._last_too_fast = now
                excess = (len(samples) - max(room, 0)) / ASR_RATE
                msg = f"audio is {self.limits.max_ahead_s:g} s ahead of real time; {excess:.2f} s dropped"
                self._send_error("input_too_fast", msg)
            samples = samples[: max(room, 0)]
        self.device.receive(samples)

    def _played(self, report: PlayedReport) -> None:
        if self.device is None:
            return
        if not self.device.account.acks:
            self._send_error("not_ready", "'played' reports need 'acks': true in 'hello'")
            return
        try:
            self.device.report(report.played, report.dropped)
        except ReportError as e:
            self._send_error("invalid_message", str(e))

    async def _watchdog(self) -> None:
        """Close a session whose client reads nothing, or says nothing, for too long."""
        while not self._closing:
            await asyncio.sleep(0.25)
            self._check_health()

    def _check_health(self) -> None:
        session = self.session
        if session is not None and session.ended.is_set() and not self._ended_by_tool:
            self._ended_by_tool = True  # a tool ended the conversation; its goodbye has been played
            self._tasks.append(asyncio.create_task(self._close(1000, "conversation ended")))
        elif self.outbox.stalled(time.monotonic()):
            self.outbox.cut_off_now(f"the client read nothing for {self.limits.slow_client_s:g} s")
        elif time.monotonic() - self._last_heard() > self.limits.idle_timeout_s:
            self._fatal(1000, "idle_timeout", f"nothing received for {self.limits.idle_timeout_s:g} s")

    def _last_heard(self) -> float:
        """When the client was last heard from: a message, or (WebRTC) its microphone's RTP."""
        return max(self._last_rx, self.peer.microphone.last_audio) if self.peer is not None else self._last_rx

    def _fatal(self, code: int, kind: str, message: str) -> None:
        self._send_error(kind, message, fatal=True)
        self._tasks.append(asyncio.create_task(self._close(code, kind)))

    async def _close(self, code: int, reason: str) -> None:
        self._closing = True
        self._close_code = code
        deadline = time.monotonic() + 1.0  # let the last messages (the error) out first
        while self.outbox.messages and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await self.ws.close(code, reason)

    # -- sending ------------------------------------------------------------------

    def _send_error(self, code: str, message: str, fatal: bool = False) -> None:
        self._apply_now(self.dialect.error(code, message, fatal, round(self.clock.now(), 4)))

    def _send(self, message: str | bytes) -> None:
        self.outbox.put(message)

    def _last_words(self, why: str) -> list[str | bytes]:
        """The dialect's fatal ``slow_client`` error, as the messages a cut-off client is sent last."""
        actions = self.dialect.error("slow_client", why, True, round(self.clock.now(), 4))
        return [a.message for a in actions if isinstance(a, Send)]

    def _begin_closing(self) -> None:
        self._closing = True


async def keep_recording(recorded: RecordingDevice, folder: Path | None, session_id: str, recorder: Any) -> None:
    """--record: the conversation's stereo file, named by its session, and its name kept with it (``recorder``:
    the session's turns' recorder; None: the conversation is not stored)."""
    assert folder is not None
    try:
        path = await asyncio.to_thread(recorded.recording.save, folder, session_id)
    except OSError as e:
        log.error("session %s: the recording could not be written: %s", session_id, e)
        return
    if recorder is not None:
        await asyncio.to_thread(recorder.keep_recording, str(path.resolve()))


def chosen_agent(server: ServerConfig, name: str | None) -> tuple[ServedAgent | None, str | None]:
    """The agent a client chose by ``name`` (None: the server's default, the session's own config),
    or None and what to tell the client where the server has none by that name."""
    if name is None or name in server.agents:
        return (server.agents[name] if name is not None else None), None
    known = ", ".join(map(quote, server.agents)) or "none (--agent NAME=FILE names them)"
    return None, f"no agent named {quote(name)} here (this server's: {known}): the default"


def client_session_config(server: ServerConfig, cfg: Configure, webrtc: bool) -> SessionConfig:
    """The server's session configuration with what the client asked for at the start."""
    session_cfg = server.session
    # WebRTC: the browser cancels the echo, with the speaker's real signal (which the server never sees).
    echo_cancel = session_cfg.echo_cancel and cfg.echo_cancel and not webrtc
    session_cfg = dataclasses.replace(session_cfg, echo_cancel=echo_cancel)
    if cfg.instructions is not None:
        session_cfg = dataclasses.replace(session_cfg, system_prompt=cfg.instructions)
    if cfg.language is not None:  # the client's word on what its person speaks
        session_cfg = dataclasses.replace(session_cfg, language=LanguageConfig(language=cfg.language))
    if cfg.denoise is not None:
        session_cfg = dataclasses.replace(session_cfg, denoise=cfg.denoise)
    if cfg.call:
        session_cfg = dataclasses.replace(session_cfg, call=server.call)
    return session_cfg
