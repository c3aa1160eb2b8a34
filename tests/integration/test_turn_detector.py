"""The end of the person's turn on the real engines (Silero, faster-whisper, Smart Turn, vLLM, piper), on
virtual time: a finished sentence ends well before 500 ms of silence, a pause inside a sentence does not
end it, and ``silence`` (--turn-detector silence) behaves as before the model.

The sentence is "For the twentieth time that evening the two men shook hands." (CMU ARCTIC aew_a0003);
the pause is silence inserted at "that | evening" (Whisper base's word timestamps, see
voice/bench/turns.py). The endpoint delay is the SpeechEnd's ``t`` minus its ``end``.
"""

from __future__ import annotations

import pytest

from core.events import EndOfTurnText
from shell.config import SessionConfig
from tests.conftest import FIXTURES
from transport.files import load_audio
from voice.bench.fixtures import SHARED_SPEECH, with_silence
from voice.bench.scoring import word_error_rate
from voice.bench.turns import run_turns

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="session")]

SENTENCE = "For the twentieth time that evening the two men shook hands."
AT_S = 1.50  # "For the twentieth time that | evening ..."
SMART_TURN = SessionConfig()  # the default
SILENCE = SessionConfig(end_of_turn=None)


@pytest.fixture(scope="module")
def sentence():
    return load_audio(FIXTURES / "cmu_arctic_us_aew_a0003.wav")


async def test_a_finished_sentence_ends_well_before_500_ms_of_silence(engines, sentence):
    run = await run_turns(engines, sentence, SMART_TURN)
    assert run.errors == []
    (end,) = run.endpoints
    assert run.endpoint_delay_s <= 0.3, run.checks  # 0.2 s of silence, and Smart Turn said finished
    assert run.checks[-1].decision == "end" and run.checks[-1].t == end.t
    assert word_error_rate(SENTENCE, run.user_text()) <= 0.2, run.user_text()
    assert [t["role"] for t in run.transcript] == ["user", "assistant"]


async def test_a_pause_inside_a_sentence_is_one_turn(engines, sentence):
    run = await run_turns(engines, with_silence(sentence, AT_S, 0.6), SMART_TURN)
    assert run.errors == []
    assert len(run.endpoints) == 1, run.checks
    inside = [c for c in run.checks if c.t < AT_S + 0.6]
    assert inside and all(c.decision in ("wait", "stale") for c in inside)  # asked in the pause, not finished
    assert [t["role"] for t in run.transcript] == ["user", "assistant"]
    assert word_error_rate(SENTENCE, run.user_text()) <= 0.2, run.user_text()


async def test_unfinished_words_hold_the_turn_the_sound_calls_finished(engines):
    """ "Not at this particular | case, Tom, apologized Whittemore." (CMU ARCTIC aew_a0002) with 0.6 s of
    silence after "particular": Smart Turn calls that pause finished (0.95); the LLM reads the
    early final as a sentence that does not end there, and the turn is held open."""
    audio = load_audio(SHARED_SPEECH / "cmu_arctic_us_aew_a0002.wav")
    run = await run_turns(engines, with_silence(audio, 1.32, 0.6), SMART_TURN)
    assert run.errors == []
    assert len(run.endpoints) == 1, run.checks
    words = [e for e in run.events if isinstance(e, EndOfTurnText) and e.t < 1.32 + 0.6]
    assert words and words[0].unfinished and words[0].sentence_end < 0.005, words
    assert word_error_rate("Not at this particular case, Tom, apologized Whittemore.", run.user_text()) <= 0.3


async def test_finished_words_end_a_turn_the_sound_doubts_sooner(engines):
    """ "Lord, but I'm glad to see you again, Phil." (axb_a0004): Smart Turn says 0.15, the words read
    finished: the turn ends at 0.8 s of silence, not the 2 s maximum."""
    run = await run_turns(engines, load_audio(FIXTURES / "cmu_arctic_us_axb_a0004.wav"), SMART_TURN)
    assert run.errors == [] and len(run.endpoints) == 1
    assert 0.5 < run.endpoint_delay_s <= 0.8 + 0.032 + 0.02, run.checks
    # Read twice: the pause's closing partial (64 ms into the silence), then its early final (128 ms).
    closing, early = [e for e in run.events if isinstance(e, EndOfTurnText)]
    assert closing.t < early.t < run.endpoints[0].t
    assert all(w.sentence_end >= 0.4 and not w.unfinished for w in (closing, early)), (closing, early)


async def test_silence_alone_behaves_as_before(engines, sentence):
    run = await run_turns(engines, sentence, SILENCE)
    assert run.errors == [] and run.checks == [] and len(run.endpoints) == 1
    assert 0.5 <= run.endpoint_delay_s <= 0.5 + 0.032 + 0.02  # the hangover, to the frame and the block
    paused = await run_turns(engines, with_silence(sentence, AT_S, 0.6), SILENCE)
    assert paused.checks == [] and len(paused.endpoints) == 2  # 0.6 s of silence ends the turn, as it did
    assert paused.cut_at(AT_S, 0.6)
