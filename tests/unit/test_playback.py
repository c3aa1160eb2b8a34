"""Playback ledger, word alignment, history, latency, audio buffer, clocks."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from core.audio import AudioBuffer
from core.events import event_from_json
from core.history import History, Turn
from core.ledger import PlaybackLedger, Word
from core.words import spoken_units
from shell.clock import VirtualClock
from tts.alignment import weighted_ends, word_ends
from voice.app.latency import turn_latencies


def test_ledger_heard_words_follow_the_played_samples():
    ledger = PlaybackLedger()
    ledger.add_chunk("Hello there.", 200, [Word("Hello", 100), Word("there.", 200)])
    ledger.add_chunk("Bye.", 100, [Word("Bye.", 100)])
    assert ledger.heard_text(0) == ""
    assert ledger.heard_text(49) == ""
    assert ledger.heard_text(51) == "Hello"  # more than half of it
    assert ledger.heard_text(200) == "Hello there."
    assert ledger.heard_text(300) == "Hello there. Bye."
    ledger.advance(120)
    assert not ledger.all_played and ledger.heard_text() == "Hello"
    ledger.advance(1000)
    assert ledger.all_played and ledger.played == 300


def test_word_ends_from_phoneme_spaces():
    phonemes = ["^", "h", "a", " ", "t", "o", "$"]
    samples = [10, 20, 20, 5, 20, 20, 10]
    assert word_ends(["ha", "to"], phonemes, samples, 105) == [Word("ha", 50), Word("to", 95)]


def test_word_ends_share_out_when_espeak_fuses_words():
    phonemes = ["^", "o", "n", "ð", "ə", "$"]  # "on the" as one phonetic word
    samples = [10, 10, 10, 10, 10, 10]
    words = word_ends(["on", "the"], phonemes, samples, 60)
    assert [w.text for w in words] == ["on", "the"]
    assert 10 < words[0].end < words[1].end == 50


def test_japanese_characters_end_at_the_phoneme_their_morae_reach_and_a_cut_keeps_those_heard():
    units = spoken_units("東京です。")  # 東 京 で す。: morae 2, 2, 1, 1
    assert units == ["東", "京", "で", "す。"]
    phonemes = ["^", *"toːkʲoː desɨ", ".", "$"]  # 11 voiced phonemes (the space and "." are silent)
    samples = [100] + [10] * 12 + [50, 100]
    words = weighted_ends(units, [2, 2, 1, 1], phonemes, samples, 300)
    assert [w.end for w in words] == [140, 170, 200, 220]  # the 4th, 7th, 9th and 11th voiced phoneme
    ledger = PlaybackLedger()
    ledger.add_chunk("東京です。", 300, words)
    assert ledger.heard_text(180) == "東京"  # not more than half of で played yet
    assert ledger.heard_text(300) == "東京です。"


def test_history_refuses_empty_turns_and_builds_messages():
    h = History()
    h.add(Turn("user", "hi"))
    with pytest.raises(ValueError):
        h.add(Turn("assistant", "  "))
    assert h.messages("sys") == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]


def test_latency_breakdown_from_events():
    events = [  # as events.jsonl has them
        {"t": 1.5, "type": "speech_end", "end": 1.0, "utterance": 1},
        {"t": 1.9, "type": "asr_final", "text": "hi", "utterance": 1},
        {"t": 1.9, "type": "response_start", "response": 1, "utterance": 1, "text": "hi"},
        {"t": 2.0, "type": "llm_first_token", "response": 1},
        {"t": 2.3, "type": "tts_chunk", "response": 1, "chunk": 1, "text": "Hello."},
        {"t": 2.32, "type": "playback_start", "response": 1},
    ]
    (turn,) = turn_latencies(map(event_from_json, events))
    assert (turn.endpoint_s, turn.asr_final_s, turn.llm_first_token_s) == (0.5, 0.4, 0.1)
    assert (turn.first_chunk_s, turn.first_audio_s, turn.voice_to_voice_s) == (0.3, 0.02, 1.32)


def test_audio_buffer_keeps_the_last_seconds_by_absolute_index():
    buf = AudioBuffer(rate=10, max_s=2.0)  # 20 samples
    buf.append(np.arange(15, dtype=np.float32))
    buf.append(np.arange(15, 30, dtype=np.float32))
    assert buf.start == 10 and buf.end == 30
    assert list(buf.slice(0.0, 1.5)) == list(range(10, 15))
    assert list(buf.slice(2.5, 9.0)) == list(range(25, 30))


def test_virtual_clock_moves_only_forward():
    clock = VirtualClock()
    asyncio.run(clock.sleep_until(1.5))
    assert clock.now() == 1.5
    with pytest.raises(ValueError):
        clock.advance_to(1.0)


def test_fit_to_context_forgets_the_oldest_turns_first():
    from llm.context import fit_to_context

    msgs = [{"role": "system", "content": "s"}] + [{"role": "user", "content": str(i)} for i in range(10)]
    fitted = fit_to_context(msgs, len, 4)
    assert [m["content"] for m in fitted] == ["s", "7", "8", "9"]
    assert fit_to_context(msgs[:2], len, 0) == msgs[:2]  # the system prompt and the newest message stay


def test_playout_pause_fades_keeps_the_queue_and_resumes():
    from core.playout import Playout

    p = Playout(rate=1000, fade_ms=5)
    p.append(np.ones(100, dtype=np.float32))
    block, n = p.pull(20)
    assert n == 20 and block.min() == 1.0
    p.pause()
    block, n = p.pull(20)
    assert n == 5 and block[0] == 1.0 and 0 < block[4] < 1 and not block[5:].any()  # 5 ms fade
    assert p.pull(20)[1] == 0 and p.queued == 75
    p.resume()
    block, n = p.pull(20)
    assert n == 20 and block[0] == 0.0 and block[10] == 1.0  # fades back in
    p.clear()
    assert p.pull(20)[1] == 0


def test_percentile_interpolates_and_skips_missing_values():
    from voice.app.latency import percentile

    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([None, 1.0, 3.0], 0.5) == 2.0
    assert percentile([1.0, 2.0], 0.95) == 1.95
    assert percentile([], 0.5) is None
