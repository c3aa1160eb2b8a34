"""What the server holds for a client: the outbox's cap, and what is kept of a session once it ends.

A real server on loopback and real WebSocket clients, with the stand-in
engines (``stand_in_engines.py``): the connection's own logic, in a second.
"""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import time
import weakref

import pytest
import pytest_asyncio
from stand_in_engines import StandInEngines, StandInLLM, StandInRecognizer, tone
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

import transport.outbox as outbox
from shell.config import SessionConfig
from transport.protocol import Limits, float_to_pcm16
from transport.ws_server import ClosedSession, ServerConfig, VoiceServer

SMALL_BUFFER = 4096  # the kernel's socket buffers, both ends: the outbox fills after a few kB, not MBs


@pytest_asyncio.fixture
async def start_server():
    servers: list[VoiceServer] = []
    engines = StandInEngines(StandInRecognizer({300: "what time is it"}), StandInLLM(["It is noon."]))

    async def start(limits: Limits) -> VoiceServer:
        # No end-of-turn model in the stand-in engines: silence ends the turn.
        config = ServerConfig(port=0, limits=limits, session=SessionConfig(end_of_turn=None))
        server = VoiceServer(engines, config)  # type: ignore[arg-type]
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()
    await engines.aclose()


def _small_socket(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    sock.connect(("127.0.0.1", port))
    return sock


async def _until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    "limits",
    [
        Limits(max_outbox_bytes=16_000, slow_client_s=60.0),  # over the bytes: at once
        Limits(max_outbox_bytes=1 << 30, slow_client_s=0.5),  # too long behind: the time-based check
    ],
    ids=["over-the-cap", "too-long-behind"],
)
async def test_a_client_that_does_not_read_is_told_and_closed_1008(start_server, monkeypatch, limits):
    # Time to read what the server wrote before it drops the connection (a second in the product).
    monkeypatch.setattr(outbox, "CLOSE_GRACE_S", 30.0)
    server = await start_server(limits)
    sock = _small_socket(server.port)
    # max_queue=1: the client library stops reading the socket once a message waits unread.
    async with connect(f"ws://127.0.0.1:{server.port}/ws", sock=sock, max_queue=1) as ws:
        await _until(lambda: len(server.connections) == 1)
        (conn,) = server.connections.values()
        server_sock = conn.ws.transport.get_extra_info("socket")
        server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)
        t0 = time.monotonic()
        for _ in range(3000):  # each is answered with an invalid_json error, which the client does not read
            await ws.send("x")
            await asyncio.sleep(0.001)  # (the server's loop runs: its writer too)
            if conn.outbox.cut_off:
                break
        await _until(lambda: conn.outbox.cut_off, 10)
        assert time.monotonic() - t0 < 10  # (slow_client_s is 60 s where the cap is tested)
        assert not conn.outbox.messages and conn.outbox.queued_bytes == 0
        received = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                received.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
        # What was waiting is dropped; what the socket had taken comes, then the error, then the close.
        assert {e["code"] for e in received[:-1]} == {"invalid_json"}
        assert received[-1]["code"] == "slow_client" and received[-1]["fatal"] is True, received[-1]
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    await _until(lambda: not server.connections)


async def test_a_client_that_reads_is_not_closed(start_server):
    server = await start_server(Limits(max_outbox_bytes=16_000, slow_client_s=60.0))
    sock = _small_socket(server.port)
    async with connect(f"ws://127.0.0.1:{server.port}/ws", sock=sock, max_queue=1) as ws:
        await _until(lambda: len(server.connections) == 1)
        (conn,) = server.connections.values()
        conn.ws.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)

        async def read(n: int) -> int:
            for _ in range(n):
                assert json.loads(await ws.recv())["code"] == "invalid_json"
            return n

        reader = asyncio.create_task(read(1000))
        for _ in range(1000):
            await ws.send("x")
            await asyncio.sleep(0.001)
        assert await asyncio.wait_for(reader, 10) == 1000
        assert not conn.outbox.cut_off


async def test_the_outbox_is_counted_in_bytes_and_may_always_hold_one_message(start_server):
    server = await start_server(Limits(max_outbox_bytes=1000))
    async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
        await _until(lambda: len(server.connections) == 1)
        (conn,) = server.connections.values()
        conn._send("é" * 2000)  # one message over the cap, alone: sent (a resumed history can be large)
        assert not conn.outbox.cut_off and conn.outbox.queued_bytes == 4000  # UTF-8 bytes, not characters
        assert await asyncio.wait_for(ws.recv(), 5) == "é" * 2000
        await _until(lambda: conn.outbox.queued_bytes == 0)
        conn._send(b"\0" * 600)
        conn._send(b"\0" * 600)  # 1200 bytes waiting: over
        assert conn.outbox.cut_off and not conn.outbox.messages
        conn._send(b"\0")  # nothing more is queued
        assert not conn.outbox.messages


async def test_a_closed_session_keeps_its_record_not_its_state(start_server):
    gc.disable()  # freed as the connection ends, not by the cyclic collector (rare in a process this size)
    try:
        await _a_session_then_its_record(await start_server(Limits()))
    finally:
        gc.enable()


async def _a_session_then_its_record(server: VoiceServer) -> None:
    async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
        await ws.send(json.dumps({"type": "hello", "sample_rate": 16000}))
        ready = json.loads(await ws.recv())
        conn = server.connections[ready["session"]]
        session, device, dialect = (weakref.ref(x) for x in (conn.session, conn.device, conn.dialect))
        assert conn.session._aec is not None  # the echo canceller: native state of its own
        audio = tone(0.6)
        for i in range(0, len(audio), 320):
            await ws.send(float_to_pcm16(audio[i : i + 320]))
        events = conn.events
        await _until(lambda: len(events) > 0)  # the session heard it (speech_start)
    await _until(lambda: ready["session"] in server.closed)
    record = server.closed[ready["session"]]
    assert isinstance(record, ClosedSession) and record.close_code == 1000
    assert record.events and record.history is not None and record.history.to_json() == []
    del conn
    assert session() is None and device() is None and dialect() is None
