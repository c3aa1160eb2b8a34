"""The two WebSocket dialects' outbound side: typed pipeline events in, messages out.

No sockets and no session: each test feeds :meth:`event` the events a
conversation makes and reads the text frames it asks to send
(docs/protocol.md says what they are).
"""

from __future__ import annotations

import json

import pytest

from core.events import (
    EVENTS,
    AsrFinal,
    AsrPartial,
    AwaitingTools,
    Backchannel,
    BargeIn,
    EndOfTurnCheck,
    EndOfTurnText,
    Error,
    Event,
    InterruptionCheck,
    LlmCancelled,
    LlmDone,
    LlmFirstToken,
    PlaybackEnd,
    PlaybackPaused,
    PlaybackResumed,
    PlaybackStart,
    PlaybackStopped,
    ResponseContinued,
    ResponseStart,
    SpeculativeCommit,
    SpeculativeDiscard,
    SpeculativeStart,
    SpeechEnd,
    SpeechStart,
    ToolCallEnd,
    ToolCallStart,
    Truncate,
    TtsCancelled,
    TtsChunk,
    TurnEnd,
)
from transport.protocol import PUBLIC_EVENTS, Send, TruncateReply, VoiceProtocol
from transport.realtime import EVENT_HANDLERS, RealtimeProtocol

SESSION = "abcdef1234567890"
S = SESSION[:8]  # the ids' suffix


def frames(sends: list[Send]) -> list[str]:
    assert all(isinstance(s, Send) and isinstance(s.message, str) for s in sends), sends
    return [s.message for s in sends]


def messages(sends: list[Send]) -> list[dict]:
    return [json.loads(f) for f in frames(sends)]


def kinds(sends: list[Send]) -> list[str]:
    return [m["type"] for m in messages(sends)]


def feed(dialect, *events: Event) -> list[Send]:
    out: list[Send] = []
    for e in events:
        out += dialect.event(e)
    return out


# A whole turn, then an interruption of the next reply, as the core emits them.
USER_TURN = [
    SpeechStart(0.4, onset=0.2, utterance=1),
    AsrPartial(0.9, text="what time", stable="what"),
    SpeechEnd(1.6, end=1.1, utterance=1, level_db=-22.0),
    AsrFinal(1.7, text="what time is it", utterance=1),
]
REPLY = [
    ResponseStart(1.7, response=1, utterance=1, text="what time is it"),
    LlmFirstToken(1.8, response=1),
    TtsChunk(2.0, response=1, chunk=1, text="It is noon."),
    PlaybackStart(2.02, response=1),
    TtsChunk(2.4, response=1, chunk=2, text="Lunch is ready."),
    LlmDone(2.5, response=1, tokens=9),
    PlaybackEnd(4.0, response=1),
    TurnEnd(4.0, response=1, text="It is noon. Lunch is ready."),
]


def interrupted_reply(reason: str = "words", utterance: int | None = 2) -> list[Event]:
    return [
        ResponseStart(1.7, response=1, utterance=1, text="what time is it"),
        TtsChunk(2.0, response=1, chunk=1, text="It is noon."),
        PlaybackStart(2.02, response=1),
        TtsChunk(2.4, response=1, chunk=2, text="Lunch is ready."),
        PlaybackPaused(2.9, response=1, utterance=None),
        BargeIn(3.3, response=1, utterance=utterance, reason=reason, paused_at=2.9, tokens=9),
        LlmCancelled(3.3, response=1),
        PlaybackStopped(3.3, response=1),
        Truncate(3.3, response=1, audio_end_ms=880, text="It is noon."),
        TurnEnd(3.3, response=1, text="It is noon.", interrupted=True),
    ]


# -- /ws: our protocol -----------------------------------------------------------


@pytest.fixture
def ws() -> VoiceProtocol:
    return VoiceProtocol(SESSION, 24000)


@pytest.mark.parametrize(
    ("event", "frame"),
    [
        (SpeechStart(0.4, onset=0.2, utterance=1), '{"type":"speech_start","t":0.4,"utterance":1,"onset":0.2}'),
        (
            SpeechEnd(1.6, end=1.1, utterance=1, level_db=-22.0, background_db=-50.0),
            '{"type":"speech_end","t":1.6,"utterance":1,"end":1.1}',
        ),
        (
            AsrPartial(0.9, text="what time", stable="what"),
            '{"type":"transcript_partial","t":0.9,"text":"what time","stable":"what"}',
        ),
        (
            AsrFinal(1.7, text="what time is it", utterance=1),
            '{"type":"transcript_final","t":1.7,"utterance":1,"text":"what time is it"}',
        ),
        (
            ResponseStart(1.7, response=1, utterance=1, text="what time is it"),
            '{"type":"response_start","t":1.7,"response":1,"utterance":1,"text":"what time is it"}',
        ),
        (
            SpeculativeStart(1.3, response=1, utterance=1, text="what time is it"),
            '{"type":"speculative_start","t":1.3,"response":1,"utterance":1}',
        ),
        (
            SpeculativeCommit(1.6, response=1, utterance=1, ready=True, tokens=12),
            '{"type":"speculative_commit","t":1.6,"response":1}',
        ),
        (
            SpeculativeDiscard(1.4, response=1, utterance=1, reason="speech", tokens=12),
            '{"type":"speculative_discard","t":1.4,"response":1,"reason":"speech"}',
        ),
        (
            TtsChunk(2.0, response=1, chunk=1, text="It's noon — café?"),
            '{"type":"assistant_text","t":2.0,"response":1,"chunk":1,"text":"It\'s noon — café?"}',
        ),
        (PlaybackPaused(2.9, response=1, utterance=None), '{"type":"playback_paused","t":2.9,"response":1}'),
        (
            PlaybackResumed(3.1, response=1, reason="noise"),
            '{"type":"playback_resumed","t":3.1,"response":1,"reason":"noise"}',
        ),
        (
            BargeIn(3.3, response=1, utterance=2, reason="words", paused_at=2.9, tokens=9),
            '{"type":"barge_in","t":3.3,"response":1,"reason":"words"}',
        ),
        (PlaybackStopped(3.3, response=1), '{"type":"playback_stopped","t":3.3,"response":1}'),
        (
            Truncate(3.3, response=1, audio_end_ms=880, text="It is noon."),
            '{"type":"truncate","t":3.3,"response":1,"audio_end_ms":880,"text":"It is noon."}',
        ),
        (
            TurnEnd(4.0, response=1, text="It is noon."),
            '{"type":"turn_end","t":4.0,"response":1,"text":"It is noon.","interrupted":false}',
        ),
        (
            TurnEnd(3.3, response=1, text="It is", interrupted=True),
            '{"type":"turn_end","t":3.3,"response":1,"text":"It is","interrupted":true}',
        ),
        (
            Backchannel(3.1, utterance=None, text="okay"),
            '{"type":"backchannel","t":3.1,"utterance":null,"text":"okay"}',
        ),
        (
            Error(1.5, where="tts", message="boom"),
            '{"type":"error","code":"pipeline",'
            '"message":"tts: speech synthesis failed; the reply ends with what was said",'
            '"fatal":false,"t":1.5,"where":"tts"}',
        ),
    ],
    ids=lambda v: v.type if isinstance(v, Event) else "",
)
def test_ws_sends_each_public_event_as_documented(ws, event, frame):
    assert frames(ws.event(event)) == [frame]


@pytest.mark.parametrize(
    "event",
    [
        LlmFirstToken(1.8, response=1),
        LlmDone(2.5, response=1, tokens=9, error="LLMError: gone"),
        PlaybackStart(2.02, response=1),
        PlaybackEnd(4.0, response=1),
        InterruptionCheck(3.0, utterance=2, text="stop", no_speech_prob=0.1),
        EndOfTurnCheck(1.7, utterance=1, probability=0.91, silence_s=0.224, decision="end"),
        LlmCancelled(3.3, response=1),
        TtsCancelled(3.3, response=1, chunks_dropped=1),
    ],
    ids=lambda e: e.type,
)
def test_ws_keeps_the_servers_own_events_to_itself(ws, event):
    assert ws.event(event) == []


def test_ws_tells_the_client_of_every_event_but_the_servers_own():
    told = set(PUBLIC_EVENTS) | {Error}
    own = {
        LlmFirstToken,
        LlmDone,
        PlaybackStart,
        PlaybackEnd,
        InterruptionCheck,
        EndOfTurnCheck,
        EndOfTurnText,
        LlmCancelled,
        TtsCancelled,
        AwaitingTools,
        ResponseContinued,
    }
    assert told | own == set(EVENTS.values()) and not told & own


def test_ws_a_whole_turn_in_order(ws):
    sent = feed(ws, *USER_TURN, *REPLY)
    assert kinds(sent) == [
        "speech_start",
        "transcript_partial",
        "speech_end",
        "transcript_final",
        "response_start",
        "assistant_text",
        "assistant_text",
        "turn_end",
    ]


def test_ws_a_speculated_turn_in_order(ws):
    """A reply started on the early final and committed at the endpoint: the client is told it was
    started early, and then sees the same turn as ever, from response_start on."""
    speculated = [
        SpeculativeStart(1.3, response=1, utterance=1, text="what time is it"),
        *USER_TURN[2:],
        SpeculativeCommit(1.7, response=1, utterance=1, ready=True, tokens=9),
        *REPLY,
    ]
    assert kinds(feed(ws, *USER_TURN[:2], *speculated)) == [
        "speech_start",
        "transcript_partial",
        "speculative_start",
        "speech_end",
        "transcript_final",
        "speculative_commit",
        "response_start",
        "assistant_text",
        "assistant_text",
        "turn_end",
    ]


def test_ws_an_interrupted_reply(ws):
    sent = messages(feed(ws, *interrupted_reply()))
    assert [m["type"] for m in sent] == [
        "response_start",
        "assistant_text",
        "assistant_text",
        "playback_paused",
        "barge_in",
        "playback_stopped",
        "truncate",
        "turn_end",
    ]
    assert sent[-2]["text"] == sent[-1]["text"] == "It is noon." and sent[-1]["interrupted"] is True


def test_ws_truncated_sends_nothing(ws):
    assert ws.truncated(TruncateReply(1, 500), "It") == []


# -- /v1/realtime: the OpenAI Realtime dialect -------------------------------------


@pytest.fixture
def rt() -> RealtimeProtocol:
    return RealtimeProtocol(SESSION, 24000)


def test_rt_speech_start_opens_a_user_item(rt):
    (m,) = messages(rt.event(SpeechStart(0.4, onset=0.2, utterance=1)))
    assert m == {
        "type": "input_audio_buffer.speech_started",
        "event_id": "event_1",
        "audio_start_ms": 200,
        "item_id": f"item_u1_{S}",
    }


def test_rt_speech_end_commits_and_adds_the_user_item(rt):
    rt.event(SpeechStart(0.4, onset=0.2, utterance=1))
    stopped, committed, added = messages(rt.event(SpeechEnd(1.6, end=1.1, utterance=1)))
    item = f"item_u1_{S}"
    assert stopped == {
        "type": "input_audio_buffer.speech_stopped",
        "event_id": "event_2",
        "audio_end_ms": 1100,
        "item_id": item,
    }
    assert committed["type"] == "input_audio_buffer.committed" and committed["item_id"] == item
    assert committed["previous_item_id"] is None
    assert added["type"] == "conversation.item.added" and added["item"]["id"] == item
    assert added["item"]["role"] == "user" and added["item"]["content"] == [{"type": "input_audio", "transcript": None}]


def test_rt_partials_send_only_what_became_stable(rt):
    rt.event(SpeechStart(0.4, onset=0.2, utterance=1))
    first = messages(rt.event(AsrPartial(0.8, text="what time", stable="what")))
    assert [(m["type"], m["delta"]) for m in first] == [("conversation.item.input_audio_transcription.delta", "what")]
    assert rt.event(AsrPartial(0.9, text="what tame is", stable="what")) == []  # nothing new is stable
    (more,) = messages(rt.event(AsrPartial(1.0, text="what time is it", stable="what time is")))
    assert more["delta"] == " time is" and more["item_id"] == f"item_u1_{S}"
    assert rt.event(AsrPartial(1.1, text="so", stable="so")) == []  # not a continuation: never taken back


def test_rt_partials_before_any_speech_are_not_sent(rt):
    assert rt.event(AsrPartial(0.5, text="hm", stable="hm")) == []


def test_rt_the_final_completes_the_users_transcription(rt):
    rt.event(SpeechStart(0.4, onset=0.2, utterance=1))
    (m,) = messages(rt.event(AsrFinal(1.7, text="what time is it", utterance=1)))
    assert m["type"] == "conversation.item.input_audio_transcription.completed"
    assert (m["item_id"], m["content_index"], m["transcript"]) == (f"item_u1_{S}", 0, "what time is it")
    assert rt.event(AsrFinal(1.8, text="who", utterance=7)) == []  # an utterance it never saw start


def test_rt_response_start_creates_the_response_and_its_item(rt):
    feed(rt, *USER_TURN)
    sent = messages(rt.event(REPLY[0]))
    assert [m["type"] for m in sent] == [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
    ]
    assert sent[0]["response"] == {
        "id": f"resp_1_{S}",
        "object": "realtime.response",
        "status": "in_progress",
        "output": [],
    }
    assert sent[1]["item"]["id"] == f"item_a1_{S}" and sent[1]["item"]["role"] == "assistant"
    assert sent[2]["previous_item_id"] == f"item_u1_{S}"
    assert sent[3]["part"] == {"type": "audio", "transcript": ""}


def test_rt_each_chunk_is_a_transcript_delta(rt):
    rt.event(REPLY[0])
    (a,) = messages(rt.event(TtsChunk(2.0, response=1, chunk=1, text="It is noon.")))
    (b,) = messages(rt.event(TtsChunk(2.4, response=1, chunk=2, text="Lunch is ready.")))
    assert a["type"] == b["type"] == "response.output_audio_transcript.delta"
    assert (a["delta"], b["delta"]) == ("It is noon.", " Lunch is ready.")
    where = {"response_id": f"resp_1_{S}", "item_id": f"item_a1_{S}", "output_index": 0, "content_index": 0}
    assert {k: a[k] for k in where} == where


def test_rt_a_whole_turn_ends_with_a_completed_response(rt):
    sent = messages(feed(rt, *USER_TURN, *REPLY))
    tail = sent[-6:]
    assert [m["type"] for m in tail] == [
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
    ]
    assert tail[1]["transcript"] == "It is noon. Lunch is ready."
    done = tail[-1]["response"]
    assert done["status"] == "completed" and "status_details" not in done
    assert done["output"][0]["status"] == "completed"
    assert done["output"][0]["content"] == [{"type": "output_audio", "transcript": "It is noon. Lunch is ready."}]
    # every event has its own id, in order
    assert [m["event_id"] for m in sent] == [f"event_{i}" for i in range(1, len(sent) + 1)]


def test_rt_a_barge_in_truncates_the_item_and_cancels_the_response(rt):
    sent = messages(feed(rt, *interrupted_reply("words")))
    types = [m["type"] for m in sent]
    assert "conversation.item.truncated" in types and types[-1] == "response.done"
    (trunc,) = [m for m in sent if m["type"] == "conversation.item.truncated"]
    assert (trunc["item_id"], trunc["content_index"], trunc["audio_end_ms"]) == (f"item_a1_{S}", 0, 880)
    done = sent[-1]["response"]
    assert done["status"] == "cancelled"
    assert done["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
    assert done["output"][0]["status"] == "incomplete"
    assert done["output"][0]["content"][0]["transcript"] == "It is noon."


@pytest.mark.parametrize("reason", ["client", "truncate"])
def test_rt_a_client_cut_is_client_cancelled(rt, reason):
    sent = messages(feed(rt, *interrupted_reply(reason, utterance=None)))
    assert sent[-1]["response"]["status_details"] == {"type": "cancelled", "reason": "client_cancelled"}
    truncated = [m for m in sent if m["type"] == "conversation.item.truncated"]
    # the client's own conversation.item.truncate is answered by truncated(), not by the event
    assert len(truncated) == (0 if reason == "truncate" else 1)


def test_rt_a_closed_connection_is_a_turn_detected_cut(rt):
    sent = messages(feed(rt, *interrupted_reply("closed", utterance=None)))
    assert sent[-1]["response"]["status_details"]["reason"] == "turn_detected"


def test_rt_truncated_answers_for_a_known_reply_only(rt):
    rt.event(REPLY[0])
    (m,) = messages(rt.truncated(TruncateReply(1, 500), "It"))
    assert m["type"] == "conversation.item.truncated" and m["item_id"] == f"item_a1_{S}"
    assert m["audio_end_ms"] == 500
    (err,) = messages(rt.truncated(TruncateReply(9, 500), "It"))
    assert err["type"] == "error" and err["error"]["code"] == "item_truncate_invalid_item_id"


def test_rt_events_of_an_unknown_response_are_dropped(rt):
    for e in (
        TtsChunk(2.0, response=5, chunk=1, text="Hi."),
        BargeIn(2.1, response=5, utterance=2, reason="words", paused_at=2.0, tokens=1),
        Truncate(2.1, response=5, audio_end_ms=10, text=""),
        TurnEnd(2.1, response=5, text=""),
    ):
        assert rt.event(e) == []


def test_rt_a_pipeline_error_is_a_server_error(rt):
    (m,) = messages(rt.event(Error(1.5, where="llm", message="LLMError: gone")))
    assert m == {
        "type": "error",
        "event_id": "event_1",
        "error": {
            "type": "server_error",
            "code": "pipeline",
            "message": "llm: the language model failed; the reply ends with what was said",
            "param": None,
        },
    }


@pytest.mark.parametrize(
    "event",
    [
        LlmFirstToken(1.8, response=1),
        LlmDone(2.5, response=1, tokens=9),
        PlaybackStart(2.02, response=1),
        PlaybackEnd(4.0, response=1),
        PlaybackPaused(2.9, response=1, utterance=None),
        PlaybackResumed(3.1, response=1, reason="noise"),
        PlaybackStopped(3.3, response=1),
        InterruptionCheck(3.0, utterance=2, text="stop", no_speech_prob=0.1),
        EndOfTurnCheck(1.7, utterance=1, probability=0.91, silence_s=0.224, decision="end"),
        Backchannel(3.1, utterance=2, text="okay"),
        LlmCancelled(3.3, response=1),
        TtsCancelled(3.3, response=1, chunks_dropped=1),
        # Speculation is the server's: a Realtime client sees the reply from response.created, at the endpoint.
        SpeculativeStart(1.3, response=2, utterance=2, text="and tomorrow"),
        SpeculativeCommit(1.6, response=1, utterance=1, ready=True, tokens=12),
        SpeculativeDiscard(1.4, response=2, utterance=2, reason="speech", tokens=12),
    ],
    ids=lambda e: e.type,
)
def test_rt_sends_nothing_for_events_it_has_no_counterpart_for(rt, event):
    rt.event(REPLY[0])
    assert rt.event(event) == []


def test_rt_handles_exactly_the_events_it_has_a_counterpart_for():
    assert set(EVENT_HANDLERS) == {
        Error,
        SpeechStart,
        SpeechEnd,
        AsrPartial,
        AsrFinal,
        ResponseStart,
        TtsChunk,
        BargeIn,
        Truncate,
        TurnEnd,
        ToolCallStart,  # of the client's own tools: function_call items; of an MCP server's: mcp_call items
        ToolCallEnd,  # of an MCP server's tool: response.mcp_call.completed or .failed
        AwaitingTools,
        ResponseContinued,
    }
