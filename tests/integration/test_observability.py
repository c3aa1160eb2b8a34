"""Metrics, structured logs, the sequential baseline and the conversation
replay of python -m voice.bench pipeline, on the real engines."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from core.events import BargeIn, Event, LlmDone, PlaybackEnd, SpeechStart
from shell.clock import VirtualClock
from shell.config import SessionConfig
from shell.session import Session
from tests.conftest import FIXTURES
from transport.files import load_audio
from transport.replay import replay, replay_turns
from voice.app.latency import turn_latencies
from voice.app.logs import fan_out
from voice.app.metrics import PipelineMetrics, serve
from voice.bench.sequential import sequential_turns

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="session")]

QUESTION = FIXTURES / "cmu_arctic_us_aew_a0003.wav"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_real_turn_shows_in_the_served_metrics(engines):
    metrics = PipelineMetrics()
    events: list[Event] = []
    session = Session(engines, VirtualClock(), on_event=fan_out(events.append, metrics.sink("s1")), lockstep=True)
    try:
        await replay(session, load_audio(QUESTION), settle=True)
    finally:
        await session.aclose()
    port = free_port()
    serve(metrics, port)
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    (turn,) = turn_latencies(events)
    assert 'voice_stage_seconds_count{stage="voice_to_voice"} 1.0' in body
    assert f'voice_stage_seconds_sum{{stage="voice_to_voice"}} {turn.voice_to_voice_s}' in body
    assert 'voice_turns_total{role="user"} 1.0' in body and 'voice_turns_total{role="assistant"} 1.0' in body
    (done,) = [e for e in events if isinstance(e, LlmDone)]
    assert done.tokens > 0 and f"voice_llm_tokens_total {float(done.tokens)}" in body


async def test_the_sequential_baseline_answers_after_the_whole_reply(engines):
    (turn,) = await sequential_turns(engines, load_audio(QUESTION), SessionConfig().system_prompt)
    assert "two men shook hands" in turn.user_text.lower()
    assert turn.reply_text and turn.llm_s > 0 and turn.tts_s > 0
    assert 0.45 <= turn.endpoint_s <= 0.6
    total = turn.endpoint_s + turn.asr_final_s + turn.llm_s + turn.tts_s
    assert abs(turn.voice_to_voice_s - total) < 0.01


async def test_a_conversation_replay_waits_for_each_reply(engines):
    said = [load_audio(QUESTION), load_audio(FIXTURES / "ljspeech_LJ001-0002.wav")]
    events: list[Event] = []
    session = Session(engines, VirtualClock(), on_event=events.append, lockstep=True)
    try:
        await replay_turns(session, said, settle=True)
    finally:
        await session.aclose()
    assert not [e for e in events if isinstance(e, BargeIn)]
    roles = [t.role for t in session.history.turns]
    assert roles == ["user", "assistant", "user", "assistant"]
    second = [e for e in events if isinstance(e, SpeechStart)][1]
    first_end = next(e for e in events if isinstance(e, PlaybackEnd))
    assert second.t > first_end.t  # said after the first reply was over
