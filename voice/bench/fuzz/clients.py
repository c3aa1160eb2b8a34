"""What the clients saw (a tally by category) and the target they attack; the one real session held meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from voice.bench.common import ROOT
from voice.bench.fuzz.messages import PATHS, PROBE_RE, REALTIME, WS, WS_HELLO, Fuzz
from voice.bench.fuzz.server import TOKEN, Server

PROBE_TIMEOUT_S = 10.0  # a probe not answered in this long: the connection is counted as hung and dropped


# -- what the clients saw ------------------------------------------------------------


# Every message of these categories is wrong in a documented field: each should get an error.
MUST_BE_REFUSED = ("wrong_field_type", "huge_number", "lone_surrogate", "base64_garbage")


@dataclass
class Tally:
    """Every count the report is made of."""

    sent: Counter[tuple[str, str]] = field(default_factory=Counter)  # (category, dialect) -> messages
    items: Counter[tuple[str, str]] = field(default_factory=Counter)  # (category, dialect) -> cases (a flood: 1)
    # (category, dialect) -> outcome ("error:CODE", "close:CODE", "event:TYPE", ...) -> how often
    answers: defaultdict[tuple[str, str], Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    codes: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))  # dialect -> code
    # (phase, dialect) -> the close code the server sent (1006: none) -> how often
    closes: defaultdict[tuple[str, str], Counter[int | str]] = field(default_factory=lambda: defaultdict(Counter))
    # (category, dialect, outcome) -> a few of the messages that got it
    examples: defaultdict[tuple[str, str, str], list[str]] = field(default_factory=lambda: defaultdict(list))
    connections: Counter[str] = field(default_factory=Counter)  # dialect -> connections the message fuzz opened
    refused: Counter[int | str] = field(default_factory=Counter)  # handshake statuses when (re)connecting
    probes: int = 0
    # Malformed on purpose, answered with neither an error nor a close: (category, dialect) -> notes
    accepted: defaultdict[tuple[str, str], list[str]] = field(default_factory=lambda: defaultdict(list))

    def answer(self, item: Fuzz, outcome: Counter[str]) -> None:
        key = (item.category, item.dialect)
        self.sent[key] += item.messages
        self.items[key] += 1
        if not outcome:
            outcome = Counter({"no answer (accepted)": 1})
        self.answers[key].update(outcome)
        if item.category in MUST_BE_REFUSED and not any(o.startswith(("error:", "close:")) for o in outcome):
            self.accepted[key].append(item.note)
        for what in outcome:
            if what.startswith(("close", "hung", "reset", "unreadable")):
                examples = self.examples[(item.category, item.dialect, what)]
                if len(examples) < 4:
                    examples.append(item.note)


def close_code(e: ConnectionClosed) -> int:
    """The code the server closed with; 1006 when it sent no close frame (the connection dropped)."""
    return e.rcvd.code if e.rcvd is not None else 1006


def classify(dialect: str, message: str | bytes) -> tuple[str, int | None]:
    """What a server message says: ``error:CODE``, ``event:TYPE`` or ``audio``; and the probe it answers, if one."""
    if isinstance(message, bytes):
        return "audio", None
    try:
        m = json.loads(message)
    except ValueError:
        return "unreadable reply", None
    if not isinstance(m, dict):
        return "unreadable reply", None
    if m.get("type") != "error":
        return f"event:{m.get('type')}", None
    body = m if dialect == WS else (m.get("error") or {})
    code, text = body.get("code"), str(body.get("message"))
    if code == "unknown_type" and (p := PROBE_RE.search(text)):
        return "probe", int(p.group(1))
    return f"error:{code}", None


class Target:
    """Where the server is, and how a client of each dialect opens a session there."""

    def __init__(self, server: Server, tally: Tally) -> None:
        self.server = server
        self.port = server.port
        self.tally = tally
        self.headers = {"Authorization": f"Bearer {TOKEN}"}

    def url(self, dialect: str) -> str:
        return f"ws://127.0.0.1:{self.port}{PATHS[dialect]}"

    def connect(self, dialect: str, close_timeout: float | None = 10) -> Any:
        """A bare WebSocket handshake to ``dialect``'s path (awaitable), as every attack opens one."""
        return connect(
            self.url(dialect),
            additional_headers=self.headers,
            max_size=None,
            compression=None,
            open_timeout=15,
            close_timeout=close_timeout,
            ping_interval=None,
        )

    async def open(self, dialect: str, hello: bool = True, attempts: int = 50) -> ClientConnection:
        """A connection with its session started (``/ws``: ``hello`` answered unless ``hello`` is False).

        A refusal (the cap, while closed sessions wind down) is counted and retried.
        """
        for attempt in range(attempts):
            try:
                ws = await self.connect(dialect, close_timeout=2)
            except InvalidStatus as e:
                self.tally.refused[e.response.status_code] += 1
            except (OSError, InvalidHandshake, TimeoutError) as e:
                self.tally.refused[type(e).__name__] += 1
                if not self.server.alive():
                    raise ServerGone from e
            else:
                if dialect == REALTIME:
                    await _until(ws, dialect, "event:session.created")
                elif hello:
                    await ws.send(WS_HELLO)
                    await _until(ws, dialect, "event:ready")
                return ws
            await asyncio.sleep(min(0.05 * (attempt + 1), 1.0))
        raise ServerGone(f"no session on {dialect} after {attempts} attempts")


class ServerGone(Exception):
    """The server stopped answering: the run reports what it has."""


async def _until(ws: ClientConnection, dialect: str, kind: str, timeout_s: float = 15) -> None:
    async with asyncio.timeout(timeout_s):
        while classify(dialect, await ws.recv())[0] != kind:
            pass


async def _close(ws: ClientConnection | None) -> None:
    if ws is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.close(), 3)


# -- the real session ------------------------------------------------------------------------


# transport.client's command line stops listening 1.5 s after the last event; under attack the final
# transcript can come later than that, so the real client is run with a longer patience (quiet_s).
REAL_CLIENT = """
import asyncio, json, sys
from transport.client import talk
from transport.files import load_audio
url, wav, token, out = sys.argv[1:5]
r = asyncio.run(talk(url, load_audio(wav), headers={"Authorization": f"Bearer {token}"}, quiet_s=8.0))
json.dump({"events": r.events, "playback_start_s": r.playback_start_s(), "close_code": r.close_code}, open(out, "w"))
"""


async def real_session(target: Target, recording: Any, out: Path) -> dict[str, Any]:
    """``transport.client.talk`` says the recording, in a process of its own: WER, reply, voice-to-voice."""
    from voice.bench.scoring import word_error_rate

    cmd = [sys.executable, "-c", REAL_CLIENT, target.url(WS), str(recording.path), TOKEN, str(out)]
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    printed = (await proc.communicate())[0].decode(errors="replace")
    took = round(time.monotonic() - t0, 1)
    if proc.returncode != 0 or not out.exists():
        return {"ok": False, "exit_code": proc.returncode, "output": printed[-2000:], "took_s": took}
    result = json.loads(out.read_text())
    events = result["events"]
    heard = " ".join(e["text"] for e in events if e["type"] == "transcript_final" and e["text"])
    replies = [e["text"] for e in events if e["type"] == "turn_end"]
    ends = [e for e in events if e["type"] == "speech_end"]
    finals = [e for e in events if e["type"] == "transcript_final"]
    start = result["playback_start_s"]
    return {
        "ok": bool(heard and replies),
        "recording": recording.name,
        "reference": recording.transcript,
        "transcript": heard,
        "wer": round(word_error_rate(recording.transcript, heard), 3),
        "reply": " / ".join(replies),
        # end of speech to the final transcript at the client, and to the reply's first sound out of its speaker
        "endpoint_to_final_s": round(finals[0]["client_t"] - ends[0]["client_t"], 3) if ends and finals else None,
        "voice_to_voice_s": round(start - ends[0]["end"], 3) if ends and start is not None else None,
        "errors": [e.get("code") for e in events if e["type"] == "error"],
        "close_code": result["close_code"],
        "took_s": took,
    }
