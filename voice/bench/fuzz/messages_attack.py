"""Attack 1: malformed messages on open sessions of both dialects, and connect/close cycles."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import struct
import time
from collections import Counter
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from voice.bench.common import nearest_rank
from voice.bench.fuzz.clients import PROBE_TIMEOUT_S, Target, _close, _until, classify, close_code
from voice.bench.fuzz.messages import PATHS, REALTIME, REALTIME_TEMPLATES, WS, WS_HELLO, Fuzz, probe
from voice.bench.fuzz.raw import frame
from voice.bench.fuzz.sockets import HandshakeRefused, raw_handshake, read_until_close

# -- 1. malformed messages -----------------------------------------------------------


class MessageFuzzer:
    """One dialect's share of the corpus, one case at a time, each followed by a probe."""

    def __init__(self, target: Target, dialect: str) -> None:
        self.target = target
        self.tally = target.tally
        self.dialect = dialect
        # fresh (before hello, /ws only)? -> the connection such messages go on
        self.conns: dict[bool, ClientConnection | None] = {False: None, True: None}
        self.probe = 0

    async def connection(self, fresh: bool) -> ClientConnection:
        fresh = fresh and self.dialect == WS
        ws = self.conns[fresh]
        if ws is None:
            ws = await self.target.open(self.dialect, hello=not fresh)
            self.tally.connections[self.dialect] += 1
            self.conns[fresh] = ws
        return ws

    async def run(self, items: list[Fuzz]) -> None:
        try:
            for item in items:
                outcome = await (self.send_raw(item) if item.raw else self.send(item))
                self.tally.answer(item, outcome)
        finally:
            for ws in self.conns.values():
                await _close(ws)

    async def send(self, item: Fuzz) -> Counter:
        fresh = item.fresh and self.dialect == WS
        ws = await self.connection(fresh)
        self.probe += 1
        self.tally.probes += 1
        outcome: Counter = Counter()
        try:
            for f in item.frames:
                await ws.send(f)
            await ws.send(probe(self.probe))
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                while True:
                    kind, answered = classify(self.dialect, await ws.recv())
                    if kind == "probe":
                        if answered == self.probe:
                            break
                        continue  # a late answer to an earlier probe
                    outcome[kind] += 1
                    if kind.startswith("error:"):
                        self.tally.codes[self.dialect][kind[6:]] += 1
                    if kind == "event:ready" and fresh:  # the hello was good: this connection is past it now
                        await _close(self.conns[False])
                        self.conns[False], self.conns[True] = ws, None
                        fresh = False
        except ConnectionClosed as e:
            code = close_code(e)
            outcome[f"close:{code}"] += 1
            self.tally.closes[("messages", self.dialect)][code] += 1
            self.conns[fresh] = None
        except TimeoutError:
            outcome[f"hung: probe not answered in {PROBE_TIMEOUT_S:g} s"] += 1
            self.conns[fresh] = None
            await _close(ws)
        return outcome

    async def send_raw(self, item: Fuzz) -> Counter:
        """Frame-level abuse on a connection of its own (after hello on /ws), then a probe; how it ended."""
        self.probe += 1
        outcome: Counter = Counter()
        try:
            sock, pending = await raw_handshake(self.target.port, PATHS[self.dialect])
        except (OSError, HandshakeRefused, TimeoutError) as e:
            return Counter({f"handshake failed: {e}": 1})
        self.tally.connections[self.dialect] += 1
        loop = asyncio.get_running_loop()
        try:
            if self.dialect == WS:
                await loop.sock_sendall(sock, frame(0x1, WS_HELLO.encode()))
            for f in item.frames:
                await loop.sock_sendall(sock, f if isinstance(f, bytes) else frame(0x1, f.encode()))
            await loop.sock_sendall(sock, frame(0x1, probe(self.probe).encode()))
            code, kinds = await read_until_close(sock, pending, self.dialect, stop_at_probe=self.probe)
            for kind in kinds:
                if kind in ("event:ready", "event:session.created"):
                    continue  # the answer to the handshake (and hello) before the abuse
                outcome[kind] += 1
                if kind.startswith("error:"):
                    self.tally.codes[self.dialect][kind[6:]] += 1
            if code is not None:
                outcome[f"close:{code}"] += 1
                self.tally.closes[("frames", self.dialect)][code] += 1
            elif "probe" not in kinds:
                outcome["hung: probe not answered"] += 1
        except OSError as e:
            outcome[f"reset: {type(e).__name__}"] += 1
            self.tally.closes[("frames", self.dialect)][1006] += 1
        finally:
            outcome.pop("probe", None)
            with contextlib.suppress(OSError):
                await loop.sock_sendall(sock, frame(0x8, struct.pack("!H", 1000)))
            sock.close()
        return outcome


# -- 1b. connect/close cycles --------------------------------------------------------------

CYCLE_KINDS = (
    (WS, "close after the handshake"),
    (WS, "close after hello"),
    (WS, "close after audio"),
    (REALTIME, "close after the handshake"),
    (REALTIME, "close after session.update"),
    (REALTIME, "close after audio"),
)


async def cycles(target: Target, n: int, seed: int, parallel: int = 2) -> dict[str, Any]:
    """``n`` connections opened and closed at once or after a step of the session, the dialects and steps mixed."""
    order = [CYCLE_KINDS[i % len(CYCLE_KINDS)] for i in range(n)]
    random.Random(seed).shuffle(order)
    results: dict[tuple[str, str], dict[str, Any]] = {k: {"n": 0, "outcomes": Counter(), "ms": []} for k in CYCLE_KINDS}
    queue = list(reversed(order))
    silence_ws, silence_rt = (
        bytes(640),
        json.dumps(
            {
                "type": "input_audio_buffer.append",
                "audio": REALTIME_TEMPLATES["input_audio_buffer.append"]["audio"],
            }
        ),
    )

    async def one(dialect: str, kind: str) -> str:
        try:
            ws = await target.connect(dialect, close_timeout=5)
        except InvalidStatus as e:
            return f"refused {e.response.status_code}"
        except (OSError, InvalidHandshake, TimeoutError) as e:
            return f"refused: {type(e).__name__}"
        try:
            if kind == "close after hello" or (dialect == WS and kind == "close after audio"):
                await ws.send(WS_HELLO)
                await _until(ws, dialect, "event:ready")
            if kind == "close after session.update":
                await ws.send(json.dumps(REALTIME_TEMPLATES["session.update"]))
                await _until(ws, dialect, "event:session.updated")
            if kind == "close after audio":
                for _ in range(10):
                    await ws.send(silence_ws if dialect == WS else silence_rt)
            await asyncio.wait_for(ws.close(), 10)
            code = ws.close_code
        except ConnectionClosed as e:
            code = close_code(e)
        except TimeoutError:
            code = 1006
        target.tally.closes[("cycles", dialect)][code if code is not None else 1006] += 1
        return f"closed {code}"

    async def worker() -> None:
        while queue:
            dialect, kind = queue.pop()
            t0 = time.monotonic()
            outcome = await one(dialect, kind)
            r = results[(dialect, kind)]
            r["n"] += 1
            r["outcomes"][outcome] += 1
            r["ms"].append((time.monotonic() - t0) * 1000)

    await asyncio.gather(*(worker() for _ in range(parallel)))
    return {
        f"{d} {k}": {
            "n": r["n"],
            "outcomes": dict(r["outcomes"]),
            "p50_ms": nearest_rank(r["ms"], 0.5),
            "max_ms": nearest_rank(r["ms"], 1.0),
        }
        for (d, k), r in results.items()
    }
