"""Attack 2: slowloris, crafted HTTP, resets and clients that never read; attack 3: the session cap."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from voice.bench.common import nearest_rank
from voice.bench.fuzz.clients import ServerGone, Target, _close, _until, classify, close_code
from voice.bench.fuzz.messages import PATHS, REALTIME, REALTIME_TEMPLATES, WS, WS_HELLO, probe
from voice.bench.fuzz.raw import HttpCase, frame, http_requests, status_matches
from voice.bench.fuzz.server import TOKEN
from voice.bench.fuzz.sockets import (
    TCP_ESTABLISHED,
    HandshakeRefused,
    raw_handshake,
    read_until_close,
    reset,
    tcp_state,
)

# -- 2. abuse: slowloris, crafted HTTP, resets, clients that never read ---------------------


async def slowloris(target: Target, n: int, window_s: float) -> dict[str, Any]:
    """``n`` handshakes that never finish (a header line a second), and whether others are served meanwhile."""
    closed_after: list[float] = []
    answers: Counter = Counter()

    async def stall(i: int) -> None:
        t0 = time.monotonic()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", target.port)
        except OSError as e:
            answers[f"not connected: {type(e).__name__}"] += 1
            return
        try:
            writer.write(f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{target.port}\r\n".encode())
            line = 0
            while time.monotonic() - t0 < window_s:
                try:
                    data = await asyncio.wait_for(reader.read(1024), 1.0)
                except TimeoutError:
                    writer.write(f"X-Slow-{line}: {i}\r\n".encode())  # one more header, never the blank line
                    line += 1
                    continue
                closed_after.append(time.monotonic() - t0)
                answers[data.split(b"\r\n", 1)[0].decode(errors="replace") if data else "closed, no answer"] += 1
                return
            answers[f"still open after {window_s:g} s"] += 1
        except OSError as e:
            closed_after.append(time.monotonic() - t0)
            answers[f"reset ({type(e).__name__})"] += 1
        finally:
            writer.close()

    async def meanwhile() -> dict[str, Any]:
        await asyncio.sleep(3)  # every stalled handshake is open by now
        t0 = time.monotonic()
        health = await asyncio.to_thread(target.server.health)
        health_ms = round((time.monotonic() - t0) * 1000, 1)
        t0 = time.monotonic()
        try:
            ws = await target.open(REALTIME, attempts=1)
            await _close(ws)
            session = f"served in {(time.monotonic() - t0) * 1000:.0f} ms"
        except (ServerGone, OSError, TimeoutError) as e:
            session = f"not served: {e}"
        return {"health": health, "health_ms": health_ms, "a new session": session}

    stalls = [stall(i) for i in range(n)]
    *_, served = await asyncio.gather(*stalls, meanwhile())
    return {
        "handshakes": n,
        "answers": dict(answers),
        "closed_after_s_p50": nearest_rank(closed_after, 0.5),
        "closed_after_s_max": nearest_rank(closed_after, 1.0),
        "served_meanwhile": served,
    }


async def crafted_http(target: Target) -> dict[str, Any]:
    """Every crafted request on a connection of its own: the status, against what the documents say."""
    gate = asyncio.Semaphore(4)  # a few at a time: one the server holds on to does not hold up the rest

    async def one(case: HttpCase) -> dict[str, Any]:
        async with gate:
            status, note = await _http(target.port, case)
        return {
            "case": case.name,
            "route": case.route,
            "status": status,
            "note": note,
            "expected": case.expect,
            "as_documented": status_matches(status, case.expect),
        }

    results = await asyncio.gather(*(one(c) for c in http_requests(target.port, TOKEN)))
    statuses = Counter(str(r["status"] if r["status"] is not None else r["note"]) for r in results)
    return {"requests": len(results), "statuses": dict(statuses.most_common()), "results": results}


async def _http(port: int, case: HttpCase) -> tuple[int | None, str]:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as e:
        return None, f"not connected: {type(e).__name__}"
    try:
        writer.write(case.request)
        if case.half_close:
            writer.write_eof()
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 15)
        if not line:
            return None, "closed without an answer"
        parts = line.split()
        return (int(parts[1]), "") if len(parts) > 1 and parts[1].isdigit() else (None, f"not HTTP: {line[:40]!r}")
    except TimeoutError:
        return None, "no answer in 15 s"
    except OSError as e:
        return None, f"reset ({type(e).__name__})"
    finally:
        writer.transport.abort()


async def resets(target: Target, per_kind: int) -> dict[str, Any]:
    """TCP resets at the worst moments: mid-handshake, mid-frame, mid-message, while the server sends."""
    loop = asyncio.get_running_loop()
    port = target.port
    update = REALTIME_TEMPLATES["session.update"]
    big = json.dumps({**update, "session": {**update["session"], "instructions": "word " * 100_000}}).encode()

    async def mid_handshake() -> None:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: webs".encode())
        reset(sock)

    async def mid_binary_frame() -> None:
        sock, _ = await raw_handshake(port, "/ws")
        await loop.sock_sendall(sock, frame(0x1, WS_HELLO.encode()))
        await loop.sock_sendall(sock, frame(0x2, bytes(60_000))[:20_000])
        reset(sock)

    async def mid_text_message() -> None:
        sock, _ = await raw_handshake(port, "/v1/realtime")
        await loop.sock_sendall(sock, frame(0x1, big)[: len(big) // 2])
        reset(sock)

    async def while_the_server_sends() -> None:
        sock, _ = await raw_handshake(port, "/v1/realtime")
        await loop.sock_sendall(sock, frame(0x1, big))  # answered with its 500 kB echo
        await asyncio.sleep(0.05)
        reset(sock)

    async def after_audio() -> None:
        sock, _ = await raw_handshake(port, "/ws")
        await loop.sock_sendall(sock, frame(0x1, WS_HELLO.encode()))
        for _ in range(10):
            await loop.sock_sendall(sock, frame(0x2, bytes(640)))
        reset(sock)

    kinds: dict[str, Callable[[], Awaitable[None]]] = {
        "mid-handshake": mid_handshake,
        "mid-binary-frame (/ws)": mid_binary_frame,
        "mid-text-message (/v1/realtime)": mid_text_message,
        "while the server sends (/v1/realtime)": while_the_server_sends,
        "after audio, no close (/ws)": after_audio,
    }
    done: Counter = Counter()
    failed: Counter = Counter()
    for _ in range(per_kind):
        for name, attack in kinds.items():
            try:
                await attack()
                done[name] += 1
            except (OSError, HandshakeRefused, TimeoutError) as e:
                failed[f"{name}: {type(e).__name__} {e}"[:120]] += 1
    await asyncio.sleep(1)
    return {"resets": dict(done), "could_not_attack": dict(failed), "health_after": target.server.health()}


async def non_readers(target: Target, messages_ws: int, updates_rt: int, wait_s: float) -> list[dict[str, Any]]:
    """Clients that keep sending, and read nothing, while the server answers: are they dropped, and when?

    The documents say such a client is sent ``slow_client`` and closed with
    1008 once it is 10 s behind. Its TCP state is watched without reading
    (the kernel's, from TCP_INFO); at the end what the server had sent is read
    to find the close frame it queued.
    """
    loop = asyncio.get_running_loop()
    update = REALTIME_TEMPLATES["session.update"]
    echo = json.dumps({**update, "session": {**update["session"], "instructions": "word " * 180_000}}).encode()
    held: list[float | None] = []

    async def one(dialect: str) -> dict[str, Any]:
        try:
            sock, _ = await raw_handshake(target.port, PATHS[dialect], rcvbuf=4096)
        except (OSError, HandshakeRefused, TimeoutError) as e:
            return {"dialect": dialect, "outcome": f"no handshake: {e}"}
        t0 = time.monotonic()
        sent = 0
        try:
            if dialect == WS:  # each one answered with an error (~150 bytes): megabytes the client never reads
                await loop.sock_sendall(sock, frame(0x1, WS_HELLO.encode()))
                unknown = frame(0x1, json.dumps({"type": "x" * 40}).encode())
                for i in range(0, messages_ws, 1000):
                    await loop.sock_sendall(sock, unknown * min(1000, messages_ws - i))
                    sent += min(1000, messages_ws - i)
            else:  # each one answered with session.updated, which repeats the 900 kB instructions
                for _ in range(updates_rt):
                    await loop.sock_sendall(sock, frame(0x1, echo))
                    sent += 1
        except OSError as e:
            reset(sock)
            return {
                "dialect": dialect,
                "sent": sent,
                "outcome": f"dropped while sending ({type(e).__name__})",
                "dropped_after_s": round(time.monotonic() - t0, 1),
            }
        sent_s = time.monotonic() - t0
        dropped_at = None
        while time.monotonic() - t0 < sent_s + wait_s:  # reading nothing
            if tcp_state(sock) != TCP_ESTABLISHED:
                dropped_at = time.monotonic() - t0
                break
            await asyncio.sleep(0.25)
        if not held:
            held.append(target.server.metric("voice_sessions_active"))
        waited = time.monotonic() - t0
        code, _ = await read_until_close(sock, b"", dialect, timeout_s=5)  # now read: what had it queued?
        reset(sock)
        if dropped_at is None:
            read = "reset before a close frame" if code == 1006 else f"close frame {code}"
            outcome = f"still connected after {waited:.0f} s; once read: {read}"
        else:
            outcome = f"dropped after {dropped_at:.1f} s (close frame: {code})"
        target.tally.closes[("non-readers", dialect)][code if code is not None else "none"] += 1
        return {
            "dialect": dialect,
            "sent": sent,
            "sending_s": round(sent_s, 1),
            "outcome": outcome,
            "dropped_after_s": round(dropped_at, 1) if dropped_at else None,
            "close_frame": code,
        }

    results = list(await asyncio.gather(one(WS), one(REALTIME), one(WS), one(REALTIME)))
    for r in results:
        r["sessions_open_at_the_end_of_the_wait"] = held[0] if held else None
    return results


# -- 3. the session cap --------------------------------------------------------------------


async def wait_idle(target: Target, timeout_s: float = 30, below: int = 1) -> float | None:
    """Wait until the server counts fewer than ``below`` sessions open; the count it was left at."""
    deadline = time.monotonic() + timeout_s
    active = target.server.metric("voice_sessions_active")
    while active is not None and active >= below and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        active = target.server.metric("voice_sessions_active")
    return active


async def session_cap(target: Target, cap: int) -> dict[str, Any]:
    """Fill the server to its cap, knock beyond it, race for a freed slot, then check the slots come back."""
    active_before = await wait_idle(target)
    held: list[tuple[str, ClientConnection]] = []
    beyond: Counter = Counter()
    for i in range(cap + 10):
        dialect = (WS, REALTIME)[i % 2]
        try:
            ws = await target.connect(dialect)
        except InvalidStatus as e:
            beyond[e.response.status_code] += 1
            continue
        except (OSError, InvalidHandshake, TimeoutError) as e:
            beyond[type(e).__name__] += 1
            continue
        try:
            if dialect == WS:
                await ws.send(WS_HELLO)
                await _until(ws, dialect, "event:ready")
            else:
                await _until(ws, dialect, "event:session.created")
            held.append((dialect, ws))
        except (ConnectionClosed, TimeoutError) as e:
            beyond[f"closed {close_code(e) if isinstance(e, ConnectionClosed) else 'timeout'}"] += 1
    # Every held session still answers.
    answering = 0
    for n, (dialect, ws) in enumerate(held):
        with contextlib.suppress(ConnectionClosed, TimeoutError):
            await ws.send(probe(10**6 + n))
            async with asyncio.timeout(5):
                while classify(dialect, await ws.recv())[0] != "probe":
                    pass
            answering += 1
    filled = len(held)
    # One slot freed, six clients race for it.
    race: Counter = Counter()
    if held:
        await _close(held.pop()[1])
        await wait_idle(target, 5, below=len(held) + 1)

        async def racer(dialect: str) -> None:
            try:
                ws = await target.connect(dialect)
                if dialect == WS:
                    await ws.send(WS_HELLO)
                await _until(ws, dialect, "event:ready" if dialect == WS else "event:session.created")
            except InvalidStatus as e:
                race[f"refused {e.response.status_code}"] += 1
            except ConnectionClosed as e:
                race[f"closed {close_code(e)}"] += 1
            except (OSError, InvalidHandshake, TimeoutError) as e:
                race[type(e).__name__] += 1
            else:
                race["served"] += 1
                held.append((dialect, ws))

        await asyncio.gather(*(racer((WS, REALTIME)[i % 2]) for i in range(6)))
    for _, ws in held:
        await _close(ws)
    left = await wait_idle(target)
    t0 = time.monotonic()
    try:
        await _close(await target.open(WS, attempts=3))
        after = f"served ({(time.monotonic() - t0) * 1000:.0f} ms)"
    except ServerGone as e:
        after = f"not served: {e}"
    return {
        "max_sessions": cap,
        "open_before": active_before,
        "held": filled,
        "beyond_the_cap": dict(beyond),
        "held_sessions_answering": answering,
        "race_for_one_slot": dict(race),
        "open_after_closing_all": left,
        "a_session_after": after,
    }
