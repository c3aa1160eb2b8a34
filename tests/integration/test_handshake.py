"""The server's front door against DNS rebinding and odd headers: a real server, raw HTTP from a real socket.

No engines: every request here is answered (or refused) before a session exists.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from transport.ws_server import ServerConfig, VoiceServer

ROUTES = ("/", "/health", "/ws", "/v1/realtime")
UPGRADE = (
    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
)
# The handshake needs no engine; a connection that got through asks only for the output rate.
NO_ENGINES = SimpleNamespace(output_rate=24000)


async def status(port: int, path: str, headers: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    upgrade = UPGRADE if path in ("/ws", "/v1/realtime") else ""
    writer.write(f"GET {path} HTTP/1.1\r\n{headers}{upgrade}\r\n".encode("latin-1"))
    await writer.drain()
    line = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    return int(line.split()[1])


@pytest.fixture
async def server():
    srv = VoiceServer(NO_ENGINES, ServerConfig(port=0))  # type: ignore[arg-type]
    await srv.start()
    yield srv
    await srv.close()


@pytest.fixture
async def guarded():
    srv = VoiceServer(NO_ENGINES, ServerConfig(port=0, token="s3cret"))  # type: ignore[arg-type]
    await srv.start()
    yield srv
    await srv.close()


@pytest.mark.parametrize("path", ROUTES)
async def test_a_rebinding_page_is_refused_on_every_route(server, path):
    # What a browser sends once evil.example resolves to 127.0.0.1.
    evil = f"Host: evil.example:{server.port}\r\nOrigin: http://evil.example:{server.port}\r\n"
    assert await status(server.port, path, evil) == 403
    assert await status(server.port, path, f"Host: evil.example:{server.port}\r\n") == 403


@pytest.mark.parametrize("path", ROUTES)
async def test_the_servers_own_names_are_served(server, path):
    for name in ("127.0.0.1", "localhost", "[::1]"):
        own = f"Host: {name}:{server.port}\r\nOrigin: http://{name}:{server.port}\r\n"
        expected = 101 if path.startswith(("/ws", "/v1")) else 200
        assert await status(server.port, path, own) == expected, name


async def test_an_origin_is_compared_with_the_server_not_with_the_request(server):
    port = server.port
    assert await status(port, "/ws", f"Host: 127.0.0.1:{port}\r\nOrigin: http://evil.example:{port}\r\n") == 403
    assert await status(port, "/ws", f"Host: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port + 1}\r\n") == 403
    assert await status(port, "/ws", f"Host: 127.0.0.1:{port + 1}\r\n") == 403  # another port's name
    assert await status(port, "/ws", "") == 403  # no Host at all


async def test_repeated_or_odd_headers_are_refused_never_a_server_error(guarded):
    port = guarded.port
    host = f"Host: 127.0.0.1:{port}\r\n"
    assert await status(port, "/ws", host + "Authorization: Bearer s3cret\r\n") == 101
    assert await status(port, "/ws", host + "Authorization: Bearer s3cret\r\nAuthorization: Bearer x\r\n") == 401
    assert await status(port, "/ws", host + "Authorization: Bearer s3cr\xe9t\r\n") == 401
    assert await status(port, "/ws", host + "Authorization: Basic czNjcmV0\r\n") == 401
    assert await status(port, "/ws", host + host) == 403  # two Host headers
    origin = f"Origin: http://127.0.0.1:{port}\r\n"
    assert await status(port, "/ws?token=s3cret", host + origin + origin) == 403


async def raw(port: int, request: bytes, leave: bool = False) -> bytes:
    """What the server answers to ``request`` (``leave``: and the client's end closed), read until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    if leave:
        writer.write_eof()
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


@pytest.mark.parametrize(
    "path", ["/%00", "/index.html%00.png", "/\x00", "/" + "a" * 8000, "/" + "a/" * 3000, "/../../etc/passwd"]
)
async def test_odd_paths_are_not_found_never_a_server_error(server, path):
    assert await status(server.port, path, f"Host: 127.0.0.1:{server.port}\r\n") == 404


@pytest.mark.parametrize(
    "request_bytes",
    [b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nHost\r\n\r\n",
     b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" * 4 + b"\r\n\r\n",
     b"GET / HTTP/1.1\r\n" + b"X: " + b"y" * 9000 + b"\r\n\r\n"],
    ids=["not-http", "header-without-colon", "tls-hello", "header-too-long"],
)  # fmt: skip
async def test_a_request_that_is_not_http_is_a_400_logged_in_one_line(server, request_bytes, caplog):
    caplog.set_level("INFO")
    answer = await raw(server.port, request_bytes)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:80]
    await asyncio.sleep(0.05)
    said = [r for r in caplog.records if r.name.startswith(("voice.server", "websockets"))]
    assert [r.levelname for r in said] == ["INFO"], [r.getMessage() for r in said]
    assert said[0].getMessage().startswith("handshake failed: InvalidMessage") and not said[0].exc_info
    assert "\n" not in said[0].getMessage()


async def test_an_abandoned_request_is_not_answered_and_logged_in_one_line(server, caplog):
    caplog.set_level("INFO")
    assert await raw(server.port, b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\n", leave=True) == b""  # half a request
    await asyncio.sleep(0.05)
    said = [r for r in caplog.records if r.name.startswith(("voice.server", "websockets"))]
    assert [(r.levelname, bool(r.exc_info)) for r in said] == [("INFO", False)]
