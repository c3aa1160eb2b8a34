"""The pipeline's typed events: one of each on the wire, read back, and the registry."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from core.events import (
    EVENTS,
    AsrFinal,
    AsrPartial,
    AwaitingTools,
    Backchannel,
    BargeIn,
    Collected,
    EndOfTurnCheck,
    EndOfTurnText,
    Error,
    Event,
    EventError,
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
    StepEntered,
    ToolCallEnd,
    ToolCallStart,
    Transfer,
    Truncate,
    TtsCancelled,
    TtsChunk,
    TurnEnd,
    event_from_json,
)

ROOT = Path(__file__).resolve().parents[2]

# One of each event (two where a field is sometimes left out, or null), and its
# events.jsonl line as the pipeline has always written it (json.dumps with
# ensure_ascii=False): keys in this order, numbers at this precision.
WIRE: list[tuple[Event, str]] = [
    (
        SpeechStart(1.23456, onset=0.98765, utterance=1),
        '{"t": 1.2346, "type": "speech_start", "onset": 0.988, "utterance": 1}',
    ),
    (
        EndOfTurnCheck(2.2, utterance=1, probability=0.12345, silence_s=0.2240001, decision="wait"),
        '{"t": 2.2, "type": "end_of_turn_check", "utterance": 1, "probability": 0.123, "silence_s": 0.224,'
        ' "decision": "wait"}',
    ),
    (
        EndOfTurnCheck(2.5, utterance=1, probability=0.9, silence_s=0.512, decision="wait", trails_off=True),
        '{"t": 2.5, "type": "end_of_turn_check", "utterance": 1, "probability": 0.9, "silence_s": 0.512,'
        ' "decision": "wait", "trails_off": true}',
    ),
    (
        EndOfTurnCheck(2.3, utterance=1, probability=None, silence_s=0.224, decision="failed"),
        '{"t": 2.3, "type": "end_of_turn_check", "utterance": 1, "probability": null, "silence_s": 0.224,'
        ' "decision": "failed"}',
    ),
    (
        EndOfTurnText(2.4, utterance=1, text="Not at this particular.", sentence_end=0.00012, unfinished=True),
        '{"t": 2.4, "type": "end_of_turn_text", "utterance": 1, "text": "Not at this particular.",'
        ' "sentence_end": 0.0001, "unfinished": true}',
    ),
    (
        EndOfTurnText(2.45, utterance=2, text="What time is it?", sentence_end=0.35214, unfinished=False, ended=True),
        '{"t": 2.45, "type": "end_of_turn_text", "utterance": 2, "text": "What time is it?",'
        ' "sentence_end": 0.3521, "unfinished": false, "ended": true}',
    ),
    (
        SpeechEnd(2.5, end=2.0, utterance=1),
        '{"t": 2.5, "type": "speech_end", "end": 2.0, "utterance": 1}',
    ),
    (
        SpeechEnd(6.5, end=6.0, utterance=2, level_db=-23.456, background_db=-51.04),
        '{"t": 6.5, "type": "speech_end", "end": 6.0, "utterance": 2, "level_db": -23.5, "background_db": -51.0}',
    ),
    (
        AsrPartial(1.5, text="what time", stable="what"),
        '{"t": 1.5, "type": "asr_partial", "text": "what time", "stable": "what"}',
    ),
    (
        AsrFinal(2.9, text="what time is it", utterance=1),
        '{"t": 2.9, "type": "asr_final", "text": "what time is it", "utterance": 1}',
    ),
    (
        SpeculativeStart(2.6, response=1, utterance=1, text="what time is it"),
        '{"t": 2.6, "type": "speculative_start", "response": 1, "utterance": 1, "text": "what time is it"}',
    ),
    (
        SpeculativeDiscard(2.7, response=1, utterance=1, reason="speech", tokens=12),
        '{"t": 2.7, "type": "speculative_discard", "response": 1, "utterance": 1, "reason": "speech", "tokens": 12}',
    ),
    (
        SpeculativeCommit(2.9, response=2, utterance=1, ready=True, tokens=12),
        '{"t": 2.9, "type": "speculative_commit", "response": 2, "utterance": 1, "ready": true, "tokens": 12}',
    ),
    (
        ResponseStart(2.9, response=1, utterance=1, text="what time is it"),
        '{"t": 2.9, "type": "response_start", "response": 1, "utterance": 1, "text": "what time is it"}',
    ),
    (
        LlmFirstToken(3.1, response=1),
        '{"t": 3.1, "type": "llm_first_token", "response": 1}',
    ),
    (
        TtsChunk(3.3, response=1, chunk=1, text="It's noon — café time."),
        '{"t": 3.3, "type": "tts_chunk", "response": 1, "chunk": 1, "text": "It\'s noon — café time."}',
    ),
    (
        LlmDone(3.5, response=1, tokens=12),
        '{"t": 3.5, "type": "llm_done", "response": 1, "tokens": 12}',
    ),
    (
        LlmDone(3.5, response=1, tokens=3, error="LLMError: gone"),
        '{"t": 3.5, "type": "llm_done", "response": 1, "tokens": 3, "error": "LLMError: gone"}',
    ),
    (
        PlaybackStart(3.32, response=1),
        '{"t": 3.32, "type": "playback_start", "response": 1}',
    ),
    (
        PlaybackEnd(5.0, response=1),
        '{"t": 5.0, "type": "playback_end", "response": 1}',
    ),
    (
        TurnEnd(5.0, response=1, text="It's noon."),
        '{"t": 5.0, "type": "turn_end", "response": 1, "text": "It\'s noon."}',
    ),
    (
        TurnEnd(4.6, response=1, text="It's", interrupted=True),
        '{"t": 4.6, "type": "turn_end", "response": 1, "text": "It\'s", "interrupted": true}',
    ),
    (
        PlaybackPaused(4.0, response=1, utterance=None),
        '{"t": 4.0, "type": "playback_paused", "response": 1, "utterance": null}',
    ),
    (
        PlaybackPaused(4.2, response=1, utterance=2),
        '{"t": 4.2, "type": "playback_paused", "response": 1, "utterance": 2}',
    ),
    (
        InterruptionCheck(4.6, utterance=2, text="stop please", no_speech_prob=0.1234),
        '{"t": 4.6, "type": "interruption_check", "utterance": 2, "text": "stop please", "no_speech_prob": 0.12}',
    ),
    (
        InterruptionCheck(4.6, utterance=2, text="", no_speech_prob=0.9, level_db=-20.04, background_db=-48.96),
        '{"t": 4.6, "type": "interruption_check", "utterance": 2, "text": "", "no_speech_prob": 0.9,'
        ' "level_db": -20.0, "background_db": -49.0}',
    ),
    (
        Backchannel(4.7, utterance=2, text="okay"),
        '{"t": 4.7, "type": "backchannel", "utterance": 2, "text": "okay"}',
    ),
    (
        Backchannel(4.7, utterance=None, text="mm"),
        '{"t": 4.7, "type": "backchannel", "utterance": null, "text": "mm"}',
    ),
    (
        PlaybackResumed(4.7, response=1, reason="backchannel"),
        '{"t": 4.7, "type": "playback_resumed", "response": 1, "reason": "backchannel"}',
    ),
    (  # paused_at is the core's own time, logged as it is
        BargeIn(4.6, response=1, utterance=2, reason="words", paused_at=4.0200000000000005, tokens=9),
        '{"t": 4.6, "type": "barge_in", "response": 1, "utterance": 2, "reason": "words",'
        ' "paused_at": 4.0200000000000005, "tokens": 9}',
    ),
    (
        LlmCancelled(4.6, response=1),
        '{"t": 4.6, "type": "llm_cancelled", "response": 1}',
    ),
    (
        TtsCancelled(4.6, response=1, chunks_dropped=2),
        '{"t": 4.6, "type": "tts_cancelled", "response": 1, "chunks_dropped": 2}',
    ),
    (
        PlaybackStopped(4.6, response=1),
        '{"t": 4.6, "type": "playback_stopped", "response": 1}',
    ),
    (
        Truncate(4.6, response=1, audio_end_ms=700, text="It's"),
        '{"t": 4.6, "type": "truncate", "response": 1, "audio_end_ms": 700, "text": "It\'s"}',
    ),
    (
        ToolCallStart(2.0, response=1, call_id="call_1_0_0", name="set_timer", arguments='{"minutes": 5}'),
        '{"t": 2.0, "type": "tool_call", "response": 1, "call_id": "call_1_0_0", "name": "set_timer",'
        ' "arguments": "{\\"minutes\\": 5}"}',
    ),
    (
        ToolCallEnd(2.3, response=1, call_id="c", name="set_timer", status="ok", result="set", duration_s=0.30004),
        '{"t": 2.3, "type": "tool_result", "response": 1, "call_id": "c", "name": "set_timer", "status": "ok",'
        ' "result": "set", "duration_s": 0.3}',
    ),
    (
        AwaitingTools(2.2, response=1, calls=1),
        '{"t": 2.2, "type": "awaiting_tools", "response": 1, "calls": 1}',
    ),
    (
        ResponseContinued(2.4, response=1, round=1),
        '{"t": 2.4, "type": "response_continued", "response": 1, "round": 1}',
    ),
    (
        StepEntered(2.4, step="details", previous="greeting", response=1, via="wants_booking"),
        '{"t": 2.4, "type": "step_entered", "step": "details", "previous": "greeting", "response": 1,'
        ' "via": "wants_booking"}',
    ),
    (
        Collected(2.5, response=1, values={"party_size": 4}, dropped={"name": "Party"}),
        '{"t": 2.5, "type": "collected", "response": 1, "values": {"party_size": 4}, "dropped": {"name": "Party"}}',
    ),
    (
        Transfer(5.0, to="+15550100", response=3),
        '{"t": 5.0, "type": "transfer", "to": "+15550100", "response": 3}',
    ),
    (
        Error(1.00004, where="tts", message="boom"),
        '{"t": 1.0, "type": "error", "where": "tts", "message": "boom"}',
    ),
]


@pytest.mark.parametrize(("event", "line"), WIRE, ids=lambda v: v.type if isinstance(v, Event) else "")
def test_each_event_is_written_as_it_always_was(event, line):
    assert json.dumps(event.to_json(), ensure_ascii=False) == line


def test_every_event_type_has_a_wire_example():
    assert {type(e) for e, _ in WIRE} == set(EVENTS.values())


@pytest.mark.parametrize(("event", "line"), WIRE, ids=lambda v: v.type if isinstance(v, Event) else "")
def test_each_event_reads_back(event, line):
    assert event_from_json(event.to_json()) == event
    back = event_from_json(json.loads(line))
    assert back == event and type(back) is type(event)
    assert json.dumps(back.to_json(), ensure_ascii=False) == line


def test_the_registry_has_every_event_once_under_its_type():
    assert all(cls.type == kind for kind, cls in EVENTS.items())
    assert set(Event.__subclasses__()) == set(EVENTS.values())
    assert len(EVENTS) == 33


def test_numbers_are_rounded_when_the_event_is_made():
    e = SpeechEnd(2.123456, end=1.98765, utterance=1, level_db=-20.04)
    assert (e.t, e.end, e.level_db, e.background_db) == (2.1235, 1.988, -20.0, None)
    assert InterruptionCheck(1.0, utterance=1, text="", no_speech_prob=0.456).no_speech_prob == 0.46


def test_events_are_frozen():
    e = TurnEnd(1.0, response=1, text="hi")
    with pytest.raises(AttributeError):
        e.text = "bye"  # type: ignore[misc]


def test_an_unknown_type_is_a_clear_error():
    with pytest.raises(EventError, match=r"unknown event type 'speech_begin' \(known: speech_start, "):
        event_from_json({"t": 1.0, "type": "speech_begin", "onset": 0.5, "utterance": 1})
    with pytest.raises(EventError, match="unknown event type None"):
        event_from_json({"t": 1.0})


def test_a_missing_or_unknown_field_is_a_clear_error():
    with pytest.raises(EventError, match="speech_start needs utterance"):
        event_from_json({"t": 1.0, "type": "speech_start", "onset": 0.5})
    with pytest.raises(EventError, match="speech_start has no field utterence"):
        event_from_json({"t": 1.0, "type": "speech_start", "onset": 0.5, "utterence": 1})


def _constructed_events(path: Path, emit_method: str | None = "_emit") -> tuple[set[str], set[str]]:
    """The classes that ``path`` makes events of (called by name), and those it emits directly
    (in an ``Emit`` command, or through the shell's ``emit_method``)."""
    tree = ast.parse(path.read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    made = {n.func.id for n in calls if isinstance(n.func, ast.Name)}
    emits = [
        n.args[0]
        for n in calls
        if (isinstance(n.func, ast.Name) and n.func.id == "Emit")
        or (isinstance(n.func, ast.Attribute) and n.func.attr == emit_method)
    ]
    emitted = {a.func.id for a in emits if isinstance(a, ast.Call) and isinstance(a.func, ast.Name)}
    return made, emitted


def test_every_event_the_core_and_the_session_emit_is_registered():
    names = {cls.__name__ for cls in EVENTS.values()}
    made, emitted = set(), set()
    core = [(path, None) for path in sorted((ROOT / "core").glob("*.py"))]  # the core emits by commands
    shell = [(path, "_emit") for path in sorted((ROOT / "shell").glob("*.py"))]  # the session's stages
    for path, emit_method in core + shell:
        m, e = _constructed_events(path, emit_method)
        made |= m
        emitted |= e
    assert emitted and emitted <= names
    assert made & names == names  # and no registered event is left that nothing makes


# -- every event a consumer handles is a registered one ------------------------

CONSUMERS = [
    "voice/app/cli.py",
    "voice/app/latency.py",
    "voice/app/metrics.py",
    "voice/app/terminal.py",
]


def _matched_classes(tree: ast.AST) -> set[str]:
    """The classes in the ``case C():`` patterns of ``tree``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.MatchClass):
            assert isinstance(node.cls, ast.Name), ast.dump(node.cls)
            out.add(node.cls.id)
    return out


def _imported_events(tree: ast.AST) -> set[str]:
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "core.events"
        for alias in node.names
    }


@pytest.mark.parametrize("path", CONSUMERS)
def test_each_consumer_matches_only_registered_events(path):
    tree = ast.parse((ROOT / path).read_text())
    matched = _matched_classes(tree)
    assert matched, f"{path} matches no event"
    assert matched <= _imported_events(tree), f"{path}: {matched - _imported_events(tree)} not from core.events"
    assert matched <= {cls.__name__ for cls in EVENTS.values()}


def test_the_dialects_tables_hold_registered_events_and_their_fields():
    from dataclasses import fields

    from transport.protocol import PUBLIC_EVENTS
    from transport.realtime import EVENT_HANDLERS

    registered = set(EVENTS.values())
    assert set(PUBLIC_EVENTS) <= registered and set(EVENT_HANDLERS) <= registered
    for cls, (_, names) in PUBLIC_EVENTS.items():  # "name?": a field sent only when it has a value
        assert {n.removesuffix("?") for n in names} <= {f.name for f in fields(cls)}, cls
    for cls, handler in EVENT_HANDLERS.items():
        assert handler.__annotations__["e"] == cls.__name__, (cls, handler)


# -- events.jsonl ----------------------------------------------------------------


def test_the_event_log_writes_one_line_per_event_and_echoes_the_conversation(tmp_path):
    import io

    from voice.app.cli import EventLog

    echo = io.StringIO()
    log = EventLog(tmp_path / "events.jsonl", echo=echo)
    for event, _ in WIRE:
        log(event)
    log.close()
    assert (tmp_path / "events.jsonl").read_text() == "".join(line + "\n" for _, line in WIRE)
    assert log.events == [e for e, _ in WIRE]
    assert echo.getvalue().splitlines() == [
        "[   2.90] you:       what time is it",
        "[   3.30] assistant: It's noon — café time.",
        "[   4.70] -- backchannel okay",
        "[   4.70] -- backchannel mm",
        "[   4.70] -- playback_resumed backchannel",
        "[   4.60] -- barge_in words",
        '[   4.60] -- heard: "It\'s"',
        '[   2.00] -- tool set_timer({"minutes": 5})',
        "[   2.30] -- tool set_timer: ok (0.30 s): set",
        "[   1.00] error in tts: boom",
    ]


def test_every_observer_takes_every_event(tmp_path):
    """A sink that raises loses the events after it (the session logs and goes on): none does."""
    import io
    import logging

    from transport.protocol import VoiceProtocol
    from transport.realtime import RealtimeProtocol
    from voice.app.cli import EventLog
    from voice.app.latency import TurnTracker
    from voice.app.logs import JsonFormatter, event_logger, read_events
    from voice.app.metrics import PipelineMetrics
    from voice.app.terminal import TerminalView

    text = io.StringIO()
    handler = logging.StreamHandler(text)
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("voice.events")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    tracker, metrics = TurnTracker(), PipelineMetrics()
    sinks = [
        EventLog(tmp_path / "events.jsonl"),
        event_logger("s1"),
        metrics.sink("s1"),
        tracker.push,
        TerminalView(io.StringIO(), live=True).event,
        VoiceProtocol("s1", 24000).event,
        RealtimeProtocol("s1", 24000).event,
    ]
    try:
        for event, _ in WIRE:
            for sink in sinks:
                sink(event)
    finally:
        log.removeHandler(handler)
    assert read_events(text.getvalue()) == [e for e, _ in WIRE]
