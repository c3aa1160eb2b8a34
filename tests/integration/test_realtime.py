"""The official ``openai`` SDK's realtime client against our /v1/realtime, over loopback, in real time."""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from openai import AsyncOpenAI

from tests.conftest import recordings
from transport import g711
from transport.files import load_audio
from transport.protocol import float_to_pcm16
from voice.bench.scoring import word_error_rate

pytestmark = pytest.mark.engines
RATE = 24000


def _rec(name: str):
    return next(r for r in recordings() if name in r.name)


@dataclass
class RealtimeRun:
    events: list[Any] = field(default_factory=list)
    truncated_at_ms: int | None = None

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]


async def realtime_talk(
    port: int,
    audio: np.ndarray,
    interrupt: tuple[np.ndarray, float] | None = None,
    responses: int = 1,
    pcmu: bool = False,
) -> RealtimeRun:
    """Speak ``audio`` (24 kHz; with ``pcmu``, 8 kHz sent as G.711 mu-law both ways, as a phone
    gateway would) in real time as an SDK application would, until ``responses`` are done.

    The application "plays" the audio deltas in real time from the first one
    of each response; ``interrupt=(speech, after_s)`` says ``speech`` once
    ``after_s`` of the first reply has played and the text of its second
    chunk has come (so some of what was sent is still unheard, however fast
    the model: a first chunk is often a clause of one sentence), and on ``speech_started``
    stops playing and truncates the item to what it played, as OpenAI's
    guides say.
    """
    run = RealtimeRun()
    client = AsyncOpenAI(api_key="unused", websocket_base_url=f"ws://127.0.0.1:{port}/v1")
    playing: dict[str, Any] = {"item": None, "start": None, "received": 0, "chunks": 0}
    rate, width = (8000, 1) if pcmu else (RATE, 2)  # samples a second, bytes a sample
    fmt = {"type": "audio/pcmu"} if pcmu else {"type": "audio/pcm", "rate": RATE}

    def encode(chunk: np.ndarray) -> bytes:
        return g711.encode(chunk) if pcmu else float_to_pcm16(chunk)

    async with client.realtime.connect(model="voice-pipeline") as conn:
        await conn.session.update(
            session={
                "type": "realtime",
                "instructions": "You are a helpful voice assistant. Answer in two or three sentences.",
                "audio": {"input": {"format": fmt}, "output": {"format": fmt}},
            }
        )

        def played_ms() -> int:
            if playing["start"] is None:
                return 0
            return min(round(playing["received"] / rate * 1000), round((time.monotonic() - playing["start"]) * 1000))

        def interruption_due(after_s: float) -> bool:
            ms = played_ms()
            return ms >= after_s * 1000 and playing["chunks"] >= 2

        async def speak() -> None:
            t0, n, pos = time.monotonic(), rate // 50, 0
            current, pending = audio, interrupt
            while True:
                if pending is not None and pos >= len(current) and interruption_due(pending[1]):
                    current, pos, pending = pending[0], 0, None
                chunk = current[pos : pos + n] if pos < len(current) else np.zeros(n, np.float32)
                pos += n
                await conn.input_audio_buffer.append(audio=base64.b64encode(encode(chunk)).decode())
                t0 += n / rate
                await asyncio.sleep(max(0.0, t0 - time.monotonic()))

        speaker = asyncio.create_task(speak())
        try:
            async with asyncio.timeout(120):
                async for event in conn:
                    run.events.append(event)
                    if event.type == "response.output_audio_transcript.delta" and len(run.of("response.done")) == 0:
                        playing["chunks"] += 1
                    elif event.type == "response.output_audio.delta":
                        if playing["item"] != event.item_id:
                            playing.update(item=event.item_id, start=time.monotonic(), received=0)
                        playing["received"] += len(base64.b64decode(event.delta)) // width
                    elif event.type == "input_audio_buffer.speech_started" and playing["item"] is not None:
                        if interrupt is not None and run.truncated_at_ms is None:
                            run.truncated_at_ms = played_ms()
                            await conn.conversation.item.truncate(
                                item_id=playing["item"], content_index=0, audio_end_ms=run.truncated_at_ms
                            )
                        playing["item"] = None
                    elif event.type == "response.done" and len(run.of("response.done")) >= responses:
                        break
        finally:
            speaker.cancel()
            await asyncio.gather(speaker, return_exceptions=True)
    return run


async def _history(server, session_prefix: str):
    for _ in range(200):
        for sid, conn in server.closed.items():
            if sid.startswith(session_prefix):
                return conn.history.to_json()
        await asyncio.sleep(0.05)
    raise AssertionError("the session did not close")


async def test_a_spoken_turn_with_the_openai_sdk(voice_server):
    rec = _rec("aew_a0003")
    run = await realtime_talk(voice_server.port, load_audio(rec.path, RATE))
    assert not run.of("error"), run.of("error")
    (created,) = run.of("session.created")
    assert run.of("session.updated") and run.of("input_audio_buffer.speech_started")
    assert run.of("input_audio_buffer.speech_stopped")
    (heard,) = run.of("conversation.item.input_audio_transcription.completed")
    assert word_error_rate(rec.transcript, heard.transcript) <= 0.2
    deltas = run.of("response.output_audio.delta")
    audio = np.frombuffer(b"".join(base64.b64decode(d.delta) for d in deltas), dtype="<i2")
    assert len(audio) > RATE // 2 and np.abs(audio).max() > 1000
    (done,) = run.of("response.done")
    assert done.response.status == "completed"
    transcript = "".join(d.delta for d in run.of("response.output_audio_transcript.delta"))
    assert transcript.strip() == done.response.output[0].content[0].transcript
    history = await _history(voice_server, created.session.id.removeprefix("sess_"))
    assert [t["role"] for t in history] == ["user", "assistant"] and history[1]["text"] == transcript.strip()


async def test_a_spoken_turn_in_mulaw_with_the_openai_sdk(voice_server):
    """audio/pcmu both ways, as a phone gateway speaking the Realtime API would send and play it."""
    rec = _rec("aew_a0003")
    run = await realtime_talk(voice_server.port, load_audio(rec.path, 8000), pcmu=True)
    assert not run.of("error"), run.of("error")
    (updated,) = run.of("session.updated")
    assert updated.session.audio.input.format.type == updated.session.audio.output.format.type == "audio/pcmu"
    (heard,) = run.of("conversation.item.input_audio_transcription.completed")
    assert word_error_rate(rec.transcript, heard.transcript) <= 0.3, heard.transcript
    reply = g711.decode(b"".join(base64.b64decode(d.delta) for d in run.of("response.output_audio.delta")))
    assert len(reply) > 8000 // 2 and np.abs(reply).max() > 0.03  # at least half a second of the voice, at 8 kHz
    (done,) = run.of("response.done")
    assert done.response.status == "completed"


async def test_barge_in_with_the_openai_sdk_truncates_to_what_it_played(voice_server):
    question = load_audio(_rec("aew_a0003").path, RATE)
    interruption = load_audio(_rec("LJ001-0005").path, RATE)[: RATE * 3]
    run = await realtime_talk(voice_server.port, question, interrupt=(interruption, 1.5), responses=2)
    assert not run.of("error"), run.of("error")
    first, second = run.of("response.done")
    assert first.response.status == "cancelled" and second.response.status == "completed"
    (truncated,) = [e for e in run.of("conversation.item.truncated") if e.audio_end_ms == run.truncated_at_ms]
    assert truncated.item_id == first.response.output[0].id and run.truncated_at_ms >= 1400
    spoken = "".join(
        d.delta for d in run.of("response.output_audio_transcript.delta") if d.response_id == first.response.id
    )
    heard = first.response.output[0].content[0].transcript
    # What was heard is what was sent up to the cut: the person spoke once a second chunk's text had
    # come, so part of what was sent went unheard, however fast the model.
    assert heard and len(heard) < len(spoken.strip()) and spoken.strip().startswith(heard.rstrip(".,!?")[:-1])
    history = await _history(voice_server, run.of("session.created")[0].session.id.removeprefix("sess_"))
    assistant = [t for t in history if t["role"] == "assistant"]
    assert assistant[0]["interrupted"] and assistant[0]["text"] == heard
    assert len([t for t in history if t["role"] == "user"]) == 2


async def test_the_sdk_resumes_a_stored_conversation(voice_server):
    run = await realtime_talk(voice_server.port, load_audio(_rec("axb_a0004").path, RATE))
    session = run.of("session.created")[0].session.id.removeprefix("sess_")
    stored = await _history(voice_server, session)
    client = AsyncOpenAI(api_key="unused", websocket_base_url=f"ws://127.0.0.1:{voice_server.port}/v1")
    async with client.realtime.connect(model="voice-pipeline", extra_query={"session": session}) as conn:
        created = await conn.recv()
        items = [await conn.recv() for _ in stored]
    assert created.type == "session.created" and created.session.id == f"sess_{session}"
    assert [(i.item.role, i.item.content[0].transcript) for i in items] == [(t["role"], t["text"]) for t in stored]
