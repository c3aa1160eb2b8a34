"""The server's front door against DNS rebinding and odd headers: a real server, raw HTTP from a real socket.

No engines: every request here is answered (or refused) before a session exists.
"""

from __future__ import annotations

import asyncio
import json
import os
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


@pytest.mark.parametrize("path", [r for r in ROUTES if r != "/health"])
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


async def get(port: int, path: str, host: str = "127.0.0.1") -> tuple[int, bytes]:
    answer = await raw(port, f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def live_session(srv: VoiceServer) -> asyncio.StreamWriter:
    """A WebSocket session opened on ``srv`` (a raw handshake) and counted by it; close the writer to leave."""
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    writer.write(f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n{UPGRADE}\r\n".encode())
    assert (await reader.readline()).split()[1] == b"101"
    for _ in range(50):
        if srv.connections:
            break
        await asyncio.sleep(0.02)
    return writer


async def test_health_tells_a_front_door_the_load_by_any_name_and_nothing_else():
    srv = VoiceServer(NO_ENGINES, ServerConfig(port=0, max_sessions=1))  # type: ignore[arg-type]
    await srv.start()
    try:
        code, body = await get(srv.port, "/health", host="voice-worker-3.internal")
        health = json.loads(body)
        assert code == 200 and health == {"status": "ready", "sessions": 0, "capacity": 1, "pid": os.getpid()}
        writer = await live_session(srv)  # one session: the worker is full
        code, body = await get(srv.port, "/health")
        assert code == 503 and json.loads(body)["status"] == "full"
        writer.close()
    finally:
        await srv.close()


async def test_a_draining_worker_takes_no_new_session_and_waits_for_the_live_ones():
    srv = VoiceServer(NO_ENGINES, ServerConfig(port=0))  # type: ignore[arg-type]
    await srv.start()
    host = f"Host: 127.0.0.1:{srv.port}\r\n"
    try:
        writer = await live_session(srv)
        drain = asyncio.create_task(srv.drain(timeout_s=30))
        await asyncio.sleep(0.2)
        code, body = await get(srv.port, "/health")
        assert code == 503 and json.loads(body) | {"pid": 0} == {
            "status": "draining", "sessions": 1, "capacity": 8, "pid": 0
        }  # fmt: skip
        assert await status(srv.port, "/ws", host) == 503  # a front door that retries goes elsewhere
        assert not drain.done()  # the live session is not cut
        writer.close()  # its client leaves
        assert await asyncio.wait_for(drain, 10) == 0
    finally:
        await srv.close()


async def test_a_drain_that_runs_out_of_time_says_how_many_were_left():
    srv = VoiceServer(NO_ENGINES, ServerConfig(port=0))  # type: ignore[arg-type]
    await srv.start()
    try:
        writer = await live_session(srv)
        assert await srv.drain(timeout_s=0.3) == 1
    finally:
        await srv.close()
        writer.close()


async def test_behind_a_front_door_its_name_and_origin_are_the_workers_own():
    config = ServerConfig(port=0, public_url="https://voice.example.com")
    srv = VoiceServer(NO_ENGINES, config)  # type: ignore[arg-type]
    await srv.start()
    try:
        front = "Host: voice.example.com\r\nOrigin: https://voice.example.com\r\n"
        assert await status(srv.port, "/ws", front) == 101
        assert await status(srv.port, "/", "Host: voice.example.com\r\n") == 200
        assert await status(srv.port, "/ws", "Host: voice.example.com\r\nOrigin: https://evil.example\r\n") == 403
        assert await status(srv.port, "/ws", "Host: evil.example\r\n") == 403
    finally:
        await srv.close()
    with pytest.raises(ValueError, match="public-url"):
        ServerConfig(public_url="voice.example.com").check()
