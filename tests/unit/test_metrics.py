"""Prometheus metrics from the event stream (pure: events in, samples out)."""

from __future__ import annotations

from core.events import (
    AsrFinal,
    BargeIn,
    Error,
    LlmDone,
    LlmFirstToken,
    PlaybackStart,
    ResponseStart,
    SpeculativeCommit,
    SpeculativeDiscard,
    SpeculativeStart,
    SpeechEnd,
    TtsChunk,
)
from voice.app.metrics import PipelineMetrics

TURN = [
    SpeechEnd(3.0, end=2.5, utterance=1),
    AsrFinal(3.9, text="hi", utterance=1),
    ResponseStart(3.9, response=1, utterance=1, text="hi"),
    LlmFirstToken(4.0, response=1),
    TtsChunk(4.5, response=1, chunk=1, text="Hello."),
    PlaybackStart(4.52, response=1),
]


def value(m: PipelineMetrics, name: str, **labels) -> float:
    return m.registry.get_sample_value(name, labels or None) or 0.0


def test_a_turn_fills_every_stage_histogram_once():
    m = PipelineMetrics()
    sink = m.sink("a")
    for e in TURN:
        sink(e)
    assert value(m, "voice_stage_seconds_count", stage="voice_to_voice") == 1
    assert abs(value(m, "voice_stage_seconds_sum", stage="voice_to_voice") - 2.02) < 1e-9
    assert abs(value(m, "voice_stage_seconds_sum", stage="asr_final") - 0.9) < 1e-9
    assert value(m, "voice_turns_total", role="user") == 1
    assert value(m, "voice_sessions_active") == 1


def test_barge_ins_count_the_tokens_they_cancelled_and_sessions_are_apart():
    m = PipelineMetrics()
    a, b = m.sink("a"), m.sink("b")
    for e in TURN:
        a(e)
    b(TURN[0])  # another session's speech end does not complete a's turn
    a(BargeIn(5.0, response=1, utterance=2, reason="words", paused_at=4.8, tokens=7))
    a(Error(5.0, where="tts", message="boom"))
    b(LlmDone(6.0, response=1, tokens=5))
    assert value(m, "voice_barge_ins_total") == 1
    assert value(m, "voice_llm_cancelled_tokens_total") == 7
    assert value(m, "voice_llm_tokens_total") == 12
    assert value(m, "voice_errors_total", where="tts") == 1
    assert value(m, "voice_stage_seconds_count", stage="voice_to_voice") == 1
    m.session_closed("a")
    assert value(m, "voice_sessions_active") == 1


def test_speculative_replies_count_by_outcome_with_the_tokens_discarded_ones_wasted():
    m = PipelineMetrics()
    sink = m.sink("a")
    for e in [
        SpeculativeStart(2.6, response=1, utterance=1, text="what"),
        SpeculativeDiscard(2.7, response=1, utterance=1, reason="speech", tokens=12),
        SpeculativeStart(2.8, response=2, utterance=1, text="what time is it"),
        SpeechEnd(3.0, end=2.5, utterance=1),
        AsrFinal(3.0, text="what time is it", utterance=1),
        SpeculativeCommit(3.0, response=2, utterance=1, ready=True, tokens=20),
        ResponseStart(3.0, response=2, utterance=1, text="what time is it"),
        LlmFirstToken(3.0, response=2),
        TtsChunk(3.0, response=2, chunk=1, text="Noon."),
        LlmDone(3.0, response=2, tokens=20),
        PlaybackStart(3.02, response=2),
    ]:
        sink(e)
    assert value(m, "voice_speculative_replies_total", outcome="discarded") == 1
    assert value(m, "voice_speculative_replies_total", outcome="ready") == 1
    assert value(m, "voice_speculative_replies_total", outcome="late") == 0
    assert value(m, "voice_speculative_wasted_tokens_total") == 12
    assert value(m, "voice_llm_tokens_total") == 32
    # Its latency counts from the endpoint: the reply was ready then.
    assert value(m, "voice_stage_seconds_sum", stage="llm_first_token") == 0.0
    assert abs(value(m, "voice_stage_seconds_sum", stage="voice_to_voice") - 0.52) < 1e-9


def test_metrics_are_served_over_http():
    import socket
    import urllib.request

    from voice.app.metrics import serve

    m = PipelineMetrics()
    for e in TURN:
        m.observe(e, "a")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve(m, port)
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'voice_stage_seconds_count{stage="voice_to_voice"} 1.0' in body


def test_events_become_json_log_lines():
    import json
    import logging

    from voice.app.logs import JsonFormatter, event_logger, read_events, read_records

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    log = logging.getLogger("voice.events")
    handler = Keep()
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        event_logger("s1")(Error(1.5, where="tts", message="boom"))
    finally:
        log.removeHandler(handler)
    line = json.loads(JsonFormatter().format(records[0]))
    assert line["level"] == "ERROR" and line["session"] == "s1" and line["type"] == "error" and line["t"] == 1.5
    # read back from a log with other lines in it: only the event
    other = json.dumps({"ts": "x", "level": "INFO", "logger": "vllm", "message": "hi"})
    log_text = f"a plain line\n{other}\n{JsonFormatter().format(records[0])}\n"
    assert read_records(log_text) == [line]
    assert list(line) == ["ts", "level", "logger", "session", "t", "type", "where", "message"]
    assert read_events(log_text) == [Error(1.5, where="tts", message="boom")]
