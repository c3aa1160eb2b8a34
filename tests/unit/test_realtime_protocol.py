"""The OpenAI Realtime dialect (``/v1/realtime``) without I/O: events in, actions and events out.

In the manner of websockets' ``tests/test_protocol.py``: every case a named
test, the client's event in, the exact actions and server events out
(``docs/protocol.md`` lists what is supported). ``event()`` (pipeline events
to server events) is tested with the typed events, elsewhere; here it only
opens a response, in :func:`open_response`, for the tests of truncation and
audio deltas.
"""

from __future__ import annotations

import base64
import json
import struct

import numpy as np
import pytest

from core.events import AwaitingTools, ResponseContinued, ResponseStart, ToolCallEnd, ToolCallStart
from transport import g711
from transport.protocol import AudioIn, CancelReply, Configure, Limits, Send, ToolOutput, TruncateReply, UserText
from transport.realtime import RealtimeProtocol

SID = "0123456789abcdef"  # item and response ids carry its first 8 characters
SESSION = {
    "type": "realtime",
    "object": "realtime.session",
    "id": f"sess_{SID}",
    "model": "voice-pipeline",
    "output_modalities": ["audio"],
    "instructions": "",
    "tools": [],
    "tool_choice": "auto",
    "audio": {
        "input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "transcription": {"model": "whisper"},
            "noise_reduction": None,
            "turn_detection": {"type": "server_vad", "create_response": True, "interrupt_response": True},
        },
        "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "piper"},
    },
}


def sent(actions, ids=True):
    """The actions, with each ``Send`` as the JSON event the client gets (``ids=False``: without ``event_id``)."""
    out = []
    for a in actions:
        if isinstance(a, Send):
            assert isinstance(a.message, str), "the Realtime API sends text frames only"
            event = json.loads(a.message)
            if not ids:
                del event["event_id"]
            out.append(event)
        else:
            out.append(a)
    return out


def err(code, message, n, kind="invalid_request_error", param=None):
    error = {"type": kind, "code": code, "message": message, "param": param}
    return {"type": "error", "event_id": f"event_{n}", "error": error}


def session(**changes):
    return {**SESSION, **changes}


def update(**fields) -> str:
    return json.dumps({"type": "session.update", "session": fields})


def append(data: bytes) -> str:
    return json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(data).decode()})


def pcm16(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}h", *values)


def audio_in(actions) -> np.ndarray:
    """The samples of the one ``AudioIn`` (it holds an array, so it is not compared with ``==``)."""
    assert len(actions) == 1 and isinstance(actions[0], AudioIn), actions
    return actions[0].samples


def delta_samples(actions) -> np.ndarray:
    if not actions:  # the resampler kept the chunk back
        return np.zeros(0, dtype="<i2")
    (event,) = sent(actions)
    assert event["type"] == "response.output_audio.delta"
    return np.frombuffer(base64.b64decode(event["delta"]), dtype="<i2")


def open_response(proto: RealtimeProtocol, response: int) -> None:
    """The pipeline starts reply ``response``: the one place these tests feed ``event()``, for its ids."""
    proto.event(ResponseStart(0.0, response=response, utterance=response, text="Hi"))


def item(response: int) -> str:
    return f"item_a{response}_{SID[:8]}"


@pytest.fixture
def proto() -> RealtimeProtocol:
    return RealtimeProtocol(SID, output_rate=24000)


# -- opening -------------------------------------------------------------------


def test_start_configures_pcm_at_24k_without_waiting(proto):
    assert proto.start() == [
        Configure(24000, acks=False, lead_s=0.12, echo_cancel=True, instructions=None, resume=None)
    ]


def test_start_resumes_the_conversation_in_the_url():
    proto = RealtimeProtocol(SID, 24000, resume="9f2c41d0")
    assert proto.start() == [Configure(24000, acks=False, lead_s=0.12, resume="9f2c41d0")]


@pytest.mark.parametrize("resume", ["", "x" * 65, "x" * 8000])
def test_start_with_a_session_that_is_not_an_id_starts_a_new_conversation_and_says_so(resume):
    proto = RealtimeProtocol(SID, 24000, resume=resume)
    assert proto.start() == [Configure(24000, acks=False, lead_s=0.12, resume=None)]
    created, error = sent(proto.ready(SID, []))
    assert created["type"] == "session.created"
    assert error["error"]["code"] == "unknown_session" and "x" not in error["error"]["message"]


def test_start_takes_the_lead_from_the_limits():
    assert RealtimeProtocol(SID, 24000, Limits(lead_s=0.3)).start() == [Configure(24000, acks=False, lead_s=0.3)]


def test_ready_is_session_created(proto):
    assert sent(proto.ready(SID, [])) == [{"type": "session.created", "event_id": "event_1", "session": SESSION}]


def test_ready_takes_the_session_id_it_is_given(proto):
    (created,) = sent(proto.ready("feedbeef00", []))
    assert created["session"]["id"] == "sess_feedbeef00"
    assert proto.session_id == "feedbeef00"


def test_ready_sends_a_resumed_conversation_as_done_items(proto):
    history = [
        {"role": "user", "text": "What time is it?"},
        {"role": "assistant", "text": "It is", "interrupted": True},
        {"role": "user", "text": "Thanks."},
        {"role": "assistant", "text": "You are welcome."},
    ]

    def done(n, previous, role, kind, text, status):
        message = {
            "id": f"item_h{n}_01234567",
            "object": "realtime.item",
            "type": "message",
            "role": role,
            "status": status,
            "content": [{"type": kind, "transcript": text}],
        }
        return {
            "type": "conversation.item.done",
            "event_id": f"event_{n + 1}",
            "previous_item_id": previous,
            "item": message,
        }

    assert sent(proto.ready(SID, history)) == [
        {"type": "session.created", "event_id": "event_1", "session": SESSION},
        done(1, None, "user", "input_audio", "What time is it?", "completed"),
        done(2, "item_h1_01234567", "assistant", "output_audio", "It is", "incomplete"),
        done(3, "item_h2_01234567", "user", "input_audio", "Thanks.", "completed"),
        done(4, "item_h3_01234567", "assistant", "output_audio", "You are welcome.", "completed"),
    ]


# -- binary frames, and text that is not an event -----------------------------------


def test_binary_frame_is_refused(proto):
    message = "the Realtime API sends JSON text frames, not binary ones"
    assert sent(proto.receive_binary(pcm16(0, 0))) == [err("invalid_request", message, 1)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not JSON: it ends too early, or a string holds a lone surrogate (\\ud800-\\udfff)"),
        ("session.update", "not JSON: JSON is malformed: invalid character (byte 0)"),
        (
            '{"type": "response.cancel"',
            "not JSON: it ends too early, or a string holds a lone surrogate (\\ud800-\\udfff)",
        ),
        ('["response.cancel"]', "a message is a JSON object with a string 'type'"),
        ("null", "a message is a JSON object with a string 'type'"),
        ('{"event_id": "e1"}', "a message is a JSON object with a string 'type'"),
        ('{"type": 7}', "a message is a JSON object with a string 'type'"),
    ],
    ids=["empty", "word", "truncated", "array", "null", "no-type", "type-number"],
)
def test_text_that_is_not_an_event_is_invalid_json(proto, text, message):
    assert sent(proto.receive_text(text)) == [err("invalid_json", message, 1)]


def test_deeply_nested_json_is_invalid_json(proto):
    (error,) = sent(proto.receive_text("{" + '"a":{' * 100_000))
    assert error["error"]["code"] == "invalid_json"


@pytest.mark.parametrize(
    "kind", ["response.function_call_arguments.done", "output_audio_buffer.clear", "session.updat", "hello"]
)
def test_unknown_event_type(proto, kind):
    message = f'unknown message type "{kind}"'
    assert sent(proto.receive_text(json.dumps({"type": kind}))) == [err("unknown_type", message, 1, param="type")]


def test_unknown_event_type_is_quoted_in_at_most_60_characters(proto):
    message = f'unknown message type "{"x" * 60}"…'
    assert sent(proto.receive_text(json.dumps({"type": "x" * 61}))) == [err("unknown_type", message, 1, param="type")]


def test_an_error_names_the_client_event_it_answers(proto):
    (error,) = sent(proto.receive_text('{"type": "response.nope", "event_id": "client_7"}'))
    assert error["error"]["event_id"] == "client_7"
    assert error["event_id"] == "event_1"  # the error's own id, as for every server event


def test_a_user_text_message_is_added_and_answered_at_response_create(proto):
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What time is it?"}]}
    added, done = sent(proto.receive_text(json.dumps({"type": "conversation.item.create", "item": item})), ids=False)
    assert added["type"] == "conversation.item.added" and done["type"] == "conversation.item.done"
    assert done["item"]["content"] == [{"type": "input_text", "text": "What time is it?"}]
    assert proto.receive_text('{"type": "response.create"}') == [UserText("What time is it?")]
    assert proto.receive_text('{"type": "response.create"}') == []  # answered once


def test_other_items_are_unsupported(proto):
    item = {"type": "message", "role": "user", "content": [{"type": "input_audio", "audio": ""}]}
    (error,) = sent(proto.receive_text(json.dumps({"type": "conversation.item.create", "item": item})), ids=False)
    assert (error["error"]["code"], error["error"]["param"]) == ("unsupported", "item.content")
    text = json.dumps({"type": "conversation.item.create", "item": {"type": "message", "role": "assistant"}})
    (error,) = sent(proto.receive_text(text), ids=False)
    assert error["error"]["param"] == "item.type"


def test_a_function_call_output_goes_to_the_session(proto):
    item = {"type": "function_call_output", "call_id": "call_1_0_0", "output": '{"time": "10:15"}'}
    out = sent(proto.receive_text(json.dumps({"type": "conversation.item.create", "item": item})), ids=False)
    assert out[0] == ToolOutput("call_1_0_0", '{"time": "10:15"}')
    assert [e["type"] for e in out[1:]] == ["conversation.item.added", "conversation.item.done"]


def test_response_create_is_accepted_and_ignored(proto):
    assert proto.receive_text('{"type": "response.create", "response": {"instructions": "Be brief."}}') == []


def test_input_audio_buffer_clear_is_acknowledged(proto):
    assert sent(proto.receive_text('{"type": "input_audio_buffer.clear"}')) == [
        {"type": "input_audio_buffer.cleared", "event_id": "event_1"}
    ]


def test_input_audio_buffer_commit_is_acknowledged(proto):
    assert sent(proto.receive_text('{"type": "input_audio_buffer.commit"}')) == [
        {"type": "input_audio_buffer.committed", "event_id": "event_1", "item_id": None, "previous_item_id": None}
    ]


def test_input_audio_buffer_commit_names_the_last_item(proto):
    proto.ready(SID, [{"role": "user", "text": "Hi."}])
    assert sent(proto.receive_text('{"type": "input_audio_buffer.commit"}'), ids=False) == [
        {"type": "input_audio_buffer.committed", "item_id": "item_h1_01234567", "previous_item_id": None}
    ]


def test_event_ids_count_every_event_sent(proto):
    proto.ready(SID, [])
    proto.receive_text("not json")
    (cleared,) = sent(proto.receive_text('{"type": "input_audio_buffer.clear"}'))
    assert cleared["event_id"] == "event_3"


def test_client_event_ids_are_not_echoed(proto):
    (cleared,) = sent(proto.receive_text('{"type": "input_audio_buffer.clear", "event_id": "client_7"}'))
    assert cleared == {"type": "input_audio_buffer.cleared", "event_id": "event_1"}


# -- session.update --------------------------------------------------------------


def test_session_update_sets_the_instructions(proto):
    assert sent(proto.receive_text(update(instructions="Be brief."))) == [
        Configure(24000, acks=False, lead_s=0.12, instructions="Be brief."),
        {"type": "session.updated", "event_id": "event_1", "session": session(instructions="Be brief.")},
    ]


def test_session_update_without_instructions_keeps_them(proto):
    proto.receive_text(update(instructions="Be brief."))
    assert sent(proto.receive_text(update()), ids=False) == [
        Configure(24000, acks=False, lead_s=0.12, instructions=None),
        {"type": "session.updated", "session": session(instructions="Be brief.")},
    ]


def test_session_update_with_empty_instructions_clears_them(proto):
    proto.receive_text(update(instructions="Be brief."))
    assert sent(proto.receive_text(update(instructions="")), ids=False) == [
        Configure(24000, acks=False, lead_s=0.12, instructions=""),
        {"type": "session.updated", "session": SESSION},
    ]


def test_session_update_transcription_language_holds_the_transcripts_to_it(proto):
    audio = {"input": {"transcription": {"model": "whisper-1", "language": "es"}}}
    configure, updated = sent(proto.receive_text(update(audio=audio)), ids=False)
    assert configure == Configure(24000, acks=False, lead_s=0.12, language="es")
    assert updated["type"] == "session.updated"


def test_session_update_with_a_language_whisper_does_not_know_changes_nothing(proto):
    audio = {"input": {"transcription": {"language": "xx"}}}
    (error,) = sent(proto.receive_text(update(audio=audio)))
    assert error["error"]["code"] == "invalid_value"
    assert error["error"]["param"] == "session.audio.input.transcription.language"


@pytest.mark.parametrize("instructions", [7, ["Be brief."], {"text": "Be brief."}, True])
def test_session_update_instructions_are_a_string(proto, instructions):
    (error,) = sent(proto.receive_text(update(instructions=instructions)))
    assert error["error"]["code"] == "invalid_message"
    assert error["error"]["param"] == "session.instructions"
    assert error["error"]["message"].startswith("session.update: Expected str")
    assert proto.instructions is None


def test_session_update_instructions_have_a_size_limit(proto):
    assert proto.receive_text(update(instructions="x" * 4000))[0] == Configure(
        24000, acks=False, lead_s=0.12, instructions="x" * 4000
    )
    assert sent(proto.receive_text(update(instructions="x" * 4001)), ids=False) == [
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "code": "invalid_message",
                "message": "session.update: Expected str of length <= 4000 (at session.instructions)",
                "param": "session.instructions",
            },
        }
    ]


def test_session_updated_does_not_echo_long_instructions_whole(proto):
    (_, updated) = sent(proto.receive_text(update(instructions="Be brief. " * 100)))
    assert updated["session"]["instructions"] == ("Be brief. " * 6)[:60] + "…"


@pytest.mark.parametrize(
    "text",
    [
        '{"type": "session.update"}',
        '{"type": "session.update", "session": null}',
        '{"type": "session.update", "session": "realtime"}',
        '{"type": "session.update", "session": [{"instructions": "Be brief."}]}',
    ],
    ids=["missing", "null", "string", "list"],
)
def test_session_update_needs_a_session_object(proto, text):
    (error,) = sent(proto.receive_text(text))
    assert error["error"]["code"] == "invalid_message"
    assert error["error"]["message"].startswith("session.update: ")
    assert "session" in error["error"]["message"]


@pytest.mark.parametrize(
    "audio",
    [
        {"input": {"format": {"type": "audio/pcm", "rate": 24000}}},
        {"output": {"format": {"type": "audio/pcm", "rate": 24000}}},
        {"input": {"format": {"type": "audio/pcm"}}, "output": {"format": {"type": "audio/pcm"}}},
        {"input": {"format": None}},
        {"input": {}, "output": None},
        {"output": {"voice": "alloy"}},
        {"input": {"transcription": {"model": "gpt-4o-transcribe"}}},
    ],
    ids=["input-24k", "output-24k", "no-rate", "format-null", "empty-sides", "voice", "transcription"],
)
def test_session_update_accepts_pcm_at_24k(proto, audio):
    assert sent(proto.receive_text(update(audio=audio))) == [
        Configure(24000, acks=False, lead_s=0.12),
        {"type": "session.updated", "event_id": "event_1", "session": SESSION},
    ]


@pytest.mark.parametrize(
    ("side", "fmt", "said"),
    [
        ("input", {"type": "audio/pcm", "rate": 16000}, '"audio/pcm" at 16000 Hz'),
        ("input", {"type": "audio/pcmu", "rate": 16000}, '"audio/pcmu" at 16000 Hz'),
        ("input", {"type": "audio/opus"}, '"audio/opus"'),
        ("output", {"type": "audio/pcm", "rate": 48000}, '"audio/pcm" at 48000 Hz'),
        ("output", {"type": "g711_ulaw"}, '"g711_ulaw"'),
    ],
    ids=["input-16k", "pcmu-16k", "opus", "output-48k", "beta-name"],
)
def test_session_update_refuses_other_audio_formats(proto, side, fmt, said):
    message = f"{side} audio is audio/pcm at 24000 Hz, audio/pcmu or audio/pcma (8 kHz), not {said}"
    assert sent(proto.receive_text(update(audio={side: {"format": fmt}}))) == [
        err("unsupported_rate", message, 1, param=f"session.audio.{side}.format")
    ]
    assert proto.input_format == proto.output_format == "audio/pcm"  # nothing changed


@pytest.mark.parametrize("kind", ["audio/pcmu", "audio/pcma"])
def test_g711_in_both_directions(proto, kind):
    law = "ulaw" if kind == "audio/pcmu" else "alaw"
    actions = proto.receive_text(
        update(audio={"input": {"format": {"type": kind}}, "output": {"format": {"type": kind}}})
    )
    assert actions[0] == Configure(8000, acks=False, lead_s=0.12)  # the server hears 8 kHz from now on
    said = sent(actions[1:])[0]["session"]["audio"]
    assert said["input"]["format"] == said["output"]["format"] == {"type": kind}
    x = (0.3 * np.sin(2 * np.pi * 440 * np.arange(160) / 8000)).astype(np.float32)
    heard = audio_in(proto.receive_text(append(g711.encode(x, law))))
    assert len(heard) == 160 and np.max(np.abs(heard - x)) < 0.03
    open_response(proto, 1)
    reply = np.sin(2 * np.pi * 300 * np.arange(2400) / 24000).astype(np.float32) * 0.5
    (event,) = sent(proto.audio(reply, 1))
    out = g711.decode(base64.b64decode(event["delta"]), law)
    assert len(out) == 800  # 100 ms at 8 kHz, one byte a sample, sent at once
    assert 0.3 < np.sqrt(np.mean(out[100:] ** 2)) < 0.4  # the tone (0.35 RMS), not noise
    # Back to PCM: 24 kHz in and out again.
    pcm = {"type": "audio/pcm", "rate": 24000}
    actions = proto.receive_text(update(audio={"input": {"format": pcm}, "output": {"format": pcm}}))
    assert actions[0] == Configure(24000, acks=False, lead_s=0.12)
    assert len(delta_samples(proto.audio(reply, 1))) == 2400


def test_g711_output_needs_a_multiple_of_8k():
    proto = RealtimeProtocol(SID, output_rate=22050)
    (error,) = sent(proto.receive_text(update(audio={"output": {"format": {"type": "audio/pcmu"}}})))
    assert error["error"]["code"] == "unsupported_rate" and "multiple of 8 kHz" in error["error"]["message"]


@pytest.mark.parametrize(
    ("side", "fmt", "what"),
    [
        (
            "input",
            {"type": "audio/pcm", "rate": "24000"},
            "Expected int | null, got str (at session.audio.input.format.rate)",
        ),
        ("input", {"rate": 24000}, "Object missing required field type (at session.audio.input.format)"),
        ("input", "pcm16", "Expected object | null, got str (at session.audio.input.format)"),
        ("output", ["audio/pcm"], "Expected object | null, got array (at session.audio.output.format)"),
    ],
    ids=["input-rate-string", "no-type", "string", "list"],
)
def test_session_update_audio_formats_of_the_wrong_shape_are_invalid(proto, side, fmt, what):
    (error,) = sent(proto.receive_text(update(audio={side: {"format": fmt}})), ids=False)
    assert error["error"]["code"] == "invalid_message"
    assert error["error"]["message"] == f"session.update: {what}"


def test_session_update_with_a_refused_format_changes_nothing(proto):
    text = update(instructions="Be brief.", audio={"input": {"format": {"type": "audio/opus"}}})
    (error,) = sent(proto.receive_text(text))
    assert error["error"]["code"] == "unsupported_rate"
    assert proto.instructions is None


def test_session_update_audio_null_changes_nothing(proto):
    assert sent(proto.receive_text(update(audio=None)), ids=False) == [
        Configure(24000, acks=False, lead_s=0.12),
        {"type": "session.updated", "session": SESSION},
    ]


@pytest.mark.parametrize("side", ["input", "output"])
def test_session_update_audio_side_that_is_not_an_object_is_invalid(proto, side):
    (error,) = sent(proto.receive_text(update(audio={side: "pcm16"})))
    assert error["type"] == "error"
    assert error["error"]["code"] == "invalid_message"
    assert error["error"]["param"] == f"session.audio.{side}"


@pytest.mark.parametrize(
    "turns",
    [
        {"type": "server_vad", "threshold": 0.7, "silence_duration_ms": 800, "prefix_padding_ms": 200},
        {"type": "semantic_vad", "eagerness": "low"},
    ],
    ids=["server_vad", "semantic_vad"],
)
def test_session_update_tuning_of_the_servers_turn_detection_is_accepted(proto, turns):
    # docs/protocol.md: turn detection is always the server's, tuned for this pipeline.
    assert sent(proto.receive_text(update(audio={"input": {"turn_detection": turns}})), ids=False) == [
        Configure(24000, acks=False, lead_s=0.12),
        {"type": "session.updated", "session": SESSION},
    ]


def test_the_session_says_the_server_ends_turns_with_its_model():
    semantic = RealtimeProtocol(SID, 24000, semantic=True)
    (created,) = sent(semantic.ready(SID, []), ids=False)
    assert created["session"]["audio"]["input"]["turn_detection"] == {
        "type": "semantic_vad",
        "eagerness": "auto",
        "create_response": True,
        "interrupt_response": True,
    }


@pytest.mark.parametrize(
    "turn_detection",
    [
        None,
        {"type": "push_to_talk"},
        {"type": "server_vad", "create_response": False, "interrupt_response": False},
        {"type": "semantic_vad", "interrupt_response": False},
    ],
    ids=["null", "other", "no-response", "no-interruptions"],
)
def test_session_update_other_turn_detection_is_unsupported(proto, turn_detection):
    text = update(instructions="Be brief.", audio={"input": {"turn_detection": turn_detection}})
    (error,) = sent(proto.receive_text(text), ids=False)
    assert error["error"]["code"] == "unsupported"
    assert error["error"]["param"] == "session.audio.input.turn_detection"
    assert proto.instructions is None  # the update is refused whole


def test_session_update_output_modalities_audio(proto):
    (_, updated) = sent(proto.receive_text(update(output_modalities=["audio"])))
    assert updated["session"]["output_modalities"] == ["audio"]


@pytest.mark.parametrize("modalities", [["text"], ["audio", "text"], []])
def test_session_update_other_output_modalities_are_unsupported(proto, modalities):
    assert sent(proto.receive_text(update(output_modalities=modalities))) == [
        err("unsupported", "output_modalities is ['audio']: replies are spoken", 1, param="session.output_modalities")
    ]


TOOLS = [{"type": "function", "name": "get_time", "description": "Now.", "parameters": {"type": "object"}}]
SPECS = (
    {"type": "function", "function": {"name": "get_time", "description": "Now.", "parameters": {"type": "object"}}},
)


def test_session_update_tools_are_offered_to_the_model(proto):
    configure, updated = sent(proto.receive_text(update(tools=TOOLS)), ids=False)
    assert configure.tools == SPECS
    assert updated["session"]["tools"] == TOOLS and updated["session"]["tool_choice"] == "auto"
    configure, _ = sent(proto.receive_text(update(tool_choice="none")), ids=False)
    assert configure.tools == ()  # kept, not offered
    configure, _ = sent(proto.receive_text(update(instructions="Be brief.")), ids=False)
    assert configure.tools is None  # unchanged


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tools": [{"type": "mcp", "server_label": "x"}]}, "session.tools"),
        ({"tools": [{"type": "function", "name": "get time"}]}, "session.tools"),
        ({"tools": [{"type": "function", "name": "f", "parameters": {"type": 7}}]}, "session.tools"),
        ({"tool_choice": "required"}, "session.tool_choice"),
    ],
    ids=["mcp", "name", "schema", "required"],
)
def test_session_update_tools_it_cannot_offer_are_refused(proto, fields, param):
    (error,) = sent(proto.receive_text(update(**fields)), ids=False)
    assert error["error"]["param"] == param


def test_a_call_of_a_client_tool_is_a_function_call_item_and_ends_the_response(proto):
    proto.receive_text(update(tools=TOOLS))
    open_response(proto, 1)
    call = ToolCallStart(1.0, response=1, call_id="call_1_0_0", name="get_time", arguments="{}")
    kinds = [e["type"] for e in sent(proto.event(call))]
    assert kinds == [
        "response.output_item.added",
        "conversation.item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "conversation.item.done",
    ]
    done = sent(proto.event(AwaitingTools(1.1, response=1, calls=1)))[-1]
    assert done["type"] == "response.done" and done["response"]["status"] == "completed"
    assert done["response"]["output"][1]["call_id"] == "call_1_0_0"
    created = sent(proto.event(ResponseContinued(2.0, response=1, round=1)))[0]
    assert created["type"] == "response.created" and created["response"]["id"] != done["response"]["id"]
    # The server's own tools are its business: no item for them.
    own = ToolCallStart(1.0, response=1, call_id="call_1_0_1", name="calculate", arguments="{}")
    assert proto.event(own) == []


@pytest.mark.parametrize("status", ["ok", "timeout"])
def test_a_call_of_an_mcp_servers_tool_is_an_mcp_call_item_named_by_its_server(proto, status):
    open_response(proto, 1)
    args = '{"order_id": "4512"}'
    call = ToolCallStart(1.0, response=1, call_id="call_1_0_0", name="get_order_status", arguments=args, server="shop")
    added, arguments, progress = sent(proto.event(call))
    item = added["item"]
    assert (added["type"], item["type"], item["server_label"], item["name"]) == (
        "response.output_item.added", "mcp_call", "shop", "get_order_status")  # fmt: skip
    assert (arguments["type"], arguments["arguments"]) == ("response.mcp_call_arguments.done", args)
    assert progress["type"] == "response.mcp_call.in_progress" and progress["item_id"] == item["id"]
    end = ToolCallEnd(2.0, response=1, call_id="call_1_0_0", name="get_order_status", status=status,
                      result="It ships today.", duration_s=0.5, server="shop")  # fmt: skip
    finished, done = sent(proto.event(end))
    assert finished["type"] == ("response.mcp_call.completed" if status == "ok" else "response.mcp_call.failed")
    if status == "ok":
        assert (done["item"]["output"], done["item"]["error"]) == ("It ships today.", None)
    else:
        assert done["item"]["error"] == {"type": "timeout", "message": "It ships today."}
    # Not a call the client must answer: the response is not done for it.
    assert proto.event(AwaitingTools(2.1, response=1, calls=1)) == []


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"model": 7}, "session.model"),
        ({"output_modalities": "audio"}, "session.output_modalities"),
        ({"max_output_tokens": 1.5}, "session.max_output_tokens"),
        ({"audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": "high"}}}},
         "session.audio.input.turn_detection.threshold"),
        ({"audio": {"input": {"turn_detection": {"type": "server_vad", "create_response": "yes"}}}},
         "session.audio.input.turn_detection.create_response"),
        ({"audio": {"input": {"transcription": {"model": ["whisper"]}}}}, "session.audio.input.transcription.model"),
        ({"audio": {"input": {"noise_reduction": {"type": 1}}}}, "session.audio.input.noise_reduction.type"),
        ({"audio": {"output": {"voice": {"name": "alloy"}}}}, "session.audio.output.voice"),
        ({"audio": {"output": {"speed": "fast"}}}, "session.audio.output.speed"),
        ({"tools": {"type": "function"}}, "session.tools"),  # a list
        ({"include": "item.input_audio_transcription.logprobs"}, "session.include"),
    ],
    ids=["model", "modalities", "max-tokens", "threshold", "create-response", "transcription", "noise", "voice",
         "speed", "tools", "include"],
)  # fmt: skip
def test_session_update_documented_fields_of_the_wrong_type_are_invalid(proto, fields, param):
    (error,) = sent(proto.receive_text(update(instructions="Be brief.", **fields)), ids=False)
    assert error["error"]["code"] == "invalid_message"
    assert error["error"]["param"] == param
    assert proto.instructions is None


def test_session_update_events_are_valid_utf8(proto):
    # JSON may escape a lone surrogate; a text frame must be UTF-8, so it cannot be echoed as it came.
    for action in proto.receive_text(update(instructions="Be brief \ud800.")):
        if isinstance(action, Send):
            action.message.encode("utf-8")


# -- input_audio_buffer.append ----------------------------------------------------


def test_append_is_pcm16_little_endian(proto):
    samples = audio_in(proto.receive_text(append(pcm16(0, 32767, -32768, 1, -1, 16384))))
    assert samples.dtype == np.float32
    np.testing.assert_array_equal(samples, np.array([0, 32767, -32768, 1, -1, 16384], dtype=np.float32) / 32768)


def test_append_is_at_24k_and_not_resampled(proto):
    (configure,) = proto.start()
    assert configure.input_rate == 24000
    assert len(audio_in(proto.receive_text(append(bytes(960))))) == 480  # 20 ms at 24 kHz


def test_append_needs_no_session_update_first(proto):
    assert len(audio_in(proto.receive_text(append(pcm16(5, 6))))) == 2


def test_append_of_nothing_is_ignored(proto):
    assert proto.receive_text('{"type": "input_audio_buffer.append", "audio": ""}') == []


@pytest.mark.parametrize("n", [1, 3, 961])
def test_append_of_odd_length_is_dropped(proto, n):
    message = f"PCM16 audio has an even length, not {n} bytes"
    assert sent(proto.receive_text(append(bytes(n)))) == [err("odd_length", message, 1, param="audio")]


@pytest.mark.parametrize(
    "audio",
    ["not base64!", "AAE", "AAAA\nAAAA", "AA AA", "AA-_", "é", "=AAA"],
    ids=["punctuation", "padding", "newline", "space", "urlsafe", "non-ascii", "leading-pad"],
)
def test_append_of_bad_base64_is_dropped(proto, audio):
    text = json.dumps({"type": "input_audio_buffer.append", "audio": audio})
    message = "input_audio_buffer.append: Invalid base64 encoded string (at audio)"
    assert sent(proto.receive_text(text)) == [err("invalid_message", message, 1, param="audio")]


@pytest.mark.parametrize(
    ("audio", "got"), [(None, "null"), (7, "int"), (["AAAA"], "array"), ({"data": "AAAA"}, "object")],
    ids=["null", "number", "list", "object"],
)  # fmt: skip
def test_append_needs_base64_audio(proto, audio, got):
    text = json.dumps({"type": "input_audio_buffer.append", "audio": audio})
    message = f"input_audio_buffer.append: Expected base64 str, got {got} (at audio)"
    assert sent(proto.receive_text(text)) == [err("invalid_message", message, 1, param="audio")]


def test_append_without_audio_is_invalid(proto):
    message = "input_audio_buffer.append: Object missing required field audio"
    assert sent(proto.receive_text('{"type": "input_audio_buffer.append"}')) == [err("invalid_message", message, 1)]


# -- response.cancel and conversation.item.truncate ------------------------------------


def test_response_cancel_stops_the_reply(proto):
    assert proto.receive_text('{"type": "response.cancel"}') == [CancelReply()]


def test_response_cancel_with_a_response_id(proto):
    assert proto.receive_text('{"type": "response.cancel", "response_id": "resp_9"}') == [CancelReply()]


def test_truncate_cuts_the_assistant_item_at_what_was_played(proto):
    open_response(proto, 3)
    text = json.dumps(
        {"type": "conversation.item.truncate", "item_id": item(3), "content_index": 0, "audio_end_ms": 1500}
    )
    assert proto.receive_text(text) == [TruncateReply(response=3, audio_end_ms=1500)]


def test_truncate_finds_the_item_among_several(proto):
    for n in (1, 2, 3):
        open_response(proto, n)
    text = json.dumps({"type": "conversation.item.truncate", "item_id": item(2), "audio_end_ms": 0})
    assert proto.receive_text(text) == [TruncateReply(response=2, audio_end_ms=0)]


@pytest.mark.parametrize("item_id", ["item_a9_01234567", "item_u3_01234567"], ids=["unknown", "user-item"])
def test_truncate_of_an_item_that_is_not_a_reply(proto, item_id):
    open_response(proto, 3)
    text = json.dumps({"type": "conversation.item.truncate", "item_id": item_id, "audio_end_ms": 500})
    assert sent(proto.receive_text(text), ids=False) == [
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "code": "item_truncate_invalid_item_id",
                "message": f'no assistant item "{item_id}"',
                "param": "item_id",
            },
        }
    ]


@pytest.mark.parametrize(
    ("item_id", "what"),
    [(None, "Expected str, got null"), (3, "Expected str, got int"), ("x" * 100, "Expected str of length <= 64")],
    ids=["null", "number", "long"],
)
def test_truncate_needs_an_item_id(proto, item_id, what):
    open_response(proto, 3)
    text = json.dumps({"type": "conversation.item.truncate", "item_id": item_id, "audio_end_ms": 500})
    (error,) = sent(proto.receive_text(text), ids=False)
    assert error["error"]["message"] == f"conversation.item.truncate: {what} (at item_id)"
    assert "x" * 61 not in json.dumps(error)


def test_truncate_of_an_item_forgotten_after_16_newer_replies(proto):
    for n in range(1, 18):
        open_response(proto, n)
    text = json.dumps({"type": "conversation.item.truncate", "item_id": item(1), "audio_end_ms": 500})
    (error,) = sent(proto.receive_text(text))
    assert error["error"]["code"] == "item_truncate_invalid_item_id"
    text = json.dumps({"type": "conversation.item.truncate", "item_id": item(2), "audio_end_ms": 500})
    assert proto.receive_text(text) == [TruncateReply(response=2, audio_end_ms=500)]


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"audio_end_ms": None},
        {"audio_end_ms": -1},
        {"audio_end_ms": 1500.0},
        {"audio_end_ms": "1500"},
        {"audio_end_ms": True},
        {"audio_end_ms": 10**400},
        {"audio_end_ms": 2**63},
        {"audio_end_ms": 86_400_001},
    ],
    ids=["missing", "null", "negative", "float", "string", "bool", "400-digits", "int64", "over-a-day"],
)
def test_truncate_needs_audio_end_ms(proto, fields):
    open_response(proto, 3)
    text = json.dumps({"type": "conversation.item.truncate", "item_id": item(3), **fields})
    (error,) = sent(proto.receive_text(text), ids=False)
    assert error["error"]["type"] == "invalid_request_error"
    assert error["error"]["code"] == "invalid_message"
    assert error["error"]["message"].startswith("conversation.item.truncate: ")
    assert "audio_end_ms" in error["error"]["message"]


def test_truncated_answers_with_the_item_cut(proto):
    open_response(proto, 3)
    assert sent(proto.truncated(TruncateReply(3, 1500), "It is ten"), ids=False) == [
        {"type": "conversation.item.truncated", "item_id": item(3), "content_index": 0, "audio_end_ms": 1500}
    ]


def test_truncated_with_no_text_is_an_invalid_item(proto):
    # None: the session no longer knows the reply (it is over, or was never stored).
    open_response(proto, 3)
    (error,) = sent(proto.truncated(TruncateReply(3, 1500), None), ids=False)
    assert error["error"]["code"] == "item_truncate_invalid_item_id"
    assert error["error"]["message"] == "that item is no longer known"


def test_truncated_of_an_unknown_response_is_an_invalid_item(proto):
    assert sent(proto.truncated(TruncateReply(9, 1500), "It is ten")) == [
        err("item_truncate_invalid_item_id", "that item is no longer known", 1)
    ]


# -- server -> client ----------------------------------------------------------------


@pytest.mark.parametrize("code", ["invalid_json", "input_too_fast", "idle_timeout", "slow_client", "unknown_session"])
def test_error_of_the_client_is_an_invalid_request_error(proto, code):
    assert sent(proto.error(code, "what went wrong", fatal=True, t=2.5)) == [err(code, "what went wrong", 1)]


@pytest.mark.parametrize("code", ["pipeline", "internal"])
def test_error_of_the_server_is_a_server_error(proto, code):
    assert sent(proto.error(code, "llm: timed out", t=2.5)) == [err(code, "llm: timed out", 1, kind="server_error")]


def test_audio_of_no_response_is_not_sent(proto):
    assert proto.audio(np.zeros(480, dtype=np.float32), response=None) == []


def test_audio_of_an_unknown_response_is_not_sent(proto):
    open_response(proto, 1)
    assert proto.audio(np.zeros(480, dtype=np.float32), response=2) == []


def test_audio_is_a_base64_pcm16_delta_of_its_response(proto):
    open_response(proto, 1)
    audio = np.array([0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -1.5, 1 / 32768], dtype=np.float32)
    delta = base64.b64encode(pcm16(0, 16384, -16384, 32767, -32768, 32767, -32768, 1)).decode()
    assert sent(proto.audio(audio, response=1), ids=False) == [
        {
            "type": "response.output_audio.delta",
            "response_id": f"resp_1_{SID[:8]}",
            "item_id": item(1),
            "output_index": 0,
            "content_index": 0,
            "delta": delta,
        }
    ]


def test_audio_at_24k_comes_back_as_it_was_sent(proto):
    open_response(proto, 1)
    rng = np.random.default_rng(0)
    audio = (rng.integers(-32768, 32767, 480) / 32768).astype(np.float32)
    (action,) = proto.audio(audio, response=1)
    (event,) = sent([action])
    again = audio_in(proto.receive_text(append(base64.b64decode(event["delta"]))))
    np.testing.assert_array_equal(again, audio)


@pytest.mark.parametrize("rate", [16000, 22050, 48000])
def test_audio_at_another_rate_is_resampled_to_24k(rate):
    proto = RealtimeProtocol(SID, output_rate=rate)
    open_response(proto, 1)
    t = np.arange(rate) / rate
    tone = (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)  # 1 s of 1 kHz, in 20 ms chunks
    chunks = [delta_samples(proto.audio(tone[i : i + rate // 50], 1)) for i in range(0, rate, rate // 50)]
    out = np.concatenate(chunks).astype(np.float64) / 32768
    assert 24000 - 1200 <= len(out) <= 24000  # a resampler keeps a few ms back (at most 50 ms)
    spectrum = np.abs(np.fft.rfft(out * np.hanning(len(out))))
    assert abs(np.argmax(spectrum) * 24000 / len(out) - 1000) < 2  # still 1 kHz: at 24 kHz
    level = 10 * np.log10(np.mean(out[2400:-2400] ** 2) / 0.125)
    assert abs(level) < 0.1


def test_audio_sends_no_empty_deltas():
    proto = RealtimeProtocol(SID, output_rate=16000)
    open_response(proto, 1)
    deltas = [sent(proto.audio(np.full(320, 0.1, dtype=np.float32), 1)) for _ in range(10)]
    assert all(event["delta"] for d in deltas for event in d)


@pytest.mark.parametrize(("reduction", "denoise", "shown"), [
    ({"type": "near_field"}, "rnnoise", {"type": "near_field"}),
    ({"type": "far_field"}, "rnnoise", {"type": "far_field"}),
    (None, "off", None),
])  # fmt: skip
def test_session_update_noise_reduction_turns_the_suppressor_on_or_off(proto, reduction, denoise, shown):
    configure, updated = sent(proto.receive_text(update(audio={"input": {"noise_reduction": reduction}})), ids=False)
    assert configure == Configure(24000, acks=False, lead_s=0.12, denoise=denoise)
    assert updated["session"]["audio"]["input"]["noise_reduction"] == shown


def test_session_update_without_noise_reduction_leaves_it_as_it_was(proto):
    configure, _ = sent(proto.receive_text(update(instructions="Be brief.")), ids=False)
    assert configure.denoise is None


def test_session_update_with_an_unknown_noise_reduction_changes_nothing(proto):
    (error,) = sent(proto.receive_text(update(audio={"input": {"noise_reduction": {"type": "studio"}}})))
    assert error["error"]["code"] == "invalid_value"
    assert error["error"]["param"] == "session.audio.input.noise_reduction.type"
