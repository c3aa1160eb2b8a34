"""Endpointing, partial stability and the partial budget (pure logic)."""

from __future__ import annotations

from core.endpointing import (
    EndpointConfig,
    Endpointer,
    OnsetDropped,
    SpeechEnd,
    SpeechOnset,
    SpeechStart,
    speech_run_start,
)
from core.partials import PartialConfig, PartialPolicy
from core.stability import LocalAgreement

FRAME_S = 0.032


def edges(probs, cfg: EndpointConfig | None = None):
    ep = Endpointer(cfg or EndpointConfig(), FRAME_S)
    return [e for i, p in enumerate(probs) if (e := ep.push(p, i * FRAME_S)) is not None]


def run(probs, cfg: EndpointConfig | None = None):
    """Confirmed edges only."""
    return [e for e in edges(probs, cfg) if isinstance(e, SpeechStart | SpeechEnd)]


def test_start_needs_minimum_speech_and_end_needs_hangover():
    cfg = EndpointConfig(min_speech_s=0.256, hangover_s=0.48)
    probs = [0.0] * 5 + [0.9] * 20 + [0.0] * 20
    start, end = run(probs, cfg)
    assert isinstance(start, SpeechStart) and isinstance(end, SpeechEnd)
    assert abs(start.onset - 5 * FRAME_S) < 1e-9
    assert abs(start.t - 13 * FRAME_S) < 1e-9  # 8 frames = 256 ms to confirm
    assert abs(end.end - 25 * FRAME_S) < 1e-9
    assert abs(end.t - end.end - 0.48) < FRAME_S


def test_end_now_leaves_the_utterance_and_the_next_words_start_a_new_one():
    ep = Endpointer(EndpointConfig(min_speech_s=0.192, hangover_s=2.0), FRAME_S)
    assert ep.end_now(0.0) is None  # no utterance in progress
    probs = [0.9] * 10 + [0.0] * 7
    got = [e for i, p in enumerate(probs) if (e := ep.push(p, i * FRAME_S)) is not None]
    assert [type(e) for e in got] == [SpeechOnset, SpeechStart]
    end = ep.end_now(17 * FRAME_S + 0.05)  # an end-of-turn model's answer, between frames
    assert isinstance(end, SpeechEnd) and abs(end.end - 10 * FRAME_S) < 1e-9 and end.t == 17 * FRAME_S + 0.05
    assert not ep.in_speech and ep.silence_s == 0.0 and ep.end_now(1.0) is None
    # More silence ends nothing more; the next voiced frames must make the minimum again.
    later = [ep.push(p, (17 + i) * FRAME_S) for i, p in enumerate([0.0] * 70 + [0.9] * 6)]
    starts = [e for e in later if isinstance(e, SpeechStart)]
    assert [type(e) for e in later if e is not None] == [SpeechOnset, SpeechStart]
    assert abs(starts[0].onset - 87 * FRAME_S) < 1e-9


def test_a_short_burst_is_not_speech():
    assert run([0.0] * 5 + [0.9] * 4 + [0.0] * 30) == []


def test_early_onset_notice_then_dropped_for_a_burst():
    cfg = EndpointConfig(onset_s=0.096, start_gap_s=0.3)
    onset, dropped = edges([0.0] * 5 + [0.9] * 4 + [0.0] * 30, cfg)
    assert isinstance(onset, SpeechOnset) and isinstance(dropped, OnsetDropped)
    assert abs(onset.onset - 5 * FRAME_S) < 1e-9
    assert abs(onset.t - 8 * FRAME_S) < 1e-9  # after three voiced frames
    assert dropped.t - 9 * FRAME_S > 0.3  # once the start gap has passed


def test_early_onset_notice_then_confirmed_start():
    events = edges([0.0] * 2 + [0.9] * 10 + [0.0] * 30)
    assert [type(e) for e in events] == [SpeechOnset, SpeechStart, SpeechEnd]
    assert events[0].onset == events[1].onset


def test_short_gaps_do_not_reset_the_start():
    # "ask" (4 frames), a stop (3 frames), "not" (4 frames): one start, at "ask".
    cfg = EndpointConfig(min_speech_s=0.25, start_gap_s=0.2)
    (start, *_) = run([0.0] * 3 + [0.9] * 4 + [0.1] * 3 + [0.9] * 4 + [0.0] * 30, cfg)
    assert abs(start.onset - 3 * FRAME_S) < 1e-9


def test_hysteresis_keeps_speech_through_a_dip():
    cfg = EndpointConfig(threshold=0.5, hangover_s=0.2)
    events = run([0.9] * 10 + [0.4] * 20 + [0.9] * 5 + [0.0] * 20, cfg)
    assert [type(e) for e in events] == [SpeechStart, SpeechEnd]


def test_local_agreement_commits_what_two_passes_agree_on():
    la = LocalAgreement()
    assert la.update("ask not what") == ("", "ask not what")
    assert la.update("ask not what your") == ("ask not what", "your")
    assert la.update("Ask not, what your country") == ("ask not what your", "country")
    # A pass that contradicts the committed words does not take them back.
    assert la.update("has not") == ("ask not what your", "")


def test_partial_policy_budget():
    policy = PartialPolicy(PartialConfig(interval_s=1.0, min_audio_s=0.6, max_silence_s=0.1))
    assert not policy.due(0.5, 0.0)  # too little audio
    assert policy.due(1.0, 0.0)
    assert not policy.due(1.0, 0.2)  # a pause: the endpoint may be near, the final comes first
    policy.started(1.0)
    assert not policy.due(3.0, 0.0)  # one at a time
    assert policy.finished("hello") == ("", "hello")
    assert not policy.due(1.5, 0.0)  # interval
    assert policy.due(2.0, 0.0)
    assert policy.finished("hello") is None  # unchanged text is not reported again


def test_a_decode_that_says_it_again_is_caught():
    from asr.whisper import _loops

    assert _loops("in the context of society and the context of society and")
    assert _loops("a little bit of a little bit of a little bit of")
    assert _loops("Arate Arate Arate Arate Arate Ar")  # "At eight." in the short window (docs/bench/flows.md)
    assert _loops("Arate Arate") and _loops("6 6") and _loops("Yes. Yes.")  # a short answer, and it again
    assert not _loops("Yes.") and not _loops("6") and not _loops("At eight, yes.")
    # People repeat single words and pairs, and say the same words apart.
    assert not _loops("no no no, I said it it is what it is")
    assert not _loops("ask not what your country can do for you, ask what you can do for your country")


def test_a_decode_that_starts_the_sentence_over_is_cut_where_it_restarts():
    from asr.whisper import _without_restart

    heard = "God bless them. I hope I'll go on seeing them forever. God bless them. I hope I'll"  # issue 44's grid
    assert _without_restart(heard) == "God bless them. I hope I'll go on seeing them forever."
    # A repetition that does not start the text over, or is short, is the person's.
    assert _without_restart("no no no, I said it") == "no no no, I said it"
    assert _without_restart("I said I want tea, I said") == "I said I want tea, I said"
    assert _without_restart("それにもう一つ") == "それにもう一つ"


def test_level_meters():
    from core.levels import BackgroundMeter, LevelMeter

    level = LevelMeter()
    assert level.db is None
    level.add(0.01)
    level.add(0.01)
    assert abs(level.db - -20.0) < 1e-3
    level.reset()
    assert level.db is None
    background = BackgroundMeter(frames=20)
    for _ in range(15):
        background.add(1e-4)
    assert background.db is None  # too little heard to say
    for _ in range(30):
        background.add(1e-6)  # only the last 20 frames count
    assert abs(background.db - -60.0) < 1e-3


def test_the_run_of_speech_that_ends_the_frames_starts_after_the_last_long_gap():
    hi, lo = 0.9, 0.1
    assert speech_run_start([lo, lo, hi, hi, lo, hi, hi], 0.5) == 2  # a one-frame dip between words
    assert speech_run_start([hi, lo, lo, lo, hi, hi], 0.5) == 4  # three quiet frames end it
    assert speech_run_start([hi, hi, hi], 0.5) == 0  # speech all the way back
    assert speech_run_start([hi, hi, lo], 0.5) == 3  # not speech at the end: no run
    assert speech_run_start([], 0.5) == 0
