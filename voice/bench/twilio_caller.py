"""A caller as Twilio's Media Streams makes one, written from Twilio's published message formats:
``connected``, ``start``, the caller's ``media`` (mu-law at 8 kHz, 20 ms a frame, in real time),
the reply played in real time with each ``mark`` echoed once the audio before it has played,
``clear`` honoured, ``dtmf`` for a key pressed, and ``stop`` to hang up. For the tests of
``/telephony/twilio``. What the caller does is a script of steps (:class:`Say`, :class:`Listen`...)."""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass

import numpy as np
import soxr
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from core.audio import ASR_RATE
from transport import g711

SID = "MZ18ad3ab5a668481ce02b83e7395059f0"
START = {
    "event": "start",
    "sequenceNumber": "1",
    "start": {
        "accountSid": "AC123",
        "streamSid": SID,
        "callSid": "CA456",
        "tracks": ["inbound"],
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        "customParameters": {"caller": "+15550100"},
    },
    "streamSid": SID,
}


def media(samples_8k: np.ndarray, n: int = 2) -> str:
    payload = base64.b64encode(g711.encode(samples_8k)).decode()
    chunk = {"track": "inbound", "chunk": str(n), "timestamp": str(20 * n), "payload": payload}
    return json.dumps({"event": "media", "sequenceNumber": str(n + 1), "media": chunk, "streamSid": SID})


def mark(name: str) -> str:
    return json.dumps({"event": "mark", "sequenceNumber": "9", "streamSid": SID, "mark": {"name": name}})


# -- a call over a real WebSocket ------------------------------------------------------------


def to_8k(audio_16k: np.ndarray) -> np.ndarray:
    return soxr.resample(audio_16k, ASR_RATE, 8000).astype(np.float32)


@dataclass(frozen=True)
class Say:
    audio: np.ndarray  # 8 kHz


@dataclass(frozen=True)
class SayOver:
    """Silence until ``after_s`` of the reply now being played has played, then ``audio`` over it."""

    audio: np.ndarray
    after_s: float


@dataclass(frozen=True)
class Listen:
    """Silence until a reply begun during this step has played out (no audio for 1.5 s), ``max_s`` at most."""

    max_s: float


@dataclass(frozen=True)
class Quiet:
    """Silence for ``seconds``, whatever is said (the server may hang up meanwhile)."""

    seconds: float


@dataclass(frozen=True)
class Press:
    digit: str


Step = Say | SayOver | Listen | Quiet | Press


async def call(
    port: int,
    caller: np.ndarray | None = None,
    hear_s: float | None = None,
    interrupt: tuple[np.ndarray, float] | None = None,
    tail_s: float = 0.0,
    greeted: bool = False,
    steps: list[Step] | None = None,
    parameters: dict[str, str] | None = None,
    timing: dict[str, float] | None = None,
) -> list[dict]:
    """Dial in to the server on ``port`` and play the reply as Twilio does: each chunk after the
    ones before it, in real time, its mark echoed once it has played; at a ``clear`` the queue
    is dropped and the pending marks are echoed at once (as Twilio does, played or not). With
    ``hear_s``, no mark is echoed past that much reply audio.

    What the caller does: ``steps``; or, shorter, with ``greeted`` listen to the greeting first,
    say ``caller`` (8 kHz) in real time, with ``interrupt=(speech, after_s)`` say ``speech`` over
    the reply once ``after_s`` of it has played, then listen for ``tail_s`` at most (until a
    reply has played out). Then hang up (``stop``), unless the server did. ``parameters``: the
    stream's custom parameters. ``timing`` is given ``first_sent`` and ``first_media``: when
    the caller's first frame went and the reply's first audio came (the loop's clock), and
    ``said_over_at``: where on the caller's stream (seconds of audio sent) the speech over the
    reply began. Returns
    what the server sent."""
    if steps is None:
        assert caller is not None
        steps = [Listen(15.0)] if greeted else []
        steps += [Say(caller)] + ([SayOver(*interrupt)] if interrupt else []) + [Listen(tail_s)]
    start = json.loads(json.dumps(START))
    if parameters is not None:
        start["start"]["customParameters"] = parameters
    received: list[dict] = []
    async with connect(f"ws://127.0.0.1:{port}/telephony/twilio") as ws:
        await ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        await ws.send(json.dumps(start))
        loop = asyncio.get_running_loop()
        state = {"samples": 0, "played_until": 0.0, "last_media": 0.0}
        pending: list[tuple[float, str]] = []  # (when it will have played, mark name)

        async def listen() -> None:
            async for message in ws:
                m = json.loads(message)
                received.append(m)
                now = loop.time()
                if m["event"] == "media":
                    if timing is not None:
                        timing.setdefault("first_media", now)
                    n = len(base64.b64decode(m["media"]["payload"]))
                    state["samples"] += n
                    state["played_until"] = max(state["played_until"], now) + n / 8000
                    state["last_media"] = now
                elif m["event"] == "mark":
                    if hear_s is None or state["samples"] <= hear_s * 8000:
                        pending.append((state["played_until"], m["mark"]["name"]))
                elif m["event"] == "clear":
                    state["played_until"] = now
                    for _, name in pending:
                        await ws.send(mark(name))
                    pending.clear()

        async def play() -> None:
            while True:
                while pending and pending[0][0] <= loop.time():
                    await ws.send(mark(pending.pop(0)[1]))
                await asyncio.sleep(0.005)

        tasks = [asyncio.create_task(listen()), asyncio.create_task(play())]
        t0, frame = loop.time(), 0
        silence = np.zeros(160, np.float32)

        async def send_frame(chunk: np.ndarray) -> None:
            nonlocal frame
            if timing is not None:
                timing.setdefault("first_sent", loop.time())
            await ws.send(media(chunk, frame))
            frame += 1
            await asyncio.sleep(max(0.0, t0 + frame * 0.02 - loop.time()))

        try:
            for step in steps:
                began, base = loop.time(), state["samples"]
                if isinstance(step, Say):
                    for pos in range(0, len(step.audio), 160):
                        await send_frame(step.audio[pos : pos + 160])
                elif isinstance(step, SayOver):
                    while (state["samples"] - base) / 8000 - max(
                        0.0, state["played_until"] - loop.time()
                    ) < step.after_s:
                        await send_frame(silence)
                        if loop.time() - began > 30:
                            raise AssertionError("the reply never played long enough to be interrupted")
                    if timing is not None:
                        timing.setdefault("said_over_at", frame * 0.02)
                    for pos in range(0, len(step.audio), 160):
                        await send_frame(step.audio[pos : pos + 160])
                elif isinstance(step, Listen):
                    while loop.time() - began < step.max_s:
                        await send_frame(silence)
                        now = loop.time()
                        answered = state["last_media"] > began  # a reply to what was said last
                        if answered and now - state["last_media"] > 1.5 and state["played_until"] < now and not pending:
                            break
                elif isinstance(step, Quiet):
                    while loop.time() - began < step.seconds:
                        await send_frame(silence)
                elif isinstance(step, Press):
                    dtmf = {"track": "inbound_track", "digit": step.digit}
                    await ws.send(json.dumps({"event": "dtmf", "streamSid": SID, "sequenceNumber": "7", "dtmf": dtmf}))
            await ws.send(json.dumps({"event": "stop", "streamSid": SID, "stop": {"callSid": "CA456"}}))
            await asyncio.sleep(0.3)
        except ConnectionClosed:
            pass  # the server hung up
        for task in tasks:
            task.cancel()
    return received
