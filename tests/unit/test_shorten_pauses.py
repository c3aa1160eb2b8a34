"""What Whisper hears of an utterance with long silences inside it (core/audio.py)."""

from __future__ import annotations

import numpy as np

from core.audio import ASR_RATE, shorten_pauses


def timeline(t0: float, seconds: float) -> np.ndarray:
    """Audio whose every sample is its own time on the timeline (in samples), to see what was kept."""
    return (np.arange(round(seconds * ASR_RATE)) + round(t0 * ASR_RATE)).astype(np.float64)


def test_a_long_pause_keeps_half_of_keep_s_at_either_side():
    audio = timeline(10.0, 3.0)  # 10.0-13.0 s, a pause from 11.0 to 12.5
    out = shorten_pauses(audio, 10.0, [(11.0, 12.5)], keep_s=0.3)
    assert len(out) == round(1.8 * ASR_RATE)
    at = round(1.15 * ASR_RATE)  # 10.0 + 1.15: the cut
    assert out[at - 1] == round(11.15 * ASR_RATE) - 1
    assert out[at] == round(12.35 * ASR_RATE)
    assert out[-1] == audio[-1]


def test_short_pauses_and_pauses_outside_the_audio_are_left_alone():
    audio = timeline(10.0, 3.0)
    assert shorten_pauses(audio, 10.0, [(11.0, 11.3)], keep_s=0.3) is audio
    assert shorten_pauses(audio, 10.0, [(9.0, 10.5), (12.5, 14.0)], keep_s=0.3) is audio


def test_several_pauses_in_order_whatever_order_they_come_in():
    audio = timeline(0.0, 5.0)
    out = shorten_pauses(audio, 0.0, [(3.0, 4.0), (1.0, 2.0)], keep_s=0.2)
    assert len(out) == round(3.4 * ASR_RATE)
    assert np.all(np.diff(out) > 0)  # nothing repeated or reordered


def test_overlapping_pauses_never_repeat_audio():
    audio = timeline(0.0, 5.0)
    out = shorten_pauses(audio, 0.0, [(1.0, 3.0), (2.0, 4.0)], keep_s=0.2)
    assert np.all(np.diff(out) > 0)
