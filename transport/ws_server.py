"""The WebSocket server: one pipeline per connection, the engines shared.

Serves, on one port: the browser page (``GET /``), our protocol (``/ws``),
the OpenAI Realtime dialect (``/v1/realtime``), Twilio Media Streams
(``/telephony/twilio``), WebRTC's offer (``POST /webrtc/offer``, then our
protocol on a data channel and the audio as RTP) and ``GET /health``. The
protocols themselves are pure (``transport/protocol.py``,
``transport/realtime/``, ``transport/twilio.py``, one :class:`~transport.dialect.Dialect`
type); around them, one module a concern: the POST request and the handshake's log
(``http_post.py``), the access checks (``access.py``), static files and health
(``static.py``), which dialect a path speaks and WebRTC's offer (``routes.py``), one
client's :class:`~transport.connection.Connection` (``connection.py``) and what waits to be
sent to it (``outbox.py``). This module is the server: its configuration, its lifecycle
(start, drain, close) and its sessions. A connection's failure is caught and logged in its
own task; no other session sees it. See ``docs/protocol.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from typing import Any
from urllib.parse import urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from shell import heap
from shell.engines import Engines
from transport.access import Access, is_loopback
from transport.connection import ClosedSession, Connection
from transport.http_post import HttpConnection, OneLineHandshakeLog
from transport.routes import SESSION_PATHS, answer_offer, dialect_for
from transport.server_types import (
    ConversationOpener,
    EventHook,
    ServerConfig,
    SessionObserver,
)
from transport.static import health_response, static_file

__all__ = [
    "ClosedSession",
    "Connection",
    "ConversationOpener",
    "EventHook",
    "ServerConfig",
    "SessionObserver",
    "VoiceServer",
    "is_loopback",
]

log = logging.getLogger("voice.server")
handshake_log = logging.getLogger("voice.server.http")


class VoiceServer:
    """The engines, shared by every session, served on one port; routing in ``transport/routes.py``."""

    def __init__(
        self,
        engines: Engines,
        config: ServerConfig | None = None,
        metrics: SessionObserver | None = None,
        on_event: EventHook | None = None,
        conversations: ConversationOpener | None = None,
    ) -> None:
        """``conversations``: where finalized turns are kept and resumed from (None: in memory only)."""
        self.engines = engines
        self.conversations = conversations
        self.config = config or ServerConfig()
        self.config.check()
        self.metrics = metrics
        self.on_event = on_event
        self.connections: dict[str, Connection] = {}
        # Recently closed sessions, for inspection (and tests): id -> what is kept of it.
        self.closed: dict[str, ClosedSession] = {}
        self._server: Server | None = None
        self.port = self.config.port
        self.draining = False  # no new session; the live ones are finished (drain())
        self._peer_sessions: set[asyncio.Task] = set()  # WebRTC sessions (a WebSocket's is its handler's)
        cfg = self.config
        self.access = Access(cfg.host, cfg.token, cfg.allow_origins, cfg.public_url, lambda: self.port)

    async def start(self) -> None:
        cfg = self.config
        # What a closed session freed goes back to the system (the choice and its figures: shell/heap.py).
        heap.tune()
        self._server = await serve(
            self._handle,
            cfg.host,
            cfg.port,
            process_request=self._process_request,
            max_size=cfg.limits.max_message_bytes,
            compression=None,  # PCM does not deflate; the CPU has better things to do
            ping_interval=20,
            ping_timeout=20,
            logger=OneLineHandshakeLog(handshake_log),
            create_connection=type("HttpConnection", (HttpConnection,), {"voice": self}),
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("serving on http://%s:%d", cfg.host, self.port)

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()  # closes every WebSocket connection with 1001 (going away)
            for conn in list(self.connections.values()):
                if conn.peer is not None:  # a WebRTC peer is no WebSocket: told and closed here
                    await conn.ws.close(1001, "the server is shutting down")
            await self._server.wait_closed()
            if self._peer_sessions:
                await asyncio.wait(self._peer_sessions, timeout=10)

    async def drain(self, timeout_s: float) -> int:
        """Take no new session and let the live ones finish, for ``timeout_s`` at most.

        ``/health`` says ``draining`` (a front door stops sending sessions
        here) and a new connection is refused with 503 (a front door that
        retries sends it to another worker). Returns how many sessions were
        still live at the deadline: :meth:`close` ends them with 1001, and
        their clients resume on another worker with their session id.
        """
        self.draining = True
        log.info("draining: %d live sessions, %g s to finish", len(self.connections), timeout_s)
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self.connections and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        return len(self.connections)

    def health(self) -> dict[str, Any]:
        """What a front door or an orchestrator reads at ``GET /health``: may it send a session here?"""
        in_use, capacity = len(self.connections), self.config.max_sessions
        status = "draining" if self.draining else "full" if in_use >= capacity else "ready"
        return {"status": status, "sessions": in_use, "capacity": capacity, "pid": os.getpid()}

    # -- the HTTP side of the handshake -------------------------------------

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        url = urlsplit(request.path)
        if url.path == "/health":  # for front doors and probes, whatever name they use: load, no data
            return health_response(self.health())
        host = self.access.one_header(request, "Host")
        if host is None or not self.access.host_allowed(host):
            return connection.respond(403, "this host name is not served here\n")
        if url.path in SESSION_PATHS:
            return self.check_access(connection, request, url.query, host)
        return static_file(connection, url.path)

    def check_access(self, connection: ServerConnection, request: Request, query: str, host: str) -> Response | None:
        """The refusal of a request that would open a session (token, origin, then room here); None: let in."""
        refused = self.access.refusal(connection, request, query, host)
        if refused is not None:
            return refused
        if self.draining:
            return connection.respond(503, "this worker is draining (shutting down): connect again\n")
        if len(self.connections) >= self.config.max_sessions:
            return connection.respond(503, f"the server is at its limit of {self.config.max_sessions} sessions\n")
        return None

    # -- connections -------------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        if len(self.connections) >= self.config.max_sessions or self.draining:  # raced past the handshake's check
            await ws.close(1013, "too many sessions, try again later")
            return
        session_id = uuid.uuid4().hex
        dialect = dialect_for(self, ws.request.path if ws.request else "/ws", session_id)
        conn = Connection(self, ws, session_id, dialect)
        self.connections[session_id] = conn
        await self._serve(conn)

    async def _serve(self, conn: Connection) -> None:
        """Run one client's session to its end, and keep its record."""
        session_id, ws = conn.id, conn.ws
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
            if self.metrics is not None:
                self.metrics.session_closed(conn)
            peer = conn.peer
            self.closed[conn.id] = conn.release()
            if peer is not None:
                await peer.close()
            while len(self.closed) > 32:
                self.closed.pop(next(iter(self.closed)))
            await heap.after_session()  # (nothing with the heap's default strategy: shell/heap.py)

    async def http_post(self, connection: ServerConnection, target: str, headers: Headers, body: bytes) -> Response:
        """A POST request (``transport/http_post.py``): WebRTC's offer (``transport/routes.py``)."""
        return await answer_offer(self, connection, target, headers, body)

    def open_peer_session(self, conn: Connection) -> None:
        """Serve a WebRTC peer's session (a WebSocket's is its handler's) in a task of its own."""
        self.connections[conn.id] = conn
        task = asyncio.get_running_loop().create_task(self._serve(conn), name=f"webrtc-{conn.id[:8]}")
        self._peer_sessions.add(task)
        task.add_done_callback(self._peer_sessions.discard)

    def rekey(self, conn: Connection, session_id: str) -> None:
        """The connection goes on with a stored conversation: it is known by that id from now on."""
        self.connections.pop(conn.id, None)
        conn.id = session_id
        self.connections[session_id] = conn
