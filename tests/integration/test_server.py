"""The WebSocket server with real clients over loopback, on the real engines, in real time."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from core.events import TtsChunk
from tests.conftest import recordings
from transport.client import talk
from transport.files import load_audio
from transport.protocol import float_to_pcm16
from transport.ws_server import ServerConfig, VoiceServer
from voice.bench.scoring import word_error_rate

pytestmark = pytest.mark.engines


def _rec(name: str):
    return next(r for r in recordings() if name in r.name)


async def closed_session(server, session: str, timeout: float = 10.0):
    """The server's record of a session, once its connection has ended."""
    for _ in range(round(timeout / 0.05)):
        if session in server.closed:
            return server.closed[session]
        await asyncio.sleep(0.05)
    raise AssertionError(f"session {session} still open after {timeout} s")


def _ordered(events: list[dict], *kinds: str) -> bool:
    pos = [next(i for i, e in enumerate(events) if e["type"] == k) for k in kinds]
    return pos == sorted(pos)


async def test_a_spoken_turn_over_our_protocol(voice_server):
    rec = _rec("aew_a0003")
    result = await talk(voice_server.ws_url, load_audio(rec.path))
    assert not result.of("error"), result.of("error")
    assert word_error_rate(rec.transcript, result.user_text) <= 0.2
    assert _ordered(
        result.events, "speech_start", "speech_end", "transcript_final", "response_start", "assistant_text", "turn_end"
    )
    (end,) = result.of("turn_end")
    assert end["interrupted"] is False and len(end["text"].split()) >= 2
    # The whole reply reached the speaker, and the server counted exactly what it played.
    assert result.played > 0.5 * result.output_rate and result.dropped == 0
    assert float(np.sqrt(np.mean(result.reply**2))) > 0.01
    history = (await closed_session(voice_server, result.session)).history.to_json()
    assert [t["role"] for t in history] == ["user", "assistant"]
    assert history[1]["text"] == end["text"]


async def _barge_in_run(voice_server, honour_pause: bool):
    question = load_audio(_rec("aew_a0003").path)
    interruption = load_audio(_rec("LJ001-0005").path)[: 16000 * 3]
    return await talk(
        voice_server.ws_url,
        question,
        honour_pause=honour_pause,
        interrupt=(interruption, 1.5),
        max_tail_s=40,
        quiet_s=4.0,  # on a loaded machine the interruption's final and reply can take longer than 1.5 s
    )


@pytest.mark.parametrize("honour_pause", [True, False], ids=["pausing-client", "plain-client"])
async def test_barge_in_cuts_the_history_to_what_the_client_played(voice_server, honour_pause):
    result = await _barge_in_run(voice_server, honour_pause)
    assert result.of("barge_in"), [e["type"] for e in result.events]
    (trunc,) = result.of("truncate")
    rate = result.output_rate
    # The reply was cut at the sample the client's speaker had reached, as it reported it.
    assert abs(trunc["audio_end_ms"] - result.played_at_stop * 1000 / rate) <= 25
    assert trunc["audio_end_ms"] >= 1400  # it had played at least the 1.5 s before it spoke, minus rounding
    spoken = " ".join(e["text"] for e in result.of("assistant_text") if e["response"] == trunc["response"])
    assert trunc["text"] and spoken.startswith(trunc["text"].rstrip(".,!?")[:-1])
    assert len(trunc["text"]) < len(spoken)
    history = (await closed_session(voice_server, result.session)).history.to_json()
    cut = next(t for t in history if t["role"] == "assistant")
    assert cut["interrupted"] and cut["text"] == trunc["text"]
    # The interruption was heard and answered.
    finals = [e["text"] for e in result.of("transcript_final") if e["text"]]
    assert len(finals) == 2 and len(finals[1].split()) >= 3, [(e["type"], e.get("text")) for e in result.events]
    assert len(result.of("response_start")) == 2
    if honour_pause:
        # Paused on the client at once: nothing played between the pause and the stop.
        assert result.played_at_stop == result.played_at_pause


async def _next_json(ws, timeout: float = 5.0) -> dict:
    while True:
        message = await asyncio.wait_for(ws.recv(), timeout)
        if isinstance(message, str):
            return json.loads(message)


async def test_bad_input_gets_an_error_code_and_the_session_goes_on(voice_server):
    async with connect(voice_server.ws_url) as ws:
        await ws.send(float_to_pcm16(np.zeros(320, np.float32)))
        assert (await _next_json(ws))["code"] == "not_ready"
        await ws.send("{not json")
        assert (await _next_json(ws))["code"] == "invalid_json"
        await ws.send(json.dumps({"type": "hello", "sample_rate": 11025}))
        assert (await _next_json(ws))["code"] == "unsupported_rate"
        await ws.send(json.dumps({"type": "hello", "sample_rate": "16000"}))
        assert (await _next_json(ws))["code"] == "invalid_message"
        await ws.send(json.dumps({"type": "hello", "sample_rate": 48000, "acks": True}))
        ready = await _next_json(ws)
        assert ready["type"] == "ready" and ready["sample_rate"] == 48000
        await ws.send(json.dumps({"type": "dance"}))
        assert (await _next_json(ws))["code"] == "unknown_type"
        await ws.send(json.dumps({"type": "hello", "sample_rate": 16000}))
        assert (await _next_json(ws))["code"] == "not_ready"
        await ws.send(b"\x00" * 321)
        assert (await _next_json(ws))["code"] == "odd_length"
        await ws.send(b"\x00" * (ready["max_frame_bytes"] + 2))
        assert (await _next_json(ws))["code"] == "frame_too_large"
        await ws.send(json.dumps({"type": "played", "samples": 10**9}))
        assert (await _next_json(ws))["code"] == "invalid_message"  # more than was ever sent
        # Far faster than real time: 3 s of audio at once is 1 s over the bound.
        for _ in range(3):
            await ws.send(float_to_pcm16(np.zeros(48000, np.float32)[:24000]))
            await ws.send(float_to_pcm16(np.zeros(24000, np.float32)))
        assert (await _next_json(ws))["code"] == "input_too_fast"
        await ws.send(json.dumps({"type": "cancel"}))  # nothing to cancel: fine
        await ws.ping()
    # A message over the WebSocket limit closes the connection with 1009.
    async with connect(voice_server.ws_url, max_size=None) as ws:
        await ws.send(b"\x00" * (voice_server.config.limits.max_message_bytes + 2))
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd.code == 1009
    # And the server still holds a conversation.
    result = await talk(voice_server.ws_url, load_audio(_rec("axb_a0004").path))
    assert result.of("turn_end") and not result.of("error")


async def test_a_message_the_server_fails_on_is_an_error_logged_once_and_the_session_goes_on(voice_server, caplog):
    async with connect(voice_server.ws_url) as ws:
        await ws.send(json.dumps({"type": "hello", "sample_rate": 16000}))
        ready = json.loads(await ws.recv())
        conn = voice_server.connections[ready["session"]]
        read = conn.dialect.receive_text

        def broken(text: str):  # a bug in the server, as a client's message meets it
            if "boom" in text:
                raise RuntimeError("a bug")
            return read(text)

        conn.dialect.receive_text = broken
        for _ in range(3):
            await ws.send('{"type": "cancel", "boom": 1}')
        for _ in range(3):
            error = json.loads(await ws.recv())
            assert (error["code"], error["fatal"]) == ("internal", False)
            assert "bug" not in error["message"]  # the client is not told the server's internals
        await ws.send("not json")  # the session goes on
        assert json.loads(await ws.recv())["code"] == "invalid_json"
    await closed_session(voice_server, ready["session"])
    said = [r for r in caplog.records if r.name == "voice.server"]
    assert [(r.levelname, bool(r.exc_info)) for r in said] == [("ERROR", True), ("WARNING", False)]
    assert "3 client messages" in said[1].getMessage()


async def test_access_token_origin_session_cap_and_idle_timeout(engines):
    with pytest.raises(ValueError, match="token"):
        ServerConfig(host="0.0.0.0").check()
    from transport.protocol import Limits

    server = VoiceServer(
        engines, ServerConfig(port=0, token="s3cret", max_sessions=1, limits=Limits(idle_timeout_s=1.0))
    )
    await server.start()
    url = f"ws://127.0.0.1:{server.port}/ws"
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(url, additional_headers=headers):
                    pass
            assert refused.value.response.status_code == 401
        with pytest.raises(InvalidStatus) as refused:
            async with connect(url + "?token=s3cret", origin="http://evil.example"):
                pass
        assert refused.value.response.status_code == 403
        same_origin = f"http://127.0.0.1:{server.port}"
        async with connect(url + "?token=s3cret", origin=same_origin) as ws:
            with pytest.raises(InvalidStatus) as refused:  # one session at most
                async with connect(url, additional_headers={"Authorization": "Bearer s3cret"}):
                    pass
            assert refused.value.response.status_code == 503
            # Nothing sent for a second: told why, then closed normally.
            message = await _next_json(ws, timeout=5)
            assert message["code"] == "idle_timeout" and message["fatal"] is True
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)
            assert closed.value.rcvd.code == 1000
    finally:
        await server.close()


async def test_a_client_that_vanishes_mid_reply(voice_server, engines):
    audio = load_audio(_rec("aew_a0003").path)
    async with connect(voice_server.ws_url) as ws:
        await ws.send(json.dumps({"type": "hello", "sample_rate": 16000}))
        session = (await _next_json(ws))["session"]
        frames = [audio[i : i + 320] for i in range(0, len(audio), 320)] + [np.zeros(320, np.float32)] * 400
        for frame in frames:
            await ws.send(float_to_pcm16(frame))
            await asyncio.sleep(0.02)
            conn = voice_server.connections[session]
            if any(isinstance(e, TtsChunk) for e in conn.events):
                break
        ws.transport.abort()  # gone: no close frame
    conn = await closed_session(voice_server, session)
    # The user's turn (final) is kept; the reply only as far as it was played (interrupted), if at all.
    roles = [t.role for t in conn.history.turns]
    assert roles in (["user"], ["user", "assistant"])
    if len(roles) == 2:
        cut = conn.history.turns[1]
        assert cut.interrupted and cut.generated_text.replace(" ", "").startswith(cut.text.replace(" ", "")[:-1])
    assert engines.llm.engine.output_processor.get_num_unfinished_requests() == 0


async def test_sessions_at_once_are_isolated(voice_server):
    names = ["aew_a0003", "axb_a0004", "LJ001-0002"]
    results = await asyncio.gather(*(talk(voice_server.ws_url, load_audio(_rec(n).path)) for n in names))
    for name, result in zip(names, results, strict=True):
        assert word_error_rate(_rec(name).transcript, result.user_text) <= 0.25, (name, result.user_text)
        assert result.of("turn_end") and result.played > 0
        history = (await closed_session(voice_server, result.session)).history.to_json()
        assert [t["role"] for t in history] == ["user", "assistant"]
        # Written at once by three sessions, every finalized turn is in the store.
        assert [t.text for t in voice_server.conversations.store.turns(result.session)] == [t["text"] for t in history]
    assert len({r.session for r in results}) == 3


# The codes a malformed message may be answered with (docs/protocol.md); never a close but 1009.
FUZZ_CODES = {
    "invalid_json", "invalid_message", "unknown_type", "not_ready", "unsupported_rate", "odd_length",
    "frame_too_large", "input_too_fast", "unsupported", "invalid_request", "item_truncate_invalid_item_id",
}  # fmt: skip


def _fuzz_strategies():
    """Frames of every class a malformed client sends, for both dialects."""
    from hypothesis import strategies as st

    json_values = st.recursive(
        st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
        max_leaves=10,
    )
    odd_json = st.one_of(
        st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),  # nesting
        st.integers(1, 3000).map(lambda n: '{"type":"hello","x":' + "[" * n + "]" * n + "}"),
        st.integers(20, 6000).map(lambda n: '{"type":"played","samples":' + "9" * n + "}"),  # huge numbers
        st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", '{"type":"hello","lead_ms":1e400}']),
        st.sampled_from(['"\\ud800"', '{"type":"\\udfff"}', '{"type":"hello","session":"\\ud800"}',
                         '{"type":"session.update","session":{"instructions":"a\\udc00"}}']),  # lone surrogates
        json_values.map(json.dumps),  # JSON that is not an object
        st.text(max_size=200),
    )  # fmt: skip
    ours = st.fixed_dictionaries({"type": st.sampled_from(["hello", "played", "cancel", "x"])}, optional={
        "sample_rate": st.sampled_from([16000, 48000, 0, -1, 11025]) | json_values,
        "acks": json_values, "echo_cancel": json_values, "lead_ms": json_values, "session": json_values,
        "samples": json_values, "dropped": json_values,
    })  # fmt: skip
    fields = {  # every documented field of Realtime's session, with values of any type
        "type": json_values, "model": json_values, "instructions": json_values, "output_modalities": json_values,
        "tools": json_values, "tool_choice": json_values, "max_output_tokens": json_values,
        "audio": st.fixed_dictionaries({}, optional={
            "input": st.fixed_dictionaries({}, optional={
                "format": json_values | st.fixed_dictionaries({"type": json_values}, optional={"rate": json_values}),
                "transcription": json_values, "noise_reduction": json_values,
                "turn_detection": json_values | st.fixed_dictionaries({"type": json_values}, optional={
                    "threshold": json_values, "create_response": json_values, "interrupt_response": json_values}),
            }) | json_values,
            "output": st.fixed_dictionaries({}, optional={
                "format": json_values, "voice": json_values, "speed": json_values}) | json_values,
        }) | json_values,
    }  # fmt: skip
    realtime = st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("session.update"), "session": st.fixed_dictionaries({}, optional=fields)}
        ),
        st.fixed_dictionaries({"type": st.just("session.update")}, optional={"session": json_values}),
        st.fixed_dictionaries({"type": st.just("input_audio_buffer.append")}, optional={
            "audio": st.text(max_size=40) | json_values, "event_id": json_values}),
        st.fixed_dictionaries({"type": st.just("conversation.item.truncate")}, optional={
            "item_id": json_values, "content_index": json_values, "audio_end_ms": json_values}),
        st.fixed_dictionaries({"type": st.sampled_from([
            "response.cancel", "response.create", "input_audio_buffer.commit", "input_audio_buffer.clear",
            "conversation.item.create", "output_audio_buffer.clear", "x"])}, optional={"event_id": json_values}),
    )  # fmt: skip
    binary = st.binary(max_size=2000) | st.integers(0, 70000).map(lambda n: b"\x01" * n)
    return {
        "ws": st.lists(st.one_of(ours.map(json.dumps), odd_json, binary), max_size=8),
        "realtime": st.lists(st.one_of(realtime.map(json.dumps), odd_json, binary), max_size=8),
    }


def _fuzz_server(base: str, examples: int) -> int:
    """Throw malformed messages at both dialects of the server at ``base`` from a thread; return connections made.

    Every answer is an event the dialect documents (errors with known codes);
    the session goes on (a well-formed message after the fuzz is answered);
    only a message over the size limit closes the connection (1009).
    """
    from hypothesis import HealthCheck, given, settings
    from websockets.sync.client import connect as connect_sync

    count = 0
    strategies = _fuzz_strategies()
    fuzzing = settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)

    def expect_errors_until(ws, done, also: tuple[str, ...] = ()) -> None:
        while True:
            message = ws.recv(timeout=10)
            if isinstance(message, bytes):
                continue
            event = json.loads(message)
            code = event.get("code") or event.get("error", {}).get("code")
            assert event["type"] in ("error", *also) or done(event), event
            assert event["type"] != "error" or code in FUZZ_CODES, event
            if done(event):
                return

    @fuzzing
    @given(frames=strategies["ws"])
    def fuzz_ours(frames):
        nonlocal count
        count += 1
        with connect_sync(f"{base}/ws", max_size=None, open_timeout=10) as ws:
            try:
                for frame in frames:
                    ws.send(frame)
                ws.send(json.dumps({"type": "hello", "sample_rate": 16000}))
                # The last answer is ready (or not_ready: a fuzzed hello came first).
                expect_errors_until(ws, lambda e: e["type"] == "ready" or e.get("code") == "not_ready")
            except ConnectionClosed as e:
                assert e.rcvd is not None and e.rcvd.code == 1009, e  # only for a message over the limit

    @fuzzing
    @given(frames=strategies["realtime"])
    def fuzz_realtime(frames):
        nonlocal count
        count += 1
        with connect_sync(f"{base}/v1/realtime", max_size=None, open_timeout=10) as ws:
            try:
                assert json.loads(ws.recv(timeout=10))["type"] == "session.created"
                for frame in frames:
                    ws.send(frame)
                ws.send(json.dumps({"type": "session.update", "session": {"instructions": "Be brief."}}))
                answered = ("session.updated", "input_audio_buffer.cleared", "input_audio_buffer.committed")
                expect_errors_until(
                    ws, lambda e: e.get("session", {}).get("instructions") == "Be brief.", also=answered
                )
            except ConnectionClosed as e:
                assert e.rcvd is not None and e.rcvd.code == 1009, e

    fuzz_ours()
    fuzz_realtime()
    return count


async def test_fuzzed_clients_do_not_disturb_a_conversation(voice_server, caplog):
    rec = _rec("aew_a0003")
    conversation = asyncio.create_task(talk(voice_server.ws_url, load_audio(rec.path)))
    fuzzed = await asyncio.to_thread(_fuzz_server, voice_server.ws_url.removesuffix("/ws"), 60)
    result = await conversation
    assert fuzzed == 120
    assert not [r for r in caplog.records if r.exc_info or r.levelname in ("ERROR", "CRITICAL")]
    assert word_error_rate(rec.transcript, result.user_text) <= 0.2
    assert result.of("turn_end") and not result.of("error") and result.played > 0
    for _ in range(100):  # every fuzzed session is gone
        if not voice_server.connections:
            break
        await asyncio.sleep(0.05)
    assert not voice_server.connections
