"""A caller as Twilio's Media Streams makes one, written from Twilio's published message formats:
``connected``, ``start``, the caller's ``media`` (mu-law at 8 kHz, 20 ms a frame, in real time),
the reply played in real time with each ``mark`` echoed once the audio before it has played,
``clear`` honoured, and ``stop`` to hang up. For the tests of ``/telephony/twilio``."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import soxr
from websockets.asyncio.client import connect

from transport import g711
from voice.core.audio import ASR_RATE

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


async def call(
    port: int,
    caller: np.ndarray,
    hear_s: float | None = None,
    interrupt: tuple[np.ndarray, float] | None = None,
    tail_s: float = 0.0,
) -> list[dict]:
    """Dial in to the server on ``port``, say ``caller`` (8 kHz) in real time, and play the reply
    as Twilio does: each chunk after the ones before it, in real time, its mark echoed once it
    has played; at a ``clear`` the queue is dropped and the pending marks are echoed at once (as
    Twilio does, played or not). With ``hear_s``, no mark is echoed past that much reply.
    ``interrupt=(speech, after_s)``: once ``after_s`` of reply has played, say ``speech`` over
    it. After the caller's audio, silence until a reply to it has played out (no audio for 1.5 s)
    or ``tail_s`` has passed; then hangs up (``stop``). Returns what the server sent."""
    received: list[dict] = []
    async with connect(f"ws://127.0.0.1:{port}/telephony/twilio") as ws:
        await ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        await ws.send(json.dumps(START))
        loop = asyncio.get_running_loop()
        state = {"samples": 0, "played_until": 0.0, "last_media": 0.0, "tail_start": 0.0}
        pending: list[tuple[float, str]] = []  # (when it will have played, mark name)

        async def listen() -> None:
            async for message in ws:
                m = json.loads(message)
                received.append(m)
                now = loop.time()
                if m["event"] == "media":
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

        def played_s() -> float:
            return state["samples"] / 8000 - max(0.0, state["played_until"] - loop.time())

        # What the caller says, frame by frame: their audio; with an interruption, silence until
        # enough reply has played, then the interruption; then ``tail_s`` of silence.
        t0, frame, pos, phase, waited = loop.time(), 0, 0, "caller", 0.0
        silence = np.zeros(160, np.float32)
        while phase != "done":
            if phase == "caller":
                chunk, pos = caller[pos : pos + 160], pos + 160
                if pos >= len(caller):
                    phase, pos = ("wait" if interrupt is not None else "tail"), 0
            elif phase == "wait":
                assert interrupt is not None
                chunk, waited = silence, waited + 0.02
                if played_s() >= interrupt[1]:
                    phase = "interrupt"
                elif waited > 30:
                    raise AssertionError("the reply never played long enough to be interrupted")
            elif phase == "interrupt":
                assert interrupt is not None
                chunk, pos = interrupt[0][pos : pos + 160], pos + 160
                if pos >= len(interrupt[0]):
                    phase, pos = "tail", 0
            else:
                if pos == 0:
                    state["tail_start"] = loop.time()
                chunk, pos = silence, pos + 160
                now = loop.time()
                answered = state["last_media"] > state["tail_start"]  # the reply to what was said last
                replied = answered and now - state["last_media"] > 1.5 and state["played_until"] < now
                if pos >= tail_s * 8000 or (replied and not pending):
                    phase = "done"
            if len(chunk):
                await ws.send(media(chunk, frame))
            frame += 1
            await asyncio.sleep(max(0.0, t0 + frame * 0.02 - loop.time()))
        await ws.send(json.dumps({"event": "stop", "streamSid": SID, "stop": {"callSid": "CA456"}}))
        await asyncio.sleep(0.3)
        for task in tasks:
            task.cancel()
    return received
