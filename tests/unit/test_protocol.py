"""Our protocol (``/ws``) without I/O: frames in, actions and messages out.

In the manner of websockets' ``tests/test_protocol.py``: every case a named
test, what the client sends in, the exact actions and messages out
(``docs/protocol.md`` is the contract). ``event()`` (pipeline events to
messages) is tested with the typed events, elsewhere.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from core.events import (
    AsrFinal,
    AsrPartial,
    Backchannel,
    BargeIn,
    LlmFirstToken,
    PlaybackPaused,
    PlaybackResumed,
    PlaybackStart,
    PlaybackStopped,
    ResponseStart,
    SpeechEnd,
    SpeechStart,
    Truncate,
    TtsChunk,
    TurnEnd,
)
from transport.protocol import (
    PUBLIC_EVENTS,
    AudioIn,
    CancelReply,
    Configure,
    KeyPressed,
    Limits,
    PlayedReport,
    Send,
    TruncateReply,
    VoiceProtocol,
)

NOT_A_MESSAGE = "a message is a JSON object with a string 'type'"
ENDS_EARLY = "it ends too early, or a string holds a lone surrogate (\\ud800-\\udfff)"
RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)


def sent(actions):
    """The actions, with each ``Send`` as what the client gets: a JSON object (text) or bytes (binary)."""
    out = []
    for a in actions:
        if isinstance(a, Send):
            out.append(json.loads(a.message) if isinstance(a.message, str) else a.message)
        else:
            out.append(a)
    return out


def err(code, message, fatal=False):
    return {"type": "error", "code": code, "message": message, "fatal": fatal}


def audio_in(actions) -> np.ndarray:
    """The samples of the one ``AudioIn`` (it holds an array, so it is not compared with ``==``)."""
    assert len(actions) == 1 and isinstance(actions[0], AudioIn), actions
    return actions[0].samples


def pcm16(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}h", *values)


def hello(**fields) -> str:
    return json.dumps({"type": "hello", "sample_rate": 16000, **fields})


@pytest.fixture
def proto() -> VoiceProtocol:
    return VoiceProtocol("s0", output_rate=24000)


@pytest.fixture
def started(proto) -> VoiceProtocol:
    """A protocol that has had its ``hello`` (16 kHz, acks)."""
    proto.receive_text(hello(acks=True))
    return proto


# -- opening -------------------------------------------------------------------


def test_start_sends_nothing_and_waits_for_hello(proto):
    assert proto.start() == []
    assert proto.configured is None


# -- hello ---------------------------------------------------------------------


def test_hello_with_only_a_rate_takes_the_defaults(proto):
    configure = Configure(16000, acks=False, lead_s=0.12, echo_cancel=True, instructions=None, resume=None)
    assert proto.receive_text('{"type": "hello", "sample_rate": 16000}') == [configure]
    assert proto.configured == configure


@pytest.mark.parametrize("rate", RATES)
def test_hello_accepts_every_listed_rate(proto, rate):
    assert proto.receive_text(hello(sample_rate=rate)) == [Configure(rate, acks=False, lead_s=0.12)]


@pytest.mark.parametrize("rate", [11025, 96000, 0, -16000, 2**31])
def test_hello_with_an_unlisted_rate_is_unsupported(proto, rate):
    message = f"sample_rate {rate} is not supported; use one of 8000, 16000, 22050, 24000, 32000, 44100, 48000"
    assert sent(proto.receive_text(hello(sample_rate=rate))) == [err("unsupported_rate", message)]
    assert proto.configured is None


def test_hello_after_an_unsupported_rate_may_be_sent_again(proto):
    proto.receive_text(hello(sample_rate=11025))
    assert proto.receive_text(hello(sample_rate=8000)) == [Configure(8000, acks=False, lead_s=0.12)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"type": "hello"}', "hello: Object missing required field sample_rate"),
        ('{"type": "hello", "sample_rate": "16000"}', "hello: Expected int, got str (at sample_rate)"),
        ('{"type": "hello", "sample_rate": 16000.0}', "hello: Expected int, got float (at sample_rate)"),
        ('{"type": "hello", "sample_rate": true}', "hello: Expected int, got bool (at sample_rate)"),
        ('{"type": "hello", "sample_rate": null}', "hello: Expected int, got null (at sample_rate)"),
        ('{"type": "hello", "sample_rate": [16000]}', "hello: Expected int, got array (at sample_rate)"),
        ('{"type": "hello", "sample_rate": 1' + "0" * 30 + "}", "hello: Expected int <= 2147483648 (at sample_rate)"),
    ],
    ids=["missing", "string", "float", "bool", "null", "list", "huge"],
)
def test_hello_sample_rate_is_an_integer(proto, text, message):
    assert sent(proto.receive_text(text)) == [err("invalid_message", message)]
    assert proto.configured is None


@pytest.mark.parametrize("language", ["es", "auto", "ja"])
def test_hello_names_the_language_spoken(proto, language):
    (configure,) = proto.receive_text(hello(language=language))
    assert configure == Configure(16000, acks=False, lead_s=0.12, language=language)


@pytest.mark.parametrize("language", ["xx", "english", "e"])
def test_hello_with_a_language_whisper_does_not_know_is_refused(proto, language):
    (message,) = sent(proto.receive_text(hello(language=language)))
    assert message["type"] == "error" and message["code"] == "invalid_message" and "language" in message["message"]
    assert proto.configured is None


def test_hello_with_acks_and_without_echo_cancel(proto):
    actions = proto.receive_text(hello(acks=True, echo_cancel=False))
    assert actions == [Configure(16000, acks=True, lead_s=0.12, echo_cancel=False)]


@pytest.mark.parametrize(
    "fields",
    [{"acks": 1}, {"acks": "true"}, {"acks": None}, {"echo_cancel": 0}, {"echo_cancel": "false"}],
    ids=["acks-int", "acks-string", "acks-null", "echo_cancel-int", "echo_cancel-string"],
)
def test_hello_acks_and_echo_cancel_are_booleans(proto, fields):
    ((name, value),) = fields.items()
    got = {int: "int", str: "str", type(None): "null"}[type(value)]
    message = f"hello: Expected bool, got {got} (at {name})"
    assert sent(proto.receive_text(hello(**fields))) == [err("invalid_message", message)]
    assert proto.configured is None


@pytest.mark.parametrize(("lead_ms", "lead_s"), [(40, 0.04), (1000, 1.0), (250, 0.25), (120.5, 0.1205)])
def test_hello_lead_ms_from_40_to_1000(proto, lead_ms, lead_s):
    assert proto.receive_text(hello(lead_ms=lead_ms)) == [Configure(16000, acks=False, lead_s=lead_s)]


@pytest.mark.parametrize("lead_ms", ["39", "1001", "39.99", "0", "-120"])
def test_hello_lead_ms_out_of_range(proto, lead_ms):
    text = '{"type": "hello", "sample_rate": 16000, "lead_ms": ' + lead_ms + "}"
    assert sent(proto.receive_text(text)) == [err("invalid_message", "'lead_ms' is a number from 40 to 1000")]
    assert proto.configured is None


@pytest.mark.parametrize(
    ("lead_ms", "code"),
    [("true", "invalid_message"), ('"120"', "invalid_message"), ("null", "invalid_message"),
     ("1e400", "invalid_message"), ("NaN", "invalid_json"), ("Infinity", "invalid_json")],
)  # fmt: skip
def test_hello_lead_ms_not_a_number(proto, lead_ms, code):
    text = '{"type": "hello", "sample_rate": 16000, "lead_ms": ' + lead_ms + "}"  # raw JSON: NaN, Infinity
    (error,) = sent(proto.receive_text(text))
    assert error["code"] == code
    assert "lead_ms" in error["message"] or code == "invalid_json"
    assert proto.configured is None


def test_hello_lead_ms_bounds_come_from_the_limits():
    proto = VoiceProtocol("s0", 24000, Limits(lead_s=0.2, min_lead_s=0.1, max_lead_s=0.5))
    assert proto.receive_text(hello()) == [Configure(16000, acks=False, lead_s=0.2)]
    proto = VoiceProtocol("s0", 24000, Limits(lead_s=0.2, min_lead_s=0.1, max_lead_s=0.5))
    assert sent(proto.receive_text(hello(lead_ms=600))) == [
        err("invalid_message", "'lead_ms' is a number from 100 to 500")
    ]


@pytest.mark.parametrize("session", ["9f2c41d0e8b7a6c5", "x", "a" * 64])
def test_hello_session_resumes_a_stored_conversation(proto, session):
    assert proto.receive_text(hello(session=session)) == [Configure(16000, False, 0.12, resume=session)]


def test_hello_session_null_is_a_new_conversation(proto):
    assert proto.receive_text(hello(session=None)) == [Configure(16000, acks=False, lead_s=0.12, resume=None)]


@pytest.mark.parametrize(
    ("session", "what"),
    [("", "Expected str of length >= 1"), ("a" * 65, "Expected str of length <= 64"),
     (1234, "Expected str | null, got int"), (["9f2c"], "Expected str | null, got array"),
     ({"id": "9f2c"}, "Expected str | null, got object"),
     (True, "Expected str | null, got bool")],
)  # fmt: skip
def test_hello_session_is_a_short_id(proto, session, what):
    message = f"hello: {what} (at session)"
    assert sent(proto.receive_text(hello(session=session))) == [err("invalid_message", message)]
    assert proto.configured is None


def test_hello_ignores_fields_it_does_not_know(proto):
    assert proto.receive_text(hello(codec="opus", version=2)) == [Configure(16000, acks=False, lead_s=0.12)]


def test_second_hello_is_refused_and_changes_nothing(started):
    before = started.configured
    message = "the session is already started; 'hello' comes once"
    assert sent(started.receive_text(hello(sample_rate=48000))) == [err("not_ready", message)]
    assert started.configured == before


# -- hello.extra_events: the messages outside harnesses read (voicebench) -----------

# A turn, a reply the person cuts, a backchannel over the next: the events the core emits.
CONVERSATION = [
    SpeechStart(0.4, onset=0.2, utterance=1),
    AsrPartial(0.9, text="what time", stable="what"),
    SpeechEnd(1.6, end=1.1, utterance=1, level_db=-22.0),
    AsrFinal(1.7, text="what time is it", utterance=1),
    ResponseStart(1.7, response=1, utterance=1, text="what time is it"),
    LlmFirstToken(1.8, response=1),  # internal: sent to no one
    TtsChunk(2.0, response=1, chunk=1, text="It is noon."),
    PlaybackStart(2.02, response=1),  # internal
    TtsChunk(2.4, response=1, chunk=2, text="Lunch is ready."),
    PlaybackPaused(2.9, response=1, utterance=None),
    BargeIn(3.3, response=1, utterance=2, reason="words", paused_at=2.9, tokens=9),
    PlaybackStopped(3.3, response=1),
    Truncate(3.3, response=1, audio_end_ms=880, text="It is noon."),
    TurnEnd(3.3, response=1, text="It is noon.", interrupted=True),
    AsrFinal(3.5, text="stop", utterance=2),
    ResponseStart(3.5, response=2, utterance=2, text="stop"),
    TtsChunk(3.9, response=2, chunk=1, text="Sure."),
    Backchannel(4.2, utterance=3, text="okay"),
    PlaybackResumed(4.2, response=2, reason="backchannel"),
    TurnEnd(4.6, response=2, text="Sure."),
]


def conversation(proto: VoiceProtocol) -> list[dict]:
    """What the client is sent of CONVERSATION, in order."""
    return [message for event in CONVERSATION for message in sent(proto.event(event))]


def said(messages: list[dict], kind: str) -> list[dict]:
    return [m for m in messages if m["type"] == kind]


def test_without_extra_events_only_our_events_are_sent(started):
    ours = {name for name, _ in PUBLIC_EVENTS.values()}
    messages = conversation(started)
    assert len(messages) == len(CONVERSATION) - 2  # one a public event, none for the two internal ones
    assert {m["type"] for m in messages} <= ours and not {"transcript", "clear"} & ours
    assert started.extra_events == frozenset()


@pytest.mark.parametrize("extra", [[], ["transcript"], ["clear"], ["transcript", "clear"], ["clear", "clear"]])
def test_extra_events_leave_the_session_and_our_events_as_they_were(proto, extra):
    plain = VoiceProtocol("s0", output_rate=24000)
    agreed = plain.receive_text(hello())
    assert proto.receive_text(hello(extra_events=extra)) == agreed  # the connection is told nothing new
    assert proto.extra_events == frozenset(extra)
    ours = [m for m in conversation(proto) if m["type"] not in ("transcript", "clear")]
    assert ours == conversation(plain)  # added, in order after the event they come of; nothing else changes


def test_extra_transcript_sends_what_the_person_said_and_what_was_heard_of_the_reply(proto):
    proto.receive_text(hello(extra_events=["transcript"]))
    messages = conversation(proto)
    assert said(messages, "transcript") == [
        {"type": "transcript", "t": 0.9, "role": "user", "text": "what time", "final": False},
        {"type": "transcript", "t": 1.7, "role": "user", "text": "what time is it", "final": True},
        {"type": "transcript", "t": 2.0, "role": "agent", "text": "It is noon.", "final": False},
        {"type": "transcript", "t": 2.4, "role": "agent", "text": "It is noon. Lunch is ready.", "final": False},
        {"type": "transcript", "t": 3.3, "role": "agent", "text": "It is noon.", "final": True},  # as heard
        {"type": "transcript", "t": 3.5, "role": "user", "text": "stop", "final": True},
        {"type": "transcript", "t": 3.9, "role": "agent", "text": "Sure.", "final": False},  # its own reply's
        {"type": "transcript", "t": 4.6, "role": "agent", "text": "Sure.", "final": True},
    ]
    assert said(messages, "clear") == []
    assert proto._said == {}  # each reply's text is let go at its turn_end


def test_extra_transcript_follows_the_event_it_comes_of(proto):
    proto.receive_text(hello(extra_events=["transcript"]))
    kinds = [m["type"] for m in sent(proto.event(AsrFinal(1.7, text="hi", utterance=1)))]
    assert kinds == ["transcript_final", "transcript"]


def test_extra_transcript_of_an_utterance_with_no_words_is_an_empty_final(proto):
    # Sent, not left out: a harness scoring the words counts what was not heard.
    proto.receive_text(hello(extra_events=["transcript"]))
    (_, message) = sent(proto.event(AsrFinal(2.0, text="", utterance=4)))
    assert message == {"type": "transcript", "t": 2.0, "role": "user", "text": "", "final": True}


def test_extra_transcript_always_says_final_and_never_names_the_agent_assistant(proto):
    # voicebench reads a transcript without "final" as final, and any role but "agent" as the user's.
    proto.receive_text(hello(extra_events=["transcript"]))
    for message in said(conversation(proto), "transcript"):
        assert isinstance(message["final"], bool) and message["role"] in ("user", "agent")
        assert isinstance(message["text"], str)


def test_extra_clear_comes_when_the_buffer_is_to_be_flushed(proto):
    proto.receive_text(hello(extra_events=["clear"]))
    messages = conversation(proto)
    assert said(messages, "clear") == [{"type": "clear", "t": 3.3}]  # playback_stopped's, not the pause's
    assert said(messages, "transcript") == []
    kinds = [m["type"] for m in messages]
    assert kinds.index("clear") == kinds.index("playback_stopped") + 1


def test_extra_messages_are_compact_utf8_json(proto):
    proto.receive_text(hello(extra_events=["transcript"]))
    (_, message) = proto.event(AsrFinal(1.0, text="café", utterance=1))
    assert message.message == '{"type":"transcript","t":1.0,"role":"user","text":"café","final":true}'


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["transcripts"], '\'extra_events\' names messages to add (transcript, clear), not "transcripts"'),
     (["transcript", "Clear"], '\'extra_events\' names messages to add (transcript, clear), not "Clear"'),
     (["x" * 64], "'extra_events' names messages to add (transcript, clear), not \"" + "x" * 60 + '"…'),
     ("transcript", "hello: Expected array, got str (at extra_events)"),
     (True, "hello: Expected array, got bool (at extra_events)"),
     (None, "hello: Expected array, got null (at extra_events)"),
     ({"transcript": True}, "hello: Expected array, got object (at extra_events)"),
     ([1], "hello: Expected str, got int (at extra_events[0])"),
     (["x" * 65], "hello: Expected str of length <= 64 (at extra_events[0])"),
     (["clear"] * 9, "hello: Expected array of length <= 8 (at extra_events)")],
    ids=["unknown", "case", "long-quoted", "string", "bool", "null", "object", "int", "too-long", "too-many"],
)  # fmt: skip
def test_hello_with_bad_extra_events_is_refused_and_says_what_may_be_asked(proto, extra, message):
    assert sent(proto.receive_text(hello(extra_events=extra))) == [err("invalid_message", message)]
    assert proto.configured is None and proto.extra_events == frozenset()
    assert proto.receive_text(hello(extra_events=["transcript"])) == [Configure(16000, acks=False, lead_s=0.12)]


def test_second_hello_cannot_ask_for_extra_events(started):
    started.receive_text(hello(extra_events=["transcript", "clear"]))
    assert started.extra_events == frozenset()


# -- ready ---------------------------------------------------------------------


def test_ready_answers_hello_with_what_was_agreed(proto):
    proto.receive_text(hello(sample_rate=48000, lead_ms=250))
    assert sent(proto.ready("9f2c", [])) == [
        {
            "type": "ready",
            "protocol": 1,
            "session": "9f2c",
            "sample_rate": 48000,
            "output_sample_rate": 24000,
            "max_frame_bytes": 65536,
            "lead_ms": 250,
            "history": [],
        }
    ]


def test_ready_carries_the_history_and_the_session_id(started):
    history = [
        {"role": "user", "text": "What time is it?"},
        {"role": "assistant", "text": "It is", "interrupted": True},
    ]
    (ready,) = sent(started.ready("a1b2c3", history))
    assert (ready["session"], ready["history"]) == ("a1b2c3", history)
    assert started.session_id == "a1b2c3"


def test_ready_reports_the_configured_frame_limit():
    proto = VoiceProtocol("s0", 22050, Limits(max_frame_bytes=4096))
    proto.receive_text(hello())
    (ready,) = sent(proto.ready("s0", []))
    assert (ready["max_frame_bytes"], ready["output_sample_rate"]) == (4096, 22050)


def test_ready_messages_are_compact_utf8_json(started):
    (message,) = started.ready("s0", [{"role": "user", "text": "café"}])
    assert isinstance(message, Send) and isinstance(message.message, str)
    assert message.message.startswith('{"type":"ready","protocol":1,')  # no spaces
    assert '"text":"café"' in message.message  # not \u00e9


# -- binary frames: microphone audio ----------------------------------------------


def test_audio_before_hello_is_dropped(proto):
    assert sent(proto.receive_binary(pcm16(0, 0))) == [err("not_ready", "audio before 'hello' is dropped")]


def test_audio_frame_is_pcm16_little_endian(started):
    samples = audio_in(started.receive_binary(pcm16(0, 32767, -32768, 1, -1, 16384)))
    assert samples.dtype == np.float32
    expected = np.array([0, 32767, -32768, 1, -1, 16384], dtype=np.float32) / 32768
    np.testing.assert_array_equal(samples, expected)


def test_audio_frame_is_not_resampled(proto):
    proto.receive_text(hello(sample_rate=48000))
    assert len(audio_in(proto.receive_binary(bytes(1920)))) == 960  # 20 ms at the client's rate


def test_audio_frame_of_one_sample(started):
    np.testing.assert_array_equal(audio_in(started.receive_binary(pcm16(-16384))), [-0.5])


def test_empty_audio_frame_is_ignored(started):
    assert started.receive_binary(b"") == []


@pytest.mark.parametrize("n", [1, 3, 641])
def test_audio_frame_of_odd_length_is_dropped(started, n):
    message = f"a PCM16 frame has an even length, not {n} bytes"
    assert sent(started.receive_binary(bytes(n))) == [err("odd_length", message)]


def test_audio_frame_of_max_frame_bytes_is_accepted(started):
    assert len(audio_in(started.receive_binary(bytes(65536)))) == 32768


def test_audio_frame_over_max_frame_bytes_is_dropped(started):
    message = "65538 bytes; frames are at most 65536"
    assert sent(started.receive_binary(bytes(65538))) == [err("frame_too_large", message)]


def test_audio_frame_over_max_frame_bytes_and_odd_is_an_odd_length(started):
    message = "a PCM16 frame has an even length, not 65537 bytes"
    assert sent(started.receive_binary(bytes(65537))) == [err("odd_length", message)]


def test_audio_frame_limit_comes_from_the_limits():
    proto = VoiceProtocol("s0", 24000, Limits(max_frame_bytes=8))
    proto.receive_text(hello())
    assert len(audio_in(proto.receive_binary(bytes(8)))) == 4
    assert sent(proto.receive_binary(bytes(10))) == [err("frame_too_large", "10 bytes; frames are at most 8")]


# -- text frames that are not messages ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", f"not JSON: {ENDS_EARLY}"),
        ("hello", "not JSON: JSON is malformed: invalid character (byte 0)"),
        ('{"type": "hello"', f"not JSON: {ENDS_EARLY}"),
        ("{'type': 'hello'}", "not JSON: JSON is malformed: object keys must be strings (byte 1)"),
        ('["hello"]', NOT_A_MESSAGE),
        ('"hello"', NOT_A_MESSAGE),
        ("16000", NOT_A_MESSAGE),
        ("null", NOT_A_MESSAGE),
        ("{}", NOT_A_MESSAGE),
        ('{"sample_rate": 16000}', NOT_A_MESSAGE),
        ('{"type": null}', NOT_A_MESSAGE),
        ('{"type": 1}', NOT_A_MESSAGE),
        ('{"type": ["hello"]}', NOT_A_MESSAGE),
    ],
    ids=[
        "empty",
        "word",
        "truncated",
        "single-quotes",
        "array",
        "string",
        "number",
        "null",
        "no-type",
        "no-type-fields",
        "type-null",
        "type-number",
        "type-list",
    ],
)
def test_text_that_is_not_a_message_is_invalid_json(proto, text, message):
    assert sent(proto.receive_text(text)) == [err("invalid_json", message)]
    assert proto.configured is None


def test_deeply_nested_json_is_invalid_json(proto):
    (error,) = sent(proto.receive_text("[" * 100_000))
    assert error["code"] == "invalid_json"


@pytest.mark.parametrize("kind", ["goodbye", "Hello", "HELLO", "truncate", "session.update", ""])
def test_unknown_type(started, kind):
    message = f"unknown message type {json.dumps(kind)}"
    assert sent(started.receive_text(json.dumps({"type": kind}))) == [err("unknown_type", message)]


def test_unknown_type_before_hello_is_an_unknown_type(proto):
    assert sent(proto.receive_text('{"type": "goodbye"}')) == [err("unknown_type", 'unknown message type "goodbye"')]


def test_unknown_type_is_quoted_in_at_most_60_characters_escaped(started):
    kind = "\u00e9\n<script>" + "x" * 100
    (error,) = sent(started.receive_text(json.dumps({"type": kind})))
    assert error == err("unknown_type", f"unknown message type {json.dumps(kind[:60])}…")
    assert "\n" not in error["message"] and "é" not in error["message"]


def test_a_lone_surrogate_anywhere_is_refused_as_json_this_server_does_not_read(started):
    # JSON may escape a lone surrogate; no text frame the server sends, nor anything it stores, may hold one.
    for text in ('{"type": "\\ud800"}', '{"type": "hello", "session": "\\udfff"}'):
        (action,) = started.receive_text(text)
        action.message.encode("utf-8")
        assert json.loads(action.message)["code"] == "invalid_json"


def test_a_number_too_long_to_read_is_an_invalid_message(started):
    (action,) = started.receive_text('{"type": "played", "samples": ' + "9" * 5000 + "}")
    assert sent([action]) == [err("invalid_message", "played: Integer value out of range (at samples)")]


def test_a_number_too_long_in_a_field_it_ignores_is_ignored(started):
    assert started.receive_text('{"type": "cancel", "x": ' + "9" * 5000 + "}") == [CancelReply()]


# -- played ----------------------------------------------------------------------


def test_played_before_hello_is_refused(proto):
    assert sent(proto.receive_text('{"type": "played", "samples": 0}')) == [err("not_ready", "send 'hello' first")]


def test_played_reports_totals(started):
    assert started.receive_text('{"type": "played", "samples": 48000, "dropped": 960}') == [PlayedReport(48000, 960)]


def test_played_dropped_defaults_to_zero(started):
    assert started.receive_text('{"type": "played", "samples": 480}') == [PlayedReport(480, 0)]


def test_played_totals_may_be_large(started):
    n = 24000 * 3600 * 24 * 365
    assert started.receive_text(json.dumps({"type": "played", "samples": n, "dropped": n})) == [PlayedReport(n, n)]


def test_played_without_acks_is_passed_on(proto):
    # Whether 'played' is welcome without acks is the connection's call (it answers not_ready).
    proto.receive_text(hello())
    assert proto.receive_text('{"type": "played", "samples": 480}') == [PlayedReport(480, 0)]


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"samples": None},
        {"samples": "480"},
        {"samples": 480.0},
        {"samples": True},
        {"samples": -1},
        {"samples": 480, "dropped": None},
        {"samples": 480, "dropped": "0"},
        {"samples": 480, "dropped": 0.5},
        {"samples": 480, "dropped": False},
        {"samples": 480, "dropped": -1},
        {"played": 480},
    ],
    ids=[
        "missing",
        "samples-null",
        "samples-string",
        "samples-float",
        "samples-bool",
        "samples-negative",
        "dropped-null",
        "dropped-string",
        "dropped-float",
        "dropped-bool",
        "dropped-negative",
        "wrong-name",
    ],
)
def test_played_needs_integer_totals(started, fields):
    (error,) = sent(started.receive_text(json.dumps({"type": "played", **fields})))
    assert error["code"] == "invalid_message"
    assert error["message"].startswith("played: ")
    assert "samples" in error["message"] or "dropped" in error["message"]


# -- cancel ----------------------------------------------------------------------


def test_cancel_before_hello_is_refused(proto):
    assert sent(proto.receive_text('{"type": "cancel"}')) == [err("not_ready", "send 'hello' first")]


def test_cancel_stops_the_reply(started):
    assert started.receive_text('{"type": "cancel"}') == [CancelReply()]


def test_cancel_ignores_other_fields(started):
    assert started.receive_text('{"type": "cancel", "response": 3, "reason": "button"}') == [CancelReply()]


# -- server -> client ----------------------------------------------------------------


def test_error_message(proto):
    assert sent(proto.error("input_too_fast", "0.50 s dropped", t=1.25)) == [
        {"type": "error", "code": "input_too_fast", "message": "0.50 s dropped", "fatal": False, "t": 1.25}
    ]


def test_fatal_error_message(proto):
    assert sent(proto.error("idle_timeout", "nothing received for 300 s", fatal=True, t=300.0)) == [
        {"type": "error", "code": "idle_timeout", "message": "nothing received for 300 s", "fatal": True, "t": 300.0}
    ]


def test_error_message_without_a_time(proto):
    assert sent(proto.error("store_unavailable", "kept in memory")) == [err("store_unavailable", "kept in memory")]


def test_error_message_is_sent_before_hello_too(proto):
    assert sent(proto.error("idle_timeout", "bye", fatal=True)) == [err("idle_timeout", "bye", fatal=True)]


def test_reply_audio_is_one_pcm16_little_endian_binary_frame(started):
    audio = np.array([0.0, 0.5, -0.5, 1.0, -1.0, 1 / 32768, -1 / 32768], dtype=np.float32)
    assert started.audio(audio, response=1) == [Send(pcm16(0, 16384, -16384, 32767, -32768, 1, -1))]


def test_reply_audio_beyond_full_scale_is_clipped(started):
    audio = np.array([1.5, -1.5, 100.0, -100.0], dtype=np.float32)
    assert started.audio(audio, response=1) == [Send(pcm16(32767, -32768, 32767, -32768))]


def test_reply_audio_is_sent_at_the_output_rate():
    proto = VoiceProtocol("s0", output_rate=22050)
    proto.receive_text(hello())
    (frame,) = sent(proto.audio(np.zeros(441, dtype=np.float32), response=None))
    assert frame == bytes(882)  # 20 ms at 22050 Hz, not resampled


def test_reply_audio_comes_back_as_it_was_sent(started):
    rng = np.random.default_rng(0)
    audio = (rng.integers(-32768, 32767, 960) / 32768).astype(np.float32)
    (frame,) = started.audio(audio, response=2)
    np.testing.assert_array_equal(audio_in(started.receive_binary(frame.message)), audio)


@pytest.mark.parametrize("text", ["It is ten.", None])
def test_truncated_sends_nothing(started, text):
    # Our clients say what they played ('played'); the truncation is the 'truncate' event.
    assert started.truncated(TruncateReply(response=1, audio_end_ms=800), text) == []


def test_every_stage_that_can_fail_tells_the_client_what_it_means():
    """Each ``_error("stage", ...)`` in the shell (the session and its stages) has its sentence in FAILURES
    (else the generic one)."""
    import re
    from pathlib import Path

    from transport.protocol import FAILURES

    shell = Path(__file__).resolve().parents[2] / "shell"
    source = "".join(path.read_text() for path in sorted(shell.rglob("*.py")))
    stages = set(re.findall(r'_error\("(\w+)"', source)) - {"internal"}
    assert stages and stages <= set(FAILURES), stages - set(FAILURES)


@pytest.mark.parametrize(
    "text",
    [
        '{"type": "hello", "sample_rate": 16000, "session": "\\ud800"}',  # the escape: msgspec refuses it
        '{"type": "hello", "sample_rate": 16000, "session": "\ud800"}',  # in the str itself (no frame is)
    ],
)
def test_a_lone_surrogate_is_refused_by_both_dialects_never_passed_on(proto, text):
    from transport.realtime import RealtimeProtocol

    (sent,) = proto.receive_text(text)
    assert json.loads(sent.message)["code"] == "invalid_json" and proto.configured is None
    realtime = RealtimeProtocol("s" * 32, 24000)
    update = text.replace('"hello", "sample_rate": 16000, "session"', '"session.update", "session": {"instructions"')
    (error,) = realtime.receive_text(update + "}")
    assert json.loads(error.message)["error"]["code"] == "invalid_json" and realtime.instructions is None


@pytest.mark.parametrize("dialect", ["VoiceProtocol", "RealtimeProtocol", "TwilioProtocol"])
def test_every_dialect_is_a_dialect_with_the_connections_signatures(dialect):
    """The connection holds each dialect as a ``transport.dialect.Dialect``: every method, every parameter it passes."""
    import inspect

    from transport.dialect import Dialect
    from transport.realtime import RealtimeProtocol
    from transport.twilio import TwilioProtocol

    cls = {"VoiceProtocol": VoiceProtocol, "RealtimeProtocol": RealtimeProtocol, "TwilioProtocol": TwilioProtocol}
    instance = cls[dialect]("s" * 32, 24000)
    assert isinstance(instance, Dialect)
    for name, member in vars(Dialect).items():
        if name.startswith("_") or not callable(member):
            continue
        wanted = list(inspect.signature(member).parameters)[1:]
        given = inspect.signature(getattr(instance, name)).parameters
        assert wanted == list(given)[: len(wanted)], (dialect, name)
        assert all(p.default is not inspect.Parameter.empty for p in list(given.values())[len(wanted) :]), name


@pytest.mark.parametrize("denoise", ["rnnoise", "off"])
def test_hello_turns_noise_suppression_on_or_off(proto, denoise):
    (configure,) = proto.receive_text(hello(denoise=denoise))
    assert configure == Configure(16000, acks=False, lead_s=0.12, denoise=denoise)


def test_hello_with_a_suppressor_the_server_does_not_have_is_refused(proto):
    (message,) = sent(proto.receive_text(hello(denoise="krisp")))
    assert message["type"] == "error" and message["code"] == "invalid_message" and "denoise" in message["message"]
    assert proto.configured is None


def test_a_key_of_a_phones_keypad_is_a_key_for_the_session():
    proto = VoiceProtocol("s", 24000)
    proto.receive_text('{"type": "hello", "sample_rate": 16000}')
    assert proto.receive_text('{"type": "key", "key": "#"}') == [KeyPressed("#")]
    (refused,) = proto.receive_text('{"type": "key", "key": "12"}')
    assert isinstance(refused, Send) and '"invalid_message"' in str(refused.message)
