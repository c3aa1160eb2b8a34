"""Raw sockets: a handshake and frames sent by hand, read until the server closes, reset, TCP state."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time

from voice.bench.fuzz.clients import classify
from voice.bench.fuzz.raw import UPGRADE, read_frames
from voice.bench.fuzz.server import TOKEN

TCP_ESTABLISHED = 1


# -- raw sockets: what no client library sends -------------------------------------------


class HandshakeRefused(Exception):
    pass


async def raw_handshake(
    port: int, path: str, rcvbuf: int | None = None, headers: str = ""
) -> tuple[socket.socket, bytes]:
    """A WebSocket handshake written by hand; the socket and whatever came after the response's head."""
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    try:
        await asyncio.wait_for(loop.sock_connect(sock, ("127.0.0.1", port)), 10)
        request = (
            (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n{headers}").encode()
            + UPGRADE
            + b"\r\n"
        )
        await loop.sock_sendall(sock, request)
        data = b""
        async with asyncio.timeout(15):
            while b"\r\n\r\n" not in data:
                chunk = await loop.sock_recv(sock, 65536)
                if not chunk:
                    raise HandshakeRefused("closed during the handshake")
                data += chunk
        head, rest = data.split(b"\r\n\r\n", 1)
        status = int(head.split()[1])
        if status != 101:
            raise HandshakeRefused(str(status))
        return sock, rest
    except BaseException:
        sock.close()
        raise


async def read_until_close(
    sock: socket.socket, data: bytes, dialect: str, stop_at_probe: int | None = None, timeout_s: float = 10
) -> tuple[int | None, list[str]]:
    """Read the server's frames until it closes (its close code; 1006: dropped with none) or the probe is answered."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + timeout_s
    kinds: list[str] = []
    while True:
        frames, code, used = read_frames(data)
        data = data[used:]
        answered = False
        for opcode, payload in frames:
            if opcode == 0x1:
                kind, probe = classify(dialect, payload.decode(errors="replace"))
                kinds.append(kind)
                answered = answered or (stop_at_probe is not None and probe == stop_at_probe)
        if code is not None or answered:
            return code, kinds
        left = deadline - time.monotonic()
        if left <= 0:
            return None, kinds
        try:
            chunk = await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), left)
        except TimeoutError:
            return None, kinds
        except ConnectionResetError:
            return 1006, kinds
        if not chunk:
            return 1006, kinds
        data += chunk


def reset(sock: socket.socket) -> None:
    """Close with a TCP reset (RST), not a FIN: what a crashed client or a dropped network looks like."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def tcp_state(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
