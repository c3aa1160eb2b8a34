"""What no well-behaved library sends, built as bytes: raw WebSocket frames (client to server) and crafted HTTP
requests, with how their answers are read. Pure."""

from __future__ import annotations

import struct
from dataclasses import dataclass

# -- raw WebSocket framing (client to server) -------------------------------------


def frame(opcode: int, payload: bytes, fin: bool = True, mask: bool = True, rsv: int = 0) -> bytes:
    """One WebSocket frame as a client sends it (masked, RFC 6455), or as it must not (``mask=False``, ``rsv``)."""
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    n = len(payload)
    bit = 0x80 if mask else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 1 << 16:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = b"\x5a\x17\xc3\x09"
    stream = (key * (n // 4 + 1))[:n]
    return head + key + (int.from_bytes(payload, "big") ^ int.from_bytes(stream, "big")).to_bytes(n, "big")


def read_frames(data: bytes) -> tuple[list[tuple[int, bytes]], int | None, int]:
    """The server's frames in ``data`` (unmasked) as (opcode, payload); the close code if a close frame came
    (1005 for one with no body, as RFC 6455 says); and how many bytes were read (a cut-off frame is left)."""
    frames: list[tuple[int, bytes]] = []
    i = 0
    while i + 2 <= len(data):
        opcode, n = data[i] & 0x0F, data[i + 1] & 0x7F
        j = i + 2
        if n == 126:
            if j + 2 > len(data):
                break
            n, j = struct.unpack("!H", data[j : j + 2])[0], j + 2
        elif n == 127:
            if j + 8 > len(data):
                break
            n, j = struct.unpack("!Q", data[j : j + 8])[0], j + 8
        if j + n > len(data):
            break
        frames.append((opcode, data[j : j + n]))
        i = j + n
        if opcode == 0x8:
            body = data[j : j + n]
            return frames, struct.unpack("!H", body[:2])[0] if len(body) >= 2 else 1005, i
    return frames, None, i


# -- crafted HTTP requests --------------------------------------------------------

ROUTES = ("/", "/health", "/ws", "/v1/realtime")
UPGRADE = (
    b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
)


@dataclass(frozen=True)
class HttpCase:
    """A crafted request and what ``docs/protocol.md`` says it gets.

    ``expect``: a status; ``"4xx"`` where the documents name none but a
    client's fault is a 4xx (or no answer at all); ``None``: anything but a
    server error.
    """

    name: str
    route: str
    request: bytes
    expect: int | str | None
    half_close: bool = False  # the request is cut off: the client says no more (FIN)


def http_requests(port: int, token: str) -> list[HttpCase]:
    """Every case on every route (/, /health, /ws, /v1/realtime)."""
    own = f"127.0.0.1:{port}".encode()
    evil = f"evil.example:{port}".encode()
    auth = f"Authorization: Bearer {token}\r\n".encode()
    cases: list[HttpCase] = []
    for route in ROUTES:
        ws = route in ("/ws", "/v1/realtime")
        ok = 101 if ws else 200
        guarded = 401 if ws else 200  # the token guards the handshakes only
        checked = 403 if ws else 200  # and Origin is checked on the handshakes only
        host_checked = 200 if route == "/health" else 403  # health is for front doors and probes, by any name
        r = route.encode()
        up = UPGRADE if ws else b""

        def get(headers: bytes, path: bytes = r, version: bytes = b"HTTP/1.1", method: bytes = b"GET") -> bytes:
            return method + b" " + path + b" " + version + b"\r\n" + headers + up + b"\r\n"  # noqa: B023

        def add(name: str, request: bytes, expect: int | str | None, half_close: bool = False) -> None:
            cases.append(HttpCase(name, route, request, expect, half_close))  # noqa: B023

        host = b"Host: " + own + b"\r\n"
        origin = b"Origin: http://" + own + b"\r\n"
        plain = host + auth
        evil_host = b"Host: " + evil + b"\r\n"
        evil_origin = b"Origin: http://" + evil + b"\r\n"
        add("as a client sends it", get(plain + origin), ok)
        add("DNS rebinding: evil Host and Origin", get(evil_host + evil_origin + auth), host_checked)
        add("evil Host", get(evil_host + auth), host_checked)
        add("evil Origin", get(plain + evil_origin), checked)
        add("Origin at another port", get(plain + f"Origin: http://127.0.0.1:{port + 1}\r\n".encode()), checked)
        add("Origin 'null'", get(plain + b"Origin: null\r\n"), checked)
        add("Host at another port", get(f"Host: 127.0.0.1:{port + 1}\r\n".encode() + auth), host_checked)
        add("no Host", get(auth), host_checked)
        add("repeated Host", get(host + host + auth), host_checked)
        add("repeated Host, one evil", get(host + evil_host + auth), host_checked)
        add("repeated Origin", get(plain + origin + origin), checked)
        add("repeated Authorization", get(plain + b"Authorization: Bearer wrong\r\n"), guarded)
        add("no Authorization", get(host), guarded)
        add("Authorization: Basic", get(host + b"Authorization: Basic eDp5\r\n"), guarded)
        add(
            "Authorization, non-ASCII bytes",
            get(host + b"Authorization: Bearer " + token.encode() + b"\xe9\r\n"),
            guarded,
        )
        odd_host = b"Host: 127.0.0.1\xff:" + str(port).encode() + b"\r\n"
        add("Host with non-ASCII bytes", get(odd_host + auth), host_checked)
        add("Origin with non-ASCII bytes", get(plain + b"Origin: http://\xc3\xa9vil:1\r\n"), checked)
        add("a header with non-ASCII bytes", get(plain + b"X-Fuzz: \xff\xfe\x80abc\r\n"), None)
        add("a header with a NUL byte", get(plain + b"X-Fuzz: a\x00b\r\n"), None)
        add("a NUL byte in the path", get(plain, r + b"\x00"), None)
        add("a NUL byte in the query", get(plain, r + b"?a=\x00"), None)
        add("an 8,000-character path", get(plain, r.rstrip(b"/") + b"/" + b"a" * 8000), None)
        add("an 8,000-character query", get(plain, r + b"?q=" + b"a" * 8000), None)
        add("a 9,000-character path (over a line's limit)", get(plain, r.rstrip(b"/") + b"/" + b"a" * 9000), "4xx")
        add("200 headers", get(plain + b"".join(b"X-%d: y\r\n" % i for i in range(200))), "4xx")
        add("a 20 kB header", get(plain + b"X-Big: " + b"b" * 20_000 + b"\r\n"), "4xx")
        add("a folded header line", get(plain + b"X-Fold: a\r\n b\r\n"), None)
        add("HTTP/1.0", get(plain, version=b"HTTP/1.0"), "4xx")
        add("HTTP/2.0 in the request line", get(plain, version=b"HTTP/2.0"), "4xx")
        add("POST", get(plain, method=b"POST"), "4xx")
        add("absolute-form target at evil.example", get(plain, b"http://" + evil + r), None)
        add("Host with userinfo", get(b"Host: evil.example@" + own + b"\r\n" + auth), None)
        add("Host with a trailing dot", get(f"Host: localhost.:{port}\r\n".encode() + auth), None)
        add("Host with two ports", get(f"Host: 127.0.0.1:{port}:{port}\r\n".encode() + auth), host_checked)
        add("Host [::1] (allowed)", get(f"Host: [::1]:{port}\r\n".encode() + auth), ok)
        add("token twice in the query, the first wrong", get(host, r + f"?token=x&token={token}".encode()), guarded)
        add("token in the query, not UTF-8", get(host, r + b"?token=%ff%fe"), guarded)
        add("truncated request line", b"GET " + r[:2], None, half_close=True)
        add("truncated headers", b"GET " + r + b" HTTP/1.1\r\n" + host + b"Upgr", None, half_close=True)
        add("request without the blank line", get(plain)[:-2], None, half_close=True)
        if ws:
            key = b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            v13 = b"Sec-WebSocket-Version: 13\r\n"
            base = b"GET " + r + b" HTTP/1.1\r\n" + plain + b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
            add("no Sec-WebSocket-Key", base + v13 + b"\r\n", "4xx")
            add("a bad Sec-WebSocket-Key", base + b"Sec-WebSocket-Key: !!\r\n" + v13 + b"\r\n", "4xx")
            add("Sec-WebSocket-Version 8", base + key + b"Sec-WebSocket-Version: 8\r\n\r\n", "4xx")
            add("repeated Sec-WebSocket-Key", base + key + key + v13 + b"\r\n", "4xx")
            add("session of 10,000 characters", get(plain, r + b"?session=" + b"s" * 10_000), None)
            add("session: surrogate bytes", get(plain, r + b"?session=%ed%a0%80"), None)
        elif route == "/":
            for path in (b"/../transport/ws_server.py", b"/%2e%2e/transport/ws_server.py", b"//etc/passwd",
                         b"/..%2f..%2fREADME.md", b"/web/../../README.md", b"/index.html%00.png"):  # fmt: skip
                add(f"path traversal {path.decode()}", get(plain, path), 404)
    return cases


def status_matches(status: int | None, expect: int | str | None) -> bool:
    """Whether an answer (None: none, the connection closed) is what the case expects."""
    if isinstance(expect, int):
        return status == expect
    if expect == "4xx":
        return status is None or 400 <= status < 500
    return status is None or status < 500
