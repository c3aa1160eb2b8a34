"""Twilio Media Streams: the dialect on Twilio's published message formats (pure), and a call
over a real WebSocket to the server with stand-in engines: the caller's mu-law in, the reply's
mu-law and marks out, what was heard taken from the marks' echoes, and a ``clear`` at a
barge-in after which nothing the caller did not hear is counted as heard."""

from __future__ import annotations

import asyncio
import base64
import json
import logging

import numpy as np
import pytest
from stand_in_engines import StandInEngines, StandInLLM, StandInRecognizer, silence, tone

from core.call import CallConfig, IdlePolicy
from core.events import PlaybackStopped, TurnEnd
from shell.config import SessionConfig
from transport import g711
from transport.protocol import AudioIn, Close, Configure, KeyPressed, PlayedReport
from transport.twilio import LEAD_S, TwilioProtocol
from transport.ws_server import ServerConfig, VoiceServer
from voice.app.conversations import Conversations
from voice.app.store import ConversationStore
from voice.bench.twilio_caller import SID, START, Listen, Quiet, Say, call, mark, media, to_8k


def started() -> TwilioProtocol:
    proto = TwilioProtocol("s" * 32, 24000)
    assert proto.receive_text(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"})) == []
    (configure,) = proto.receive_text(json.dumps(START))
    # No echo canceller: the phone cancels its own echo (see TwilioProtocol._on_start).
    assert configure == Configure(8000, acks=True, lead_s=LEAD_S, echo_cancel=False, call=True, meta=proto.call)
    return proto


def test_start_configures_a_session_at_8k_and_keeps_the_calls_metadata():
    proto = started()
    assert proto.stream_sid == SID
    assert proto.call == {
        "channel": "twilio",
        "caller": "+15550100",
        "call_sid": "CA456",
        "stream_sid": SID,
        "account_sid": "AC123",
        "custom_parameters": {"caller": "+15550100"},
    }


def test_the_callers_mulaw_is_the_sessions_audio():
    proto = started()
    x = (0.3 * np.sin(2 * np.pi * 440 * np.arange(160) / 8000)).astype(np.float32)
    (audio,) = proto.receive_text(media(x))
    assert isinstance(audio, AudioIn) and len(audio.samples) == 160
    assert np.max(np.abs(audio.samples - x)) < 0.02
    outbound = json.loads(media(x)) | {"media": {"track": "outbound", "payload": ""}}
    assert proto.receive_text(json.dumps(outbound)) == []  # not the caller


def test_reply_audio_goes_out_as_mulaw_then_a_mark_named_with_the_samples_sent():
    proto = started()
    sent = [json.loads(s.message) for _ in range(3) for s in proto.audio(np.zeros(480, np.float32), 1)]
    assert [m["event"] for m in sent] == ["media", "mark"] * 3 and all(m["streamSid"] == SID for m in sent)
    assert [m["mark"]["name"] for m in sent[1::2]] == ["480", "960", "1440"]
    assert [len(base64.b64decode(m["media"]["payload"])) for m in sent[::2]] == [160] * 3  # 20 ms at 8 kHz, now


def test_the_reply_is_downsampled_cleanly():
    down = g711.To8k(24000)
    t = np.arange(24000) / 24000
    in_band = np.sin(2 * np.pi * 300 * t).astype(np.float32)
    alias = np.sin(2 * np.pi * 7000 * t).astype(np.float32)  # above 4 kHz: must not fold into the band
    out = np.concatenate([down(in_band[i : i + 480]) for i in range(0, 24000, 480)])
    assert len(out) == 8000
    ref = np.sin(2 * np.pi * 300 * (np.arange(8000) / 8000 - 48 / 24000))  # 2 ms late (48 samples)
    assert np.max(np.abs(out[100:] - ref[100:])) < 0.01
    folded = np.concatenate([down(alias[i : i + 333]) for i in range(0, 24000, 333)])
    assert np.sqrt(np.mean(folded[100:] ** 2)) < 0.01


def chunks(proto: TwilioProtocol, n: int) -> list[str]:
    """Send ``n`` chunks of reply audio; the names of their marks."""
    out = [json.loads(s.message) for _ in range(n) for s in proto.audio(np.zeros(480, np.float32), 1)]
    return [m["mark"]["name"] for m in out if m["event"] == "mark"]


def test_a_marks_echo_is_what_the_caller_heard():
    proto = started()
    names = chunks(proto, 4)
    first, second = int(names[0]), int(names[1])
    assert proto.receive_text(mark(names[0])) == [PlayedReport(first, 0)]
    assert proto.receive_text(mark(names[1])) == [PlayedReport(second, 0)]
    assert proto.receive_text(mark(names[0])) == []  # old news
    assert proto.receive_text(mark("99999")) == []  # not ours: never more than was sent


def test_a_clear_counts_what_twilio_held_as_dropped_and_ignores_the_marks_it_echoes_at_once():
    proto = started()
    names = chunks(proto, 5)
    proto.receive_text(mark(names[0]))
    heard = int(names[0])
    actions = proto.event(PlaybackStopped(t=1.0, response=1))
    assert json.loads(actions[0].message) == {"event": "clear", "streamSid": SID}
    assert actions[1] == PlayedReport(heard, 5 * 480 - heard)  # everything not acknowledged: dropped
    for name in names[1:]:  # Twilio echoes the pending marks on a clear, played or not
        assert proto.receive_text(mark(name)) == []
    (name,) = chunks(proto, 1)  # the next reply
    assert proto.receive_text(mark(name)) == [PlayedReport(heard + 480, 5 * 480 - heard)]


def test_dtmf_is_a_key_for_the_session_and_stop_ends_it():
    proto = started()
    dtmf = {"event": "dtmf", "streamSid": SID, "sequenceNumber": "5", "dtmf": {"track": "inbound_track", "digit": "1"}}
    assert proto.receive_text(json.dumps(dtmf)) == [KeyPressed("1")]
    assert proto.digits == ["1"]
    stop = {"event": "stop", "sequenceNumber": "6", "streamSid": SID, "stop": {"accountSid": "AC123", "callSid": "CA4"}}
    assert proto.receive_text(json.dumps(stop)) == [Close(1000, "the call ended")]


def test_bad_frames_are_dropped_never_raised():
    proto = started()
    bad_frames = [
        "not json", "[]", '{"event": 3}', '{"event": "media"}', '{"event": "media", "media": {"payload": "%%"}}',
        '{"event": "mark", "mark": {"name": "abc"}}', '{"event": "dtmf", "dtmf": {}}', '{"event": "nope"}',
    ]  # fmt: skip
    for bad in bad_frames:
        assert proto.receive_text(bad) == [], bad
    assert proto.receive_binary(b"\x00\x01") == []
    other = json.loads(json.dumps(START))
    other["start"]["mediaFormat"]["encoding"] = "audio/x-alaw"
    assert isinstance(TwilioProtocol("s", 24000).receive_text(json.dumps(other))[0], Close)


MALFORMED = {
    "not JSON": "not json",
    "not an object": "[]",
    "event not a string": '{"event": 3}',
    "unknown event": '{"event": "nope"}',
    "a field missing": '{"event": "media"}',
    "start not an object": '{"event": "start", "start": []}',
    "start's parameters not strings": '{"event": "start", "start": {"customParameters": {"From": 5}}}',
    "media format not an object": '{"event": "start", "start": {"mediaFormat": "mulaw"}}',
    "payload not base64": '{"event": "media", "media": {"payload": "%%"}}',
    "payload not a string": '{"event": "media", "media": {"payload": 12}}',
    "mark's name not a string": '{"event": "mark", "mark": {"name": 480}}',
    "mark's name not ours": '{"event": "mark", "mark": {"name": "abc"}}',
    "dtmf without a digit": '{"event": "dtmf", "dtmf": {}}',
    "dtmf digit not a key": '{"event": "dtmf", "dtmf": {"digit": "x"}}',
    "dtmf digit of two keys": '{"event": "dtmf", "dtmf": {"digit": "12"}}',
    "dtmf digit a lone surrogate (escaped)": '{"event": "dtmf", "dtmf": {"digit": "\\ud800"}}',
    "dtmf digit a lone surrogate (in the str)": '{"event": "dtmf", "dtmf": {"digit": "\ud800"}}',
    "a parameter a lone surrogate": '{"event": "start", "start": {"customParameters": {"From": "\\udfff"}}}',
    "nested deeply": '{"event": "dtmf", "dtmf": {"digit": "1", "x": ' + "[" * 5000 + "]" * 5000 + "}}",
    "a stream id too long": '{"event": "mark", "streamSid": "' + "M" * 65 + '", "mark": {"name": "1"}}',
}


@pytest.mark.parametrize("kind", MALFORMED)
def test_each_malformed_message_is_dropped_with_one_line_and_nothing_goes_on(kind, caplog):
    proto = started()
    proto.audio(np.zeros(480, np.float32), 1)  # a mark of ours is pending
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="voice.server.twilio"):
        assert proto.receive_text(MALFORMED[kind]) == []
    assert proto.digits == []
    (record,) = caplog.records
    assert record.exc_info is None and "\n" not in record.getMessage()
    assert record.getMessage().encode()  # what is logged is text


def test_a_lone_surrogate_never_reaches_a_turn_before_the_call_starts_either():
    proto = TwilioProtocol("s" * 32, 24000)
    assert proto.receive_text('{"event": "start", "start": {"streamSid": "\\ud800"}}') == []
    assert proto.configured is None and proto.stream_sid is None


# -- a call over a real WebSocket ------------------------------------------------------------


async def test_a_call_is_heard_answered_in_mulaw_and_stored_as_heard():
    engines = StandInEngines(StandInRecognizer({300: "what time is it", 600: "stop stop"}), StandInLLM(["It is noon."]))
    config = ServerConfig(
        port=0, session=SessionConfig(end_of_turn=None), call=CallConfig(greeting="Hello.", idle=None)
    )
    server = VoiceServer(engines, config)  # type: ignore[arg-type]
    events: list = []
    server.on_event = lambda sid, e: events.append(e)
    await server.start()
    try:
        received = await call(server.port, to_8k(np.concatenate([tone(1.2), silence(4.0)])), greeted=True)
    finally:
        await server.close()
        await engines.aclose()
    kinds = [m["event"] for m in received]
    assert "media" in kinds and "mark" in kinds and "clear" not in kinds
    (record,) = server.closed.values()
    turns = [(t.role, t.text) for t in record.history.turns]
    assert turns == [("assistant", "Hello."), ("user", "what time is it"), ("assistant", "It is noon.")]
    assert not any(e.interrupted for e in events if isinstance(e, TurnEnd))


async def test_a_barge_in_clears_twilios_buffer_and_the_reply_is_stored_as_the_marks_said():
    long_reply = "One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen."
    engines = StandInEngines(StandInRecognizer({300: "tell me a story", 600: "stop stop"}), StandInLLM([long_reply]))
    config = ServerConfig(port=0, session=SessionConfig(end_of_turn=None), call=CallConfig(greeting=None, idle=None))
    server = VoiceServer(engines, config)  # type: ignore[arg-type]
    await server.start()
    try:
        # The question, then the caller speaks over the reply 1.5 s into it.
        caller = np.concatenate([tone(1.2), silence(2.0), tone(1.2, hz=600.0), silence(3.0)])
        received = await call(server.port, to_8k(caller))
    finally:
        await server.close()
        await engines.aclose()
    kinds = [m["event"] for m in received]
    assert "clear" in kinds, kinds
    (record,) = server.closed.values()
    reply = next(t for t in record.history.turns if t.role == "assistant")
    assert reply.interrupted and reply.text and len(reply.text.split()) < len(long_reply.split())
    assert [t.text for t in record.history.turns if t.role == "user"][-1] == "stop stop"


def quiet_line_server(engines: StandInEngines, after_s: float = 1.0, **kw) -> VoiceServer:
    idle = IdlePolicy(after_s=after_s, prompt="Still there?", goodbye="Bye now.", prompts=1)
    call_config = CallConfig(greeting="Hello.", idle=idle)
    config = ServerConfig(port=0, session=SessionConfig(end_of_turn=None), call=call_config)
    return VoiceServer(engines, config, **kw)  # type: ignore[arg-type]


async def test_a_quiet_caller_is_greeted_asked_once_and_hung_up_on(tmp_path):
    engines = StandInEngines(StandInRecognizer({300: "hi"}), StandInLLM(["Hi."]))
    store = ConversationStore.open(tmp_path / "calls.db")
    server = quiet_line_server(engines, conversations=Conversations(store))
    await server.start()
    try:
        t0 = asyncio.get_running_loop().time()
        received = await call(server.port, steps=[Quiet(15.0)], parameters={"From": "+15550199", "To": "+15550100"})
        took = asyncio.get_running_loop().time() - t0
    finally:
        await server.close()
        await engines.aclose()
    ((sid, record),) = server.closed.items()
    assert [(t.role, t.text) for t in record.history.turns] == [
        ("assistant", "Hello."),
        ("assistant", "Still there?"),
        ("assistant", "Bye now."),
    ]
    assert record.close_code == 1000 and took < 10.0  # hung up once the goodbye played, not at the caller's stop
    assert "media" in [m["event"] for m in received]
    meta = store.session_record(sid).meta
    assert meta["caller"] == "+15550199" and meta["call_sid"] == "CA456" and meta["channel"] == "twilio"
    assert meta["custom_parameters"] == {"From": "+15550199", "To": "+15550100"}
    store.close()


async def test_a_caller_who_answers_the_prompt_is_not_hung_up_on():
    engines = StandInEngines(StandInRecognizer({300: "yes I am here"}), StandInLLM(["Good."]))
    server = quiet_line_server(engines, after_s=3.0)
    await server.start()
    try:
        # Greeting, quiet, the prompt; the caller answers; quiet again: asked once more (the count
        # started over when they spoke), then the goodbye.
        steps = [Listen(5.0), Listen(5.0), Say(to_8k(tone(1.0))), Quiet(12.0)]
        await call(server.port, steps=steps)
    finally:
        await server.close()
        await engines.aclose()
    (record,) = server.closed.values()
    said = [(t.role, t.text) for t in record.history.turns]
    assert said == [
        ("assistant", "Hello."),
        ("assistant", "Still there?"),
        ("user", "yes I am here"),
        ("assistant", "Good."),
        ("assistant", "Still there?"),
        ("assistant", "Bye now."),
    ], said
    assert record.close_code == 1000
