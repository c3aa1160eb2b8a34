"""The HTTP around the WebSocket handshake: the one POST request the server answers, and one log line
for a failed handshake.

websockets parses a GET handshake only. WebRTC's offer comes as ``POST /webrtc/offer``: the
connection reads it with h11 (bounded: :data:`MAX_POST_HEAD`, :data:`MAX_POST_BYTES`) and hands
it to the server (``VoiceServer.http_post``). A request that is not HTTP is answered 400 before
the connection closes, and websockets' three-traceback ERROR for a refused or abandoned
handshake (which any client could make it write) is one INFO line.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any, Protocol

import h11
from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.exceptions import InvalidMessage
from websockets.http11 import Response


class PostHandler(Protocol):
    """What answers a POST request (``transport/ws_server.VoiceServer.http_post``)."""

    async def http_post(self, connection: ServerConnection, target: str, headers: Headers, body: bytes) -> Response: ...


log = logging.getLogger("voice.server")

MAX_POST_HEAD = 16 * 1024  # a POST request's request line and headers
MAX_POST_BYTES = 64 * 1024  # and its body (a WebRTC offer is 2-6 KB)


class OneLineHandshakeLog(logging.LoggerAdapter):
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


class HttpConnection(ServerConnection):
    """Answers a request that is not HTTP with 400 before the connection is closed (websockets only
    closes it), and takes the one POST request the server answers (WebRTC's offer, which websockets,
    a GET-only handshake parser, would refuse) to :meth:`VoiceServer.http_post`."""

    voice: PostHandler  # set on the subclass each server makes (transport/ws_server.py: VoiceServer.start)
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
