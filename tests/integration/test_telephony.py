"""A phone call on the real engines: a caller as Twilio's Media Streams makes one
(tests/twilio_caller.py) hears the greeting, then says a shared recording at 8 kHz in mu-law to
``/telephony/twilio``; Silero, Whisper, the LLM and piper answer in mu-law. Keys pressed, a quiet
line and the end-call tool. Real time, as a call is."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging

import numpy as np
import pytest
import pytest_asyncio
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from core.audio import ASR_RATE
from core.call import CallConfig, IdlePolicy
from core.events import ToolCallEnd
from shell import models
from shell.tools import load_tools
from tests.conftest import recordings
from transport.files import load_audio
from transport.ws_server import ServerConfig, VoiceServer
from tts.piper_tts import PiperTTS
from voice.bench.scoring import word_error_rate
from voice.bench.twilio_caller import SID, START, Listen, Press, Quiet, Say, call, to_8k

pytestmark = pytest.mark.engines


def _rec(name: str):
    return next(r for r in recordings() if name in r.name)


async def new_session(server, before: set[str], timeout: float = 15.0):
    """The record of the one call that ended since ``before`` (a call opens with a greeting: the
    shared server's other sessions, such as a browser's WebRTC peer noticed gone late, do not)."""
    for _ in range(round(timeout / 0.05)):
        calls = [
            record
            for sid, record in server.closed.items()
            if sid not in before
            and record.history
            and record.history.turns
            and record.history.turns[0].role == "assistant"
        ]
        if calls:
            (record,) = calls
            return record
        await asyncio.sleep(0.05)
    raise AssertionError("the call's session did not end")


async def test_a_spoken_turn_over_the_phone(voice_server):
    rec = _rec("aew_a0003")
    before = set(voice_server.closed)
    received = await call(voice_server.port, to_8k(load_audio(rec.path)), tail_s=40.0, greeted=True)
    record = await new_session(voice_server, before)
    turns = record.history.turns
    assert [t.role for t in turns] == ["assistant", "user", "assistant"], [(t.role, t.text) for t in turns]
    assert turns[0].text == CallConfig.greeting and not turns[0].interrupted  # heard whole before the caller spoke
    assert word_error_rate(rec.transcript, turns[1].text) <= 0.3, turns[1].text
    assert not turns[2].interrupted and turns[2].text
    meta = voice_server.conversations.store.session_record(record.id).meta
    assert meta["call_sid"] == "CA456" and meta["caller"] == "+15550100"
    kinds = [m["event"] for m in received]
    assert kinds.count("media") >= 25 and "clear" not in kinds  # at least half a second of reply


async def test_a_barge_in_over_the_phone_clears_twilio_and_keeps_what_the_caller_heard(voice_server):
    question = to_8k(load_audio(_rec("aew_a0003").path))
    interruption = to_8k(load_audio(_rec("LJ001-0005").path)[: 16000 * 3])
    before = set(voice_server.closed)
    received = await call(voice_server.port, question, interrupt=(interruption, 1.5), tail_s=40.0, greeted=True)
    record = await new_session(voice_server, before)
    kinds = [m["event"] for m in received]
    assert "clear" in kinds, kinds
    cut = [t for t in record.history.turns if t.role == "assistant"][1]
    assert cut.interrupted and cut.text and len(cut.text) < len(cut.generated_text or "")
    users = [t.text for t in record.history.turns if t.role == "user"]
    assert len(users) == 2 and len(users[1].split()) >= 3, users


async def test_a_key_pressed_is_a_turn_the_model_answers(voice_server):
    before = set(voice_server.closed)
    await call(voice_server.port, steps=[Listen(15.0), Press("5"), Listen(40.0)])
    record = await new_session(voice_server, before)
    turns = [(t.role, t.text) for t in record.history.turns]
    # One key, then none for 2 s: the entry is over (core/keypad.py).
    assert turns[1] == ("user", "(Keyed on the phone's keypad: 5)"), turns
    assert turns[2][0] == "assistant" and turns[2][1], turns


@pytest_asyncio.fixture(loop_scope="session")
async def quiet_line_server(engines):
    """The real engines, a call asked after 2 s of quiet and hung up on after the second."""
    call_config = CallConfig(greeting="Hello, you are through to the test line.", idle=IdlePolicy(after_s=2.0))
    server = VoiceServer(engines, ServerConfig(port=0, call=call_config))
    await server.start()
    yield server
    await server.close()


async def test_a_quiet_caller_is_asked_then_hung_up_on(quiet_line_server):
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    received = await call(quiet_line_server.port, steps=[Quiet(40.0)])
    took = loop.time() - t0
    record = await new_session(quiet_line_server, set())
    idle = IdlePolicy()
    said = [(t.role, t.text, t.interrupted) for t in record.history.turns]
    assert said == [
        ("assistant", "Hello, you are through to the test line.", False),
        ("assistant", idle.prompt, False),
        ("assistant", idle.goodbye, False),
    ], said
    assert record.close_code == 1000 and took < 30.0, took  # the server hung up after the goodbye played
    audio_s = sum(len(m["media"]["payload"]) * 3 / 4 for m in received if m["event"] == "media") / 8000
    assert audio_s > 4.0  # three things said, in piper's voice


@pytest_asyncio.fixture(loop_scope="session")
async def tool_server(engines, qwen):
    """The model that calls tools, with the built-in ones (end_conversation hangs up)."""
    server = VoiceServer(dataclasses.replace(engines, llm=qwen), ServerConfig(port=0, tools=load_tools(["builtin"])))
    await server.start()
    yield server
    await server.close()


async def test_the_end_call_tool_hangs_up(tool_server):
    tts = PiperTTS(models.voice_path("joe"), ASR_RATE)
    words = np.concatenate(
        [0.5 * p.audio for p in tts.synthesize("Thank you, that is all I needed. Please hang up now.")]
    )
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await call(tool_server.port, steps=[Listen(15.0), Say(to_8k(words)), Quiet(60.0)])
    took = loop.time() - t0
    record = await new_session(tool_server, set())
    ends = [e for e in record.events if isinstance(e, ToolCallEnd)]
    assert [(e.name, e.status) for e in ends] == [("end_conversation", "ok")], ends
    assert record.close_code == 1000 and took < 60.0, took  # hung up by the tool, not by the caller
    goodbye = record.history.turns[-1]
    assert goodbye.role == "assistant" and goodbye.text and not goodbye.interrupted


# What a user sent in 66 connections (issue 31): each one a clear line in the log, none a traceback,
# and a DTMF digit holding a lone surrogate never reaches the model or the store.
MALFORMED = [
    "not json",
    "[]",
    '{"event": 3}',
    '{"event": "nope"}',
    '{"event": "media"}',
    '{"event": "start", "start": []}',
    '{"event": "media", "media": {"payload": 12}}',
    '{"event": "media", "media": {"payload": "%%"}}',
    '{"event": "mark", "mark": {"name": ["1"]}}',
    '{"event": "dtmf", "dtmf": {"digit": 5}}',
    '{"event": "dtmf", "dtmf": {"digit": "\\ud800"}}',
    '{"event": "dtmf", "streamSid": "\\udfff", "dtmf": {"digit": "1"}}',
    '{"event": "dtmf", "dtmf": {"digit": "1", "deep": ' + "[" * 3000 + "]" * 3000 + "}}",
    '{"event": "stop", "stop": ' + '{"a": ' * 1000 + "1" + "}" * 1000 + "}",
]


async def test_malformed_media_streams_messages_are_one_line_each_and_reach_nothing(voice_server, caplog):
    before = set(voice_server.closed)
    caplog.set_level(logging.INFO)
    async with connect(f"ws://127.0.0.1:{voice_server.port}/telephony/twilio") as ws:
        await ws.send(json.dumps(START))
        for bad in MALFORMED:
            await ws.send(bad)
        await ws.send(json.dumps({"event": "stop", "streamSid": SID, "stop": {"callSid": "CA456"}}))
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(30):
                while True:
                    await ws.recv()  # the greeting's media and marks, until the server hangs up
    assert ws.close_code == 1000
    for _ in range(200):
        ended = [record for sid, record in voice_server.closed.items() if sid not in before]
        if ended:
            break
        await asyncio.sleep(0.05)
    (record,) = ended
    dropped = [r.getMessage() for r in caplog.records if "a Media Streams message dropped" in r.getMessage()]
    assert len(dropped) == len(MALFORMED), dropped
    assert all("\n" not in line for line in dropped)
    assert not [r for r in caplog.records if r.exc_info is not None or r.levelno >= logging.ERROR]
    assert not record.errors
    assert all(turn.role == "assistant" for turn in record.history.turns)  # no key press was a turn
    health = voice_server.health()
    assert health["status"] == "ready"
