"""The sound card's echo canceller reference kept one continuous stream (``transport/reference.py``)."""

from __future__ import annotations

import numpy as np

from transport.reference import ReferenceTrack

RATE = 44100
FRAMES = 441  # a 10 ms device block


def test_jittery_timestamps_give_a_continuous_reference_at_their_average():
    # PulseAudio's timestamps put each block up to 6 ms either side of where the speaker really is.
    rng = np.random.default_rng(1)
    track, true_offset, places = ReferenceTrack(RATE), 5000, []
    for i in range(1000):
        measured = true_offset + i * FRAMES + int(rng.integers(-265, 266))
        places.append(track.place(measured, FRAMES, silent=False))
    steps = np.diff(places) - FRAMES
    assert np.abs(steps).max() <= 1  # at most one sample skipped or repeated per block
    assert abs(places[-1] - (true_offset + 999 * FRAMES)) <= 60  # within 1.4 ms of the truth


def test_a_jump_beyond_50_ms_is_taken_at_once_and_silence_is_followed_freely():
    track = ReferenceTrack(RATE)
    assert track.place(1000, FRAMES, silent=False) == 1000
    assert track.place(1000 + FRAMES + 5000, FRAMES, silent=False) == 1000 + FRAMES + 5000  # an underrun
    start = 1000 + 2 * FRAMES + 5000
    place = track.place(start + 400, FRAMES, silent=True)  # the speaker is silent: no slew limit
    assert place - start == round(0.05 * 400)  # one block of averaging
