"""The WebSocket server: one pipeline per connection, the engines shared.

Serves, on one port: the browser page (``GET /``), our protocol (``/ws``),
the OpenAI Realtime dialect (``/v1/realtime``) and ``GET /health``. The
protocols themselves are pure (``transport/protocol.py``,
``transport/realtime.py``); this module is the I/O around them: the handshake
checks (token, Origin, session cap), and for each connection a
:class:`Connection` that feeds the microphone to a :class:`~voice.shell.session.Session`
at real time, paces the reply audio to the client's playback and sends the
pipeline's events. A connection's failure is caught and logged in its own
task; no other session sees it. See ``docs/protocol.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import ipaddress
import logging
import mimetypes
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
import soxr
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from transport.playback import RemotePlayback, ReportError
from transport.protocol import (
    Action,
    AudioIn,
    CancelReply,
    Close,
    Configure,
    Limits,
    PlayedReport,
    Send,
    TruncateReply,
    VoiceProtocol,
)
from voice.app.metrics import PipelineMetrics
from voice.app.store import ConversationStore, ForeignSession, StoreError, TurnRecorder, UnknownSession, open_history
from voice.core.audio import ASR_RATE
from voice.core.history import History
from voice.shell.clock import MonotonicClock
from voice.shell.engines import Engines
from voice.shell.session import Session, SessionConfig

log = logging.getLogger("voice.server")

WEB_ROOT = Path(__file__).parent / "web"
TICK_S = 0.02  # the connection's audio loop: input blocks in, reply frames out
BLOCK = round(TICK_S * ASR_RATE)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8765  # 0: any free port (see VoiceServer.port)
    token: str | None = None  # required on connect when set; must be set off loopback
    allow_origins: tuple[str, ...] = ()  # browser origins besides the server's own
    max_sessions: int = 8
    limits: Limits = field(default_factory=Limits)
    session: SessionConfig = field(default_factory=SessionConfig)

    def check(self) -> None:
        if not is_loopback(self.host) and not self.token:
            raise ValueError(
                f"binding to {self.host} exposes the assistant to the network: "
                "give a token (--token or VOICE_TOKEN) that clients must send"
            )


EventHook = Callable[[str, dict[str, Any]], None]  # (session id, pipeline event), for logs and tests


class VoiceServer:
    def __init__(
        self,
        engines: Engines,
        config: ServerConfig | None = None,
        metrics: PipelineMetrics | None = None,
        on_event: EventHook | None = None,
        store: ConversationStore | None = None,
    ) -> None:
        """``store``: where finalized turns are kept and resumed from (None: in memory only)."""
        self.engines = engines
        self.store = store
        self.config = config or ServerConfig()
        self.config.check()
        self.metrics = metrics
        self.on_event = on_event
        self.connections: dict[str, Connection] = {}
        # Recently closed sessions, for inspection (and tests): id -> connection.
        self.closed: dict[str, Connection] = {}
        self._server: Server | None = None
        self.port = self.config.port

    async def start(self) -> None:
        cfg = self.config
        self._server = await serve(
            self._handle,
            cfg.host,
            cfg.port,
            process_request=self._process_request,
            max_size=cfg.limits.max_message_bytes,
            compression=None,  # PCM does not deflate; the CPU has better things to do
            ping_interval=20,
            ping_timeout=20,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("serving on http://%s:%d", cfg.host, self.port)

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()  # closes every connection with 1001 (going away)
            await self._server.wait_closed()

    # -- the HTTP side of the handshake -------------------------------------

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        url = urlsplit(request.path)
        if url.path in ("/ws", "/v1/realtime"):
            return self._check_access(connection, request, url.query)
        if url.path == "/health":
            return connection.respond(200, "ok\n")
        return self._static(connection, url.path)

    def _check_access(self, connection: ServerConnection, request: Request, query: str) -> Response | None:
        cfg = self.config
        if cfg.token:
            given = parse_qs(query).get("token", [""])[0]
            auth = request.headers.get("Authorization", "")
            if auth.lower().startswith("bearer "):
                given = given or auth[7:].strip()
            if not hmac.compare_digest(given.encode(), cfg.token.encode()):
                return connection.respond(401, "a valid token is required (Authorization: Bearer, or ?token=)\n")
        origin = request.headers.get("Origin")
        if origin is not None and not self._origin_allowed(origin, request.headers.get("Host", "")):
            return connection.respond(403, f"origin {origin} is not allowed\n")
        if len(self.connections) >= cfg.max_sessions:
            return connection.respond(503, f"the server is at its limit of {cfg.max_sessions} sessions\n")
        return None

    def _origin_allowed(self, origin: str, host: str) -> bool:
        if origin in self.config.allow_origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc == host  # the page this server served

    def _static(self, connection: ServerConnection, path: str) -> Response:
        name = "index.html" if path in ("", "/") else path.lstrip("/")
        file = (WEB_ROOT / name).resolve()
        if WEB_ROOT.resolve() not in file.parents or not file.is_file():
            return connection.respond(404, "not found\n")
        body = file.read_bytes()
        kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind.endswith("javascript"):
            kind += "; charset=utf-8"
        headers = Headers([("Content-Type", kind), ("Content-Length", str(len(body))), ("Cache-Control", "no-cache")])
        return Response(200, "OK", headers, body)

    # -- connections -------------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        path = urlsplit(ws.request.path).path if ws.request else "/ws"
        if len(self.connections) >= self.config.max_sessions:  # two handshakes raced past the check
            await ws.close(1013, "too many sessions, try again later")
            return
        session_id = uuid.uuid4().hex
        if path == "/v1/realtime":
            from transport.realtime import RealtimeProtocol

            resume = parse_qs(urlsplit(ws.request.path).query).get("session", [None])[0] if ws.request else None
            dialect: Any = RealtimeProtocol(session_id, self.engines.output_rate, self.config.limits, resume)
        else:
            dialect = VoiceProtocol(session_id, self.engines.output_rate, self.config.limits)
        conn = Connection(self, ws, session_id, dialect)
        self.connections[session_id] = conn
        if self.metrics is not None:
            self.metrics.session_opened(conn)  # keyed by the connection: its id changes on resume
        try:
            await conn.run()
        except Exception:  # this session only: log it, close it, serve the others
            log.exception("session %s failed", session_id)
            with contextlib.suppress(Exception):
                await ws.close(1011, "internal error")
        finally:
            self.connections.pop(conn.id, None)
            self.closed[conn.id] = conn
            while len(self.closed) > 32:
                self.closed.pop(next(iter(self.closed)))
            if self.metrics is not None:
                self.metrics.session_closed(conn)

    def rekey(self, conn: Connection, session_id: str) -> None:
        """The connection goes on with a stored conversation: it is known by that id from now on."""
        self.connections.pop(conn.id, None)
        conn.id = session_id
        self.connections[session_id] = conn


class Connection:
    """One client: its protocol state, its session and the loops that drive them."""

    def __init__(self, server: VoiceServer, ws: ServerConnection, session_id: str, dialect: Any) -> None:
        self.server = server
        self.ws = ws
        self.id = session_id
        self.dialect = dialect
        self.limits: Limits = server.config.limits
        self.session: Session | None = None
        self.recorder: TurnRecorder | None = None  # persists the turns (None: in memory only)
        self._store_warned = False
        self.playback: RemotePlayback | None = None
        self.clock = MonotonicClock()
        self.events: list[dict[str, Any]] = []  # every pipeline event of this session
        self.close_code: int | None = None
        self._to_16k: soxr.ResampleStream | None = None
        self._input = np.zeros(0, dtype=np.float32)  # 16 kHz, received and not yet fed
        self._fed_blocks = 0
        self._input_start: float | None = None  # when the first audio arrived
        self._last_rx = time.monotonic()
        self._last_too_fast = -1.0
        self._outbox: deque[tuple[float, str | bytes]] = deque()
        self._outbox_ready = asyncio.Event()
        self._closing = False
        self._tasks: list[asyncio.Task] = []

    @property
    def history(self):
        return self.session.history if self.session is not None else None

    async def run(self) -> None:
        self._tasks.append(asyncio.create_task(self._sender(), name=f"send-{self.id[:8]}"))
        self._tasks.append(asyncio.create_task(self._watchdog(), name=f"watch-{self.id[:8]}"))
        try:
            await self._apply(self.dialect.start())
            async for message in self.ws:
                self._last_rx = time.monotonic()
                if isinstance(message, str):
                    actions = self.dialect.receive_text(message)
                else:
                    actions = self.dialect.receive_binary(message)
                await self._apply(actions)
                if self._closing:
                    break
        except ConnectionClosed:
            pass  # the client went away: its session ends here, finalized turns kept
        finally:
            self.close_code = self.ws.close_code
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if self.session is not None:
                await self.session.aclose()
            if self.recorder is not None:  # the last turns are committed before the session counts as closed
                await asyncio.to_thread(self.recorder.flush)

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
                self._configure(action)
            elif isinstance(action, CancelReply):
                if self.session is not None:
                    self.session.cancel_response()
            elif isinstance(action, TruncateReply):
                if self.session is not None:
                    text = self.session.truncate_response(action.response, action.audio_end_ms)
                    self._apply_now(self.dialect.truncated(action, text))
            elif isinstance(action, Close):
                await self._close(action.code, action.reason)

    def _apply_now(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self._send(action.message)

    def _open_history(self, cfg: Configure, system_prompt: str) -> History | None:
        """The stored conversation to go on with, or a new stored one; None: in memory only.

        A session id that is unknown, another token's, or open in another
        connection gets an error and a new conversation; a failing store gets
        an error and the conversation is kept in memory.
        """
        store = self.server.store
        resume = cfg.resume
        if store is None:
            if resume is not None:
                self._send_error(
                    "unknown_session", "this server keeps no conversations (no --db): a new one is started"
                )
            return None
        if resume is not None and resume in self.server.connections:
            self._send_error("session_in_use", f"conversation {resume[:12]} is open in another connection")
            resume = None
        owner = self.server.config.token
        try:
            try:
                session_id, history, self.recorder = open_history(store, resume, owner, system_prompt)
            except (UnknownSession, ForeignSession) as e:
                code = "unknown_session" if isinstance(e, UnknownSession) else "foreign_session"
                self._send_error(code, f"no conversation {str(resume)[:12]} for this client: a new one is started")
                session_id, history, self.recorder = open_history(store, None, owner, system_prompt)
        except StoreError as e:
            log.error("session %s: %s", self.id, e)
            self._send_error("store_unavailable", "conversations cannot be saved now; this one is kept in memory")
            return None
        self.server.rekey(self, session_id)
        return history

    def _configure(self, cfg: Configure) -> None:
        if self.session is not None:  # a later session.update: what may change mid-session
            if cfg.instructions is not None:
                self.session.conversation.system_prompt = cfg.instructions
            return
        session_cfg = self.server.config.session
        session_cfg = dataclasses.replace(session_cfg, echo_cancel=session_cfg.echo_cancel and cfg.echo_cancel)
        if cfg.instructions is not None:
            session_cfg = dataclasses.replace(session_cfg, system_prompt=cfg.instructions)
        history = self._open_history(cfg, session_cfg.system_prompt)
        self.clock = MonotonicClock()
        self.session = Session(
            self.server.engines, self.clock, session_cfg, self._on_event, history, reports_playback=True
        )
        self._apply_now(self.dialect.ready(self.id, self.session.history.to_json()))
        self.playback = RemotePlayback(self.session.output_rate, cfg.lead_s, cfg.acks)
        self._to_16k = None if cfg.input_rate == ASR_RATE else soxr.ResampleStream(cfg.input_rate, ASR_RATE, 1)
        self._tasks.append(asyncio.create_task(self._audio_loop(), name=f"audio-{self.id[:8]}"))

    def _on_event(self, event: dict[str, Any]) -> None:
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
        if self._to_16k is not None:
            samples = self._to_16k.resample_chunk(samples.astype(np.float32))
        if self._input_start is None:
            self._input_start = self.clock.now()
        room = round(self.limits.max_ahead_s * ASR_RATE) - len(self._input)
        if len(samples) > room:
            now = self.clock.now()
            if now - self._last_too_fast >= 1.0:  # one error a second, not one a frame
                self._last_too_fast = now
                excess = (len(samples) - max(room, 0)) / ASR_RATE
                msg = f"audio is {self.limits.max_ahead_s:g} s ahead of real time; {excess:.2f} s dropped"
                self._send_error("input_too_fast", msg)
            samples = samples[: max(room, 0)]
        self._input = np.concatenate([self._input, samples])

    def _played(self, report: PlayedReport) -> None:
        if self.playback is None or self.session is None:
            return
        if not self.playback.acks:
            self._send_error("not_ready", "'played' reports need 'acks': true in 'hello'")
            return
        try:
            segments = self.playback.report(report.played, report.dropped)
        except ReportError as e:
            self._send_error("invalid_message", str(e))
            return
        for audio, response in segments:
            self.session.audio_played(audio, response)

    async def _audio_loop(self) -> None:
        """Every 20 ms: microphone blocks into the session at real time, reply audio out."""
        session, playback = self.session, self.playback
        assert session is not None and playback is not None
        tick = 0
        while True:
            tick += 1
            await self.clock.sleep_until(tick * TICK_S)
            now = self.clock.now()
            if self._input_start is not None:
                due = int((now - self._input_start) / TICK_S) + 1
                while self._fed_blocks < due and len(self._input) >= BLOCK:
                    block, self._input = self._input[:BLOCK], self._input[BLOCK:]
                    session.push_audio(block)
                    self._fed_blocks += 1
            if not playback.acks:
                for audio, response in playback.estimate(now):
                    session.audio_played(audio, response)
            budget = playback.budget(now)
            if budget > 0:
                audio, response = session.take_audio(budget)
                if len(audio):
                    playback.sent_audio(audio, response, now)
                    self._apply_now(self.dialect.audio(audio, response))

    async def _watchdog(self) -> None:
        """Close a session whose client reads nothing, or says nothing, for too long."""
        while not self._closing:
            await asyncio.sleep(0.25)
            self._check_health()

    def _check_health(self) -> None:
        if self._outbox and time.monotonic() - self._outbox[0][0] > self.limits.slow_client_s:
            self._outbox.clear()
            self._fatal(1008, "slow_client", f"the client read nothing for {self.limits.slow_client_s:g} s")
        elif time.monotonic() - self._last_rx > self.limits.idle_timeout_s:
            self._fatal(1000, "idle_timeout", f"nothing received for {self.limits.idle_timeout_s:g} s")

    def _fatal(self, code: int, kind: str, message: str) -> None:
        self._send_error(kind, message, fatal=True)
        self._tasks.append(asyncio.create_task(self._close(code, kind)))

    async def _close(self, code: int, reason: str) -> None:
        self._closing = True
        deadline = time.monotonic() + 1.0  # let the last messages (the error) out first
        while self._outbox and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await self.ws.close(code, reason)

    # -- sending ------------------------------------------------------------------

    def _send_error(self, code: str, message: str, fatal: bool = False) -> None:
        self._apply_now(self.dialect.error(code, message, fatal, round(self.clock.now(), 4)))

    def _send(self, message: str | bytes) -> None:
        self._outbox.append((time.monotonic(), message))
        self._outbox_ready.set()

    async def _sender(self) -> None:
        """One writer, in order: events and audio frames keep their order on the wire."""
        while True:
            while not self._outbox:
                self._outbox_ready.clear()
                await self._outbox_ready.wait()
            _, message = self._outbox[0]
            await self.ws.send(message)
            if self._outbox:
                self._outbox.popleft()
