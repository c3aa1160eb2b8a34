"""The WebSocket server: one pipeline per connection, the engines shared.

Serves, on one port: the browser page (``GET /``), our protocol (``/ws``),
the OpenAI Realtime dialect (``/v1/realtime``), Twilio Media Streams
(``/telephony/twilio``), WebRTC's offer (``POST /webrtc/offer``, then our
protocol on a data channel and the audio as RTP) and ``GET /health``. The
protocols themselves are pure (``transport/protocol.py``,
``transport/realtime.py``, ``transport/twilio.py``); this module is the I/O around them: the handshake
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
import json
import logging
import mimetypes
import os
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import h11
import numpy as np
import soxr
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed, InvalidMessage
from websockets.http11 import Request, Response

from transport.client_device import ClientDevice
from transport.playback import ReportError
from transport.protocol import (
    Action,
    AudioIn,
    CancelReply,
    Close,
    Configure,
    Limits,
    PlayedReport,
    Send,
    ToolOutput,
    TruncateReply,
    UserText,
    VoiceProtocol,
)
from transport.wire import quote
from voice.core.audio import ASR_RATE
from voice.core.call import CallConfig
from voice.core.events import Event
from voice.core.history import History
from voice.shell import heap
from voice.shell.clock import MonotonicClock
from voice.shell.engines import Engines
from voice.shell.pump import Pump
from voice.shell.session import Session, SessionConfig
from voice.tools import Tools

log = logging.getLogger("voice.server")
handshake_log = logging.getLogger("voice.server.http")

WEB_ROOT = Path(__file__).parent / "web"
CLOSE_GRACE_S = 1.0  # a client closed for not reading has this long to answer the close frame
MAX_POST_HEAD = 16 * 1024  # a POST request's request line and headers
MAX_POST_BYTES = 64 * 1024  # and its body (a WebRTC offer is 2-6 KB)


class _OneLineHandshakeLog(logging.LoggerAdapter):
    """websockets' log of each connection, with a failed handshake said in one line.

    A malformed, abandoned or refused HTTP request comes from the network,
    not from a fault of the server: websockets logs each as an ERROR with a
    chain of three tracebacks, which lets any client flood the log. Here it
    is one INFO line with the causes' names; everything else passes as it is.
    """

    def log(self, level: int, msg: object, *args: Any, exc_info: Any = None, **kwargs: Any) -> None:
        if msg == "opening handshake failed" and exc_info:
            error = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
            self.logger.info("handshake failed: %s", _causes(error))
            return
        self.logger.log(level, msg, *args, exc_info=exc_info, **kwargs)


def _causes(error: BaseException | None) -> str:
    """An exception and what caused it, in one line, each cut and escaped (a client's bytes may be in them)."""
    said = []
    while error is not None and len(said) < 4:
        said.append(f"{type(error).__name__}: {str(error)[:100]!r}")
        error = error.__cause__ or error.__context__
    return " <- ".join(said)


class _HttpConnection(ServerConnection):
    """Answers a request that is not HTTP with 400 before the connection is closed (websockets only
    closes it), and takes the one POST request the server answers (WebRTC's offer, which websockets,
    a GET-only handshake parser, would refuse) to :meth:`VoiceServer.http_post`."""

    voice: VoiceServer  # set on the subclass each server makes (VoiceServer.start)
    _bytes_seen = False
    _is_post = False  # the request is a POST, read here: websockets' handshake never sees it
    _post: h11.Connection | None = None
    _post_request: h11.Request | None = None
    _post_body: bytearray

    def data_received(self, data: bytes) -> None:
        if not self._bytes_seen and data.startswith(b"POST "):
            self._is_post = True
            self._post = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_POST_HEAD)
            self._post_body = bytearray()
        self._bytes_seen = True
        if self._post is None:
            super().data_received(data)
        else:
            self._receive_post(data)

    async def handshake(self, *args: Any, **kwargs: Any) -> None:
        await asyncio.wait([self.request_rcvd, self.connection_lost_waiter], return_when=asyncio.FIRST_COMPLETED)
        if self._is_post:
            return  # a POST, answered as HTTP: no WebSocket handshake to make, nor a failed one to log
        await super().handshake(*args, **kwargs)

    def _receive_post(self, data: bytes) -> None:
        post = self._post
        assert post is not None
        try:
            post.receive_data(data)
            while (event := post.next_event()) is not h11.NEED_DATA:
                if isinstance(event, h11.Request):
                    self._post_request = event
                elif isinstance(event, h11.Data):
                    self._post_body += event.data
                    if len(self._post_body) > MAX_POST_BYTES:
                        return self._answer_post(self.respond(413, f"at most {MAX_POST_BYTES} bytes\n"))
                elif isinstance(event, h11.EndOfMessage):
                    self._post = None  # nothing more is read from this connection
                    asyncio.get_running_loop().create_task(self._handle_post())
                    return
                else:
                    return
        except h11.RemoteProtocolError as e:
            self._answer_post(self.respond(400, f"not a valid HTTP request: {e}\n"))

    async def _handle_post(self) -> None:
        request = self._post_request
        assert request is not None
        headers = Headers([(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers])
        try:
            response = await self.voice.http_post(
                self, request.target.decode("latin-1"), headers, bytes(self._post_body)
            )
        except Exception:
            log.exception("a POST request failed")
            response = self.respond(500, "internal error\n")
        self._answer_post(response)

    def _answer_post(self, response: Response) -> None:
        self._post = None
        response.headers["Connection"] = "close"
        if not self.transport.is_closing():
            self.transport.write(response.serialize())
            self.transport.close()

    def send_data(self) -> None:
        exc = self.protocol.handshake_exc
        if (
            isinstance(exc, InvalidMessage)
            and self.request is None
            and not isinstance(exc.__cause__, EOFError)  # the client left mid-request: no one to answer
            and not getattr(self, "_answered", False)
        ):
            self._answered = True
            body = b"not a valid HTTP request\n"
            self.transport.write(
                b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
        super().send_data()


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
    # Where clients reach this worker when it stands behind a front door (a reverse proxy): its
    # host[:port] is the name they ask for and its page's origin. None: the worker's own address.
    public_url: str | None = None
    limits: Limits = field(default_factory=Limits)
    session: SessionConfig = field(default_factory=SessionConfig)
    tools: Tools | None = None  # what the model may call in every session (--tools)
    call: CallConfig = field(default_factory=CallConfig)  # how phone calls are held (/telephony/twilio)
    ice_servers: tuple[str, ...] = ()  # WebRTC: STUN/TURN URLs (none: host candidates only, a LAN)

    def check(self) -> None:
        if self.public_url is not None:
            parts = urlsplit(self.public_url)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
                raise ValueError(f"--public-url {self.public_url!r}: give http(s)://host[:port] of the front door")
        if not is_loopback(self.host) and not self.token:
            raise ValueError(
                f"binding to {self.host} exposes the assistant to the network: "
                "give a token (--token or VOICE_TOKEN) that clients must send"
            )


def _response(status: int, reason: str, kind: str, body: bytes, cache: str) -> Response:
    """An HTTP response with a body of ``kind`` (its Content-Type) and its Cache-Control."""
    headers = Headers([("Content-Type", kind), ("Content-Length", str(len(body))), ("Cache-Control", cache)])
    return Response(status, reason, headers, body)


EventHook = Callable[[str, Event], None]  # (session id, pipeline event), for logs and tests


class SessionObserver(Protocol):
    """Watches every session (the app's metrics); keyed by the connection, whose id changes on resume."""

    def session_opened(self, key: object) -> None: ...

    def observe(self, event: Event, key: object) -> None: ...

    def session_closed(self, key: object) -> None: ...


class ConversationOpener(Protocol):
    """The resume policy (``voice/app/conversations.py``): which conversation a session goes on with."""

    def open(
        self, resume: str | None, system_prompt: str | None = None, owner: str | None = None, in_use: Any = ()
    ) -> Any: ...


class VoiceServer:
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
        self._public = urlsplit(self.config.public_url) if self.config.public_url else None

    async def start(self) -> None:
        cfg = self.config
        # What a closed session freed goes back to the system (the choice and its figures: voice/shell/heap.py).
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
            logger=_OneLineHandshakeLog(handshake_log),
            create_connection=type("HttpConnection", (_HttpConnection,), {"voice": self}),
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
            return self._health_response()
        host = self._one_header(request, "Host")
        if host is None or not self._host_allowed(host):
            return connection.respond(403, "this host name is not served here\n")
        if url.path in ("/ws", "/v1/realtime", "/telephony/twilio"):
            return self._check_access(connection, request, url.query, host)
        return self._static(connection, url.path)

    def _health_response(self) -> Response:
        """200 while a new session is welcome here; 503 when full or draining (a front door skips it)."""
        health = self.health()
        body = (json.dumps(health) + "\n").encode()
        if health["status"] == "ready":
            return _response(200, "OK", "application/json", body, "no-store")
        return _response(503, "Service Unavailable", "application/json", body, "no-store")

    @staticmethod
    def _one_header(request: Request, name: str) -> str | None:
        """The header's value; None when it is missing or repeated (which no honest client sends)."""
        values = request.headers.get_all(name)
        return values[0] if len(values) == 1 else None

    def _host_allowed(self, host: str) -> bool:
        """Bound to loopback, only a loopback name at this port may be asked for,
        or the front door's (``public_url``).

        DNS rebinding: a web page whose own name is made to resolve to
        127.0.0.1 reaches this server from the person's browser, with its own
        name in ``Host`` (and in ``Origin``). Off loopback the token guards.
        """
        if not is_loopback(self.config.host):
            return True
        if self._public is not None and host.lower() == self._public.netloc.lower():
            return True
        try:
            parts = urlsplit("//" + host)
            name, port = parts.hostname, parts.port or 80
        except ValueError:
            return False
        return name is not None and is_loopback(name) and port == self.port

    def _check_access(self, connection: ServerConnection, request: Request, query: str, host: str) -> Response | None:
        cfg = self.config
        if cfg.token and not self._token_given(request, query, cfg.token):
            return connection.respond(401, "a valid token is required (Authorization: Bearer, or ?token=)\n")
        origins = request.headers.get_all("Origin")
        if len(origins) > 1 or (origins and not self._origin_allowed(origins[0], host)):
            return connection.respond(403, "this origin is not allowed\n")
        if self.draining:
            return connection.respond(503, "this worker is draining (shutting down): connect again\n")
        if len(self.connections) >= cfg.max_sessions:
            return connection.respond(503, f"the server is at its limit of {cfg.max_sessions} sessions\n")
        return None

    @classmethod
    def _token_given(cls, request: Request, query: str, token: str) -> bool:
        given = parse_qs(query).get("token", [""])[0]
        if not given and request.headers.get_all("Authorization"):
            auth = cls._one_header(request, "Authorization")
            if auth is None or not auth.lower().startswith("bearer "):
                return False
            given = auth[7:].strip()
        try:
            return hmac.compare_digest(given.encode(), token.encode())
        except UnicodeEncodeError:  # a header that is not text: not our token
            return False

    def _origin_allowed(self, origin: str, host: str) -> bool:
        """The server's own pages, and ``--allow-origin`` ones.

        Bound to loopback, the own origin is a loopback name at the server's
        port (never what the request's ``Host`` says: a rebinding page sets
        both). Off loopback, where a token is required, it is the page served
        under the name the client asked for.
        """
        if origin in self.config.allow_origins:
            return True
        public = self._public
        if public is not None and origin.lower() == f"{public.scheme}://{public.netloc}".lower():
            return True
        try:
            parts = urlsplit(origin)
            name, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or name is None:
            return False
        if is_loopback(self.config.host):
            return is_loopback(name) and port == self.port
        return parts.netloc == host

    def _static(self, connection: ServerConnection, path: str) -> Response:
        name = "index.html" if path in ("", "/") else path.lstrip("/")
        try:
            file = (WEB_ROOT / name).resolve()
            found = len(name) <= 255 and WEB_ROOT.resolve() in file.parents and file.is_file()
        except (OSError, ValueError):  # a NUL byte, a name too long for the file system
            found = False
        if not found:
            return connection.respond(404, "not found\n")
        body = file.read_bytes()
        kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind.endswith("javascript"):
            kind += "; charset=utf-8"
        return _response(200, "OK", kind, body, "no-cache")

    # -- connections -------------------------------------------------------------

    async def _handle(self, ws: ServerConnection) -> None:
        path = urlsplit(ws.request.path).path if ws.request else "/ws"
        if len(self.connections) >= self.config.max_sessions or self.draining:  # raced past the handshake's check
            await ws.close(1013, "too many sessions, try again later")
            return
        session_id = uuid.uuid4().hex
        if path == "/v1/realtime":
            from transport.realtime import RealtimeProtocol

            resume = parse_qs(urlsplit(ws.request.path).query).get("session", [None])[0] if ws.request else None
            semantic = self.config.session.end_of_turn is not None
            dialect: Any = RealtimeProtocol(session_id, self.engines.output_rate, self.config.limits, resume, semantic)
        elif path == "/telephony/twilio":
            from transport.twilio import TwilioProtocol

            dialect = TwilioProtocol(session_id, self.engines.output_rate, self.config.limits)
        else:
            dialect = VoiceProtocol(session_id, self.engines.output_rate, self.config.limits)
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
            await heap.after_session()  # (nothing with the heap's default strategy: voice/shell/heap.py)

    async def http_post(self, connection: ServerConnection, target: str, headers: Headers, body: bytes) -> Response:
        """A POST request: WebRTC's offer at ``/webrtc/offer`` (transport/webrtc.py), under the
        same access rules as a WebSocket; the answer starts the client's session."""
        from transport.webrtc import OfferError, WebRTCPeer, read_offer

        request = Request(target, headers)
        url = urlsplit(target)
        host = self._one_header(request, "Host")
        if host is None or not self._host_allowed(host):
            return connection.respond(403, "this host name is not served here\n")
        if url.path != "/webrtc/offer":
            return connection.respond(404, "not found (POST is for /webrtc/offer)\n")
        refused = self._check_access(connection, request, url.query, host)
        if refused is not None:
            return refused
        kind = self._one_header(request, "Content-Type") or ""
        try:
            sdp = read_offer(kind, body)
        except OfferError as e:
            return connection.respond(400, f"{e}\n")
        peer = WebRTCPeer(self.engines.output_rate, self.config.ice_servers)
        try:
            answer = await peer.answer(sdp)
        except Exception as e:  # aiortc's word on an offer it cannot take (no codec in common, bad SDP)
            await peer.close()
            return connection.respond(400, f"the offer could not be answered: {str(e)[:200]}\n")
        if self.draining or len(self.connections) >= self.config.max_sessions:  # filled up meanwhile
            await peer.close()
            return connection.respond(503, "the server is at its limit of sessions\n")
        session_id = uuid.uuid4().hex
        conn = Connection(self, peer.link, session_id, VoiceProtocol(session_id, self.engines.output_rate,
                          self.config.limits), peer=peer)  # fmt: skip
        self.connections[session_id] = conn
        task = asyncio.get_running_loop().create_task(self._serve(conn), name=f"webrtc-{session_id[:8]}")
        self._peer_sessions.add(task)
        task.add_done_callback(self._peer_sessions.discard)
        if kind.split(";")[0].strip().lower() == "application/sdp":
            return _response(201, "Created", "application/sdp", answer.encode(), "no-store")
        body = json.dumps({"type": "answer", "sdp": answer}).encode()
        return _response(200, "OK", "application/json", body, "no-store")

    def rekey(self, conn: Connection, session_id: str) -> None:
        """The connection goes on with a stored conversation: it is known by that id from now on."""
        self.connections.pop(conn.id, None)
        conn.id = session_id
        self.connections[session_id] = conn


@dataclass(frozen=True)
class ClosedSession:
    """What :attr:`VoiceServer.closed` keeps of a session whose connection ended: its record, not its state."""

    id: str
    history: History | None  # the conversation (None: the client never said hello)
    events: list[Event]  # every pipeline event of the session
    errors: list[str]  # the pipeline's errors
    close_code: int | None


class Connection:
    """One client: its protocol state, its session and the loops that drive them."""

    def __init__(
        self, server: VoiceServer, ws: ServerConnection | Any, session_id: str, dialect: Any, peer: Any = None
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
        self.recorder: Any = None  # persists the turns (None: in memory only)
        self._store_warned = False
        self.clock = MonotonicClock()
        self.events: list[Event] = []  # every pipeline event of this session
        self.close_code: int | None = None
        self.failures = 0  # client messages whose handling raised (logged once)
        self._to_16k: soxr.ResampleStream | None = None
        self._input_rate = ASR_RATE  # the client's audio's rate (Configure.input_rate)
        self._last_rx = time.monotonic()
        self._last_too_fast = -1.0
        self._outbox: deque[tuple[float, str | bytes, int]] = deque()  # (when queued, message, its bytes)
        self._outbox_bytes = 0  # in the outbox, the message being written included (Limits.max_outbox_bytes)
        self._outbox_ready = asyncio.Event()
        self._cut_off = False  # closed for not reading what it was sent
        self._hanging_up: asyncio.Task | None = None
        self._closing = False
        self._close_code: int | None = None  # what we closed with, once we began to
        self._ended_by_tool = False
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
            1008 if self._cut_off else self.close_code,  # (a cut-off client's close may still be under way)
        )
        self.session = self.device = self.recorder = self._to_16k = None
        self.dialect = self.peer = None
        self._outbox.clear()
        self._outbox_bytes = 0
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
            elif isinstance(action, UserText):
                if self.session is None:
                    self._send_error("not_ready", "the session is not configured yet")
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
            return
        session_cfg = self.server.config.session
        # WebRTC: the browser cancels the echo, with the speaker's real signal (which the server never sees).
        echo_cancel = session_cfg.echo_cancel and cfg.echo_cancel and self.peer is None
        session_cfg = dataclasses.replace(session_cfg, echo_cancel=echo_cancel)
        if cfg.instructions is not None:
            session_cfg = dataclasses.replace(session_cfg, system_prompt=cfg.instructions)
        if cfg.call:
            session_cfg = dataclasses.replace(session_cfg, call=self.server.config.call)
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
        tools = self.server.config.tools
        self.session = Session(self.server.engines, self.clock, session_cfg, self._on_event, history, tools=tools)
        if cfg.tools:
            self.session.set_client_tools(list(cfg.tools))
        self._apply_now(self.dialect.ready(self.id, self.session.history.to_json()))
        if self.peer is not None:
            self.device = self.peer.device()
        else:
            self.device = ClientDevice(self.session.output_rate, cfg.lead_s, cfg.acks, self._send_audio)
        self._set_input_rate(cfg.input_rate)
        pump = Pump(self.session, self.device)
        self._tasks.append(asyncio.create_task(pump.run(), name=f"audio-{self.id[:8]}"))

    def _set_input_rate(self, rate: int) -> None:
        self._input_rate = rate
        self._to_16k = None if rate == ASR_RATE else soxr.ResampleStream(rate, ASR_RATE, 1)

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
            samples = self._to_16k.resample_chunk(samples.astype(np.float32))
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
        elif self._outbox and time.monotonic() - self._outbox[0][0] > self.limits.slow_client_s:
            self._cut_off_now(f"the client read nothing for {self.limits.slow_client_s:g} s")
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
        while self._outbox and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await self.ws.close(code, reason)

    # -- sending ------------------------------------------------------------------

    def _send_error(self, code: str, message: str, fatal: bool = False) -> None:
        self._apply_now(self.dialect.error(code, message, fatal, round(self.clock.now(), 4)))

    def _send(self, message: str | bytes) -> None:
        if self._cut_off:
            return  # closed for not reading: nothing more is queued
        size = len(message) if isinstance(message, bytes) or message.isascii() else len(message.encode())
        self._outbox.append((time.monotonic(), message, size))
        self._outbox_bytes += size
        self._outbox_ready.set()
        cap = self.limits.max_outbox_bytes
        if self._outbox_bytes > cap and len(self._outbox) > 1:  # one message, however large, may always wait
            self._cut_off_now(f"the client does not read: over {cap} bytes wait to be sent to it")

    async def _sender(self) -> None:
        """One writer, in order: events and audio frames keep their order on the wire."""
        while True:
            while not self._outbox:
                self._outbox_ready.clear()
                await self._outbox_ready.wait()
            _, message, size = self._outbox[0]  # stays counted while the socket takes it
            await self.ws.send(message)
            if self._outbox:  # (emptied if the client was cut off meanwhile)
                self._outbox.popleft()
                self._outbox_bytes -= size

    def _cut_off_now(self, why: str) -> None:
        """Close a client that does not read what it is sent (1008), now, and queue nothing more for it.

        What waits in the outbox is dropped. The fatal ``slow_client`` error is
        written to the socket behind the message being written and then the
        close frame, without waiting for the client to read them; if it does
        not answer the close within a second, the TCP connection is dropped.
        """
        if self._cut_off:
            return
        self._cut_off = True
        self._outbox.clear()
        self._outbox_bytes = 0
        actions = self.dialect.error("slow_client", why, True, round(self.clock.now(), 4))
        last = [a.message for a in actions if isinstance(a, Send)]
        # Not one of the connection's tasks, which end with the session: the close goes on after it.
        self._hanging_up = asyncio.create_task(self._hang_up(last, 1008, "slow_client"))

    async def _hang_up(self, last: list[str | bytes], code: int, reason: str) -> None:
        # Each send writes its frame to the transport at its first step, then waits for the client (not awaited).
        writes = [asyncio.ensure_future(self.ws.send(m)) for m in last]
        try:
            await asyncio.sleep(0)  # the writes go first: the close frame comes after them
            self._closing = True  # the session ends, and the close frame is written in this same step
            async with asyncio.timeout(CLOSE_GRACE_S):
                await self.ws.close(code, reason)
        except TimeoutError:
            self.ws.transport.abort()
        finally:
            for w in writes:
                w.cancel()
            await asyncio.gather(*writes, return_exceptions=True)
