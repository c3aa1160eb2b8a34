"""End to end on the real engines (Silero, faster-whisper, vLLM, piper) and
real recordings, on virtual time unless the test is about real time."""

from __future__ import annotations

import numpy as np
import pytest

from core.audio import ASR_RATE
from core.events import (
    AsrFinal,
    AsrPartial,
    BargeIn,
    LlmFirstToken,
    PlaybackEnd,
    PlaybackStart,
    ResponseStart,
    SpeechEnd,
    SpeechStart,
    TtsChunk,
    TurnEnd,
)
from tests.conftest import recordings
from transport.files import load_audio
from voice.app.latency import turn_latencies
from voice.bench.scoring import word_error_rate

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="session")]

ORDER = [ResponseStart, LlmFirstToken, TtsChunk, PlaybackStart, PlaybackEnd, TurnEnd]


def assert_events_in_order(run) -> None:
    times = [e.t for e in run.events]
    assert times == sorted(times), "event times go back"
    starts = {e.utterance: e.t for e in run.of(SpeechStart)}
    ends = {e.utterance: e for e in run.of(SpeechEnd)}
    for u, t_end in ends.items():
        assert starts[u] < t_end.t and t_end.end <= t_end.t
    for final in run.of(AsrFinal):
        assert final.t >= ends[final.utterance].t
    cut = {e.response for e in run.of(BargeIn)}
    for r in {e.response for e in run.of(ResponseStart)}:
        seq = [type(e) for e in run.events if type(e) in ORDER and e.response == r]
        firsts = [k for i, k in enumerate(seq) if k not in seq[:i]]
        if r in cut:  # a reply cut by barge-in stops wherever it was, and ends its turn
            assert firsts == [k for k in ORDER if k in firsts] and firsts[-1] is TurnEnd, f"response {r}: {seq}"
        else:
            assert firsts == ORDER, f"response {r}: {seq}"


def envelope(audio: np.ndarray, rate: int) -> np.ndarray:
    """RMS level of each 20 ms block."""
    n = rate // 50
    blocks = audio[: len(audio) // n * n].reshape(-1, n)
    return np.sqrt((blocks**2).mean(axis=1))


def audible_seconds(reply: np.ndarray, rate: int) -> float:
    """Seconds of 20 ms blocks whose level is above -40 dBFS."""
    return float((envelope(reply, rate) > 0.01).sum() / 50)


@pytest.mark.parametrize("rec", recordings(), ids=lambda r: r.name)
async def test_recording_is_transcribed_and_answered(engines, replay_run, rec):
    run = await replay_run(engines, rec.path)
    assert run.errors == []
    wer = word_error_rate(rec.transcript, run.user_text())
    assert wer <= 0.2, f"WER {wer:.2f}: {run.user_text()!r}"
    users = [t for t in run.transcript if t["role"] == "user"]
    assistants = [t for t in run.transcript if t["role"] == "assistant"]
    # JFK pauses for over a second mid-sentence: his next words cut the reply
    # before (barge-in), and only the last user turn is sure to get a whole one.
    assert run.transcript[-1]["role"] == "assistant" and not run.transcript[-1].get("interrupted")
    whole = [a for a in assistants if not a.get("interrupted")]
    assert len(whole) + len(run.of(BargeIn)) == len(users), run.transcript
    assert all(len(a["text"].split()) >= 2 for a in assistants if not a.get("interrupted"))
    # Each turn is answered with audible speech, after the person stopped.
    assert audible_seconds(run.reply, run.rate) >= 0.5 * len(users)
    for start in run.of(PlaybackStart):
        pos = round(start.t * run.rate)
        chunks = [e.text for e in run.of(TtsChunk) if e.response == start.response]
        assert np.abs(run.reply[pos : pos + run.rate // 2]).max() > 0.05, (start, chunks)
    assert_events_in_order(run)
    assert len(run.of(AsrPartial)) >= 1 or rec.duration_s < 3


async def test_virtual_time_is_exactly_repeatable(engines, replay_run):
    path = recordings()[0].path
    a = await replay_run(engines, path)
    b = await replay_run(engines, path)
    assert a.events == b.events
    # Speech in the same places; piper's waveform noise makes the samples differ.
    assert len(a.reply) == len(b.reply)
    assert np.corrcoef(envelope(a.reply, a.rate), envelope(b.reply, b.rate))[0, 1] > 0.9


async def test_reply_audio_is_on_the_input_timeline(engines, replay_run):
    rec = next(r for r in recordings() if "aew_a0003" in r.name)
    run = await replay_run(engines, rec.path)
    (start,) = run.of(PlaybackStart)
    first = int(np.argmax(np.abs(run.reply) > 1e-3))
    assert abs(first / run.rate - start.t) < 0.05  # the first sample out is where the log says
    (end,) = run.of(SpeechEnd)
    assert start.t > end.end  # never answers before the person has finished


async def test_two_turns_keep_the_conversation(engines, replay_run):
    recs = {r.name: r for r in recordings()}
    first = load_audio(recs["cmu_arctic_us_aew_a0003"].path)
    second = load_audio(recs["cmu_arctic_us_axb_a0004"].path)
    gap = np.zeros(ASR_RATE * 12, dtype=np.float32)  # room for the first reply to be played
    run = await replay_run(engines, np.concatenate([first, gap, second]))
    roles = [t["role"] for t in run.transcript]
    assert roles == ["user", "assistant", "user", "assistant"], run.transcript
    assert word_error_rate(recs["cmu_arctic_us_axb_a0004"].transcript, run.transcript[2]["text"]) <= 0.2
    assert len(turn_latencies(run.events)) == 2


async def test_real_time_runs_the_same_code(engines, replay_run):
    rec = next(r for r in recordings() if "aew_a0003" in r.name)
    run = await replay_run(engines, rec.path, fast=False)
    assert run.errors == []
    assert word_error_rate(rec.transcript, run.user_text()) <= 0.2
    assert_events_in_order(run)
    (turn,) = turn_latencies(run.events)
    # On real time the engines take time: the first audio comes after the endpoint.
    assert turn.voice_to_voice_s is not None and turn.voice_to_voice_s > turn.endpoint_s
    # The final pass starts in the silence before the endpoint: often ready when it comes; and with it
    # the speculative reply, whose first token may be in by then too (0: counted from the endpoint).
    assert turn.llm_first_token_s >= 0 and turn.asr_final_s >= 0


async def test_silence_starts_no_turn(engines, replay_run):
    run = await replay_run(engines, np.zeros(ASR_RATE * 3, dtype=np.float32))
    assert run.events == [] and run.transcript == []
    assert not run.reply.any()
