"""The echo gate (``core/echo_gate.py``): the person, or the assistant's own voice?

Two kinds of test. On recorded frames: the bundled recordings, one as what
the assistant plays and one as the person, the played one sent through
``transport/echo_path.py``'s simulated room at several levels; the echo
canceller's output (``asr/echo.py``) is simulated, as the echo strongly
reduced (a converged canceller) or as everything turned down (its
suppressor in double talk). On constant frames, with fixed probabilities:
the thresholds, learning and window, exactly.

The VAD is a stand-in (:func:`vad_stand_in`, an energy threshold): it says
"speech" for the echo as readily as for the person, as Silero does for the
raw microphone during playback. The gate's logic is what is under test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.audio import ASR_RATE, VAD_FRAME
from core.echo_gate import EchoGate, echo_coherence
from transport.echo_path import EchoPath
from transport.files import load_audio

FIXTURES = Path(__file__).parent.parent / "fixtures"
PLAYED = load_audio(FIXTURES / "ljspeech_LJ001-0005.wav")  # the assistant's voice: 8.1 s, a female reader
PERSON = load_audio(FIXTURES / "cmu_arctic_us_aew_a0003.wav")  # the person: 3.5 s, a male speaker
PERSON_AT_S = 1.5  # the person starts over the reply after its first 1.5 s
ECHO_DB = [-20, -10, 0]  # the echo's level relative to what was played (0: as loud as played)
LEARN = 16  # frames learnt (playback, no speech) before the raw view counts: learn_s = 0.5 s of 32 ms frames
WINDOW = 9  # frames of playback the gate looks back over: window_s = 0.3 s
HISTORY = 188  # frames of echo path remembered: history_s = 6 s


def vad_stand_in(frame: np.ndarray) -> float:
    """Stands in for Silero VAD: 0.9 above -45 dBFS, 0.05 below (it cannot tell echo from person)."""
    return 0.9 if energy_db(frame) > -45 else 0.05


def energy(frame: np.ndarray) -> float:
    return float(np.mean(frame**2))


def energy_db(frame: np.ndarray) -> float:
    return 10 * np.log10(energy(frame) + 1e-12)


def frames(x: np.ndarray) -> np.ndarray:
    return x[: len(x) // VAD_FRAME * VAD_FRAME].reshape(-1, VAD_FRAME)


def scene(echo_db: float, person_db: float | None = None, view: str = "cancelled", residual_db: float = -20):
    """The microphone during playback of ``PLAYED``, frame by frame.

    ``person_db``: the person's level over the echo's (None: no person).
    ``view``: the simulated canceller output, ``cancelled`` (the echo down
    ``residual_db``, the person untouched) or ``suppressed`` (everything down
    20 dB: a suppressor in double talk, which only the raw view gets past).
    Returns (played, echo, person, raw, cleaned), each as frames.
    """
    echo = EchoPath(echo_db, delay_ms=30)(PLAYED)
    person = np.zeros_like(PLAYED) if person_db is None else person_track(echo_db + person_db)
    raw = echo + person
    cleaned = person + echo * 10 ** (residual_db / 20) if view == "cancelled" else raw * 0.1
    return tuple(frames(x) for x in (PLAYED, echo, person, raw, cleaned))


def person_track(gain_db: float = 0.0) -> np.ndarray:
    """The person, from ``PERSON_AT_S`` into the playback, ``gain_db`` from the recording's level."""
    track = np.zeros_like(PLAYED)
    start = round(PERSON_AT_S * ASR_RATE)
    part = PERSON[: len(PLAYED) - start]
    track[start : start + len(part)] = part * 10 ** (gain_db / 20)
    return track


def run(gate: EchoGate, played, raw, cleaned) -> np.ndarray:
    """The gate's probability for each frame, as the session calls it."""
    out = []
    for far, r, c in zip(played, raw, cleaned, strict=True):
        gate.far_frame(far)
        out.append(gate(vad_stand_in(r), vad_stand_in(c), r, c))
    return np.array(out)


def const(level: float, n: int = VAD_FRAME) -> np.ndarray:
    """A frame of energy ``level**2``."""
    return np.full(n, level, dtype=np.float32)


def learnt(gate: EchoGate, ratio: float, n: int = LEARN, far: float = 0.1) -> EchoGate:
    """``n`` frames of echo alone, ``ratio`` times the energy played, the canceller removing it."""
    for _ in range(n):
        gate.far_frame(const(far))
        gate(0.9, 0.05, const(far * np.sqrt(ratio)), const(far * np.sqrt(ratio) / 100))
    return gate


# -- the far end silent: nothing to discount ------------------------------------------


@pytest.mark.parametrize(
    "far",
    [None, np.zeros(VAD_FRAME), np.zeros(0), np.random.default_rng(0).normal(0, 10 ** (-60 / 20), VAD_FRAME)],
    ids=["never-played", "zeros", "empty", "noise-at-60-dB"],
)
def test_far_end_silent_passes_the_louder_view(far):
    gate = EchoGate()
    raw = frames(PERSON)
    cleaned = raw * 0.01  # even a canceller that takes 40 dB off does not matter
    for i, (r, c) in enumerate(zip(raw, cleaned, strict=True)):
        if far is not None:
            gate.far_frame(far)
        p_raw, p_clean = vad_stand_in(r), 0.3 + 0.001 * (i % 500)
        assert gate(p_raw, p_clean, r, c) == max(p_raw, p_clean)


def test_far_end_silent_learns_nothing():
    gate = EchoGate()
    for _ in range(100):
        gate.far_frame(np.zeros(VAD_FRAME))
        gate(0.05, 0.05, const(0.3), const(0.3))
    assert gate.echo_gain == 1.0
    gate.far_frame(const(0.1))  # playback starts: the raw view has learnt nothing yet
    assert gate(0.9, 0.9, const(0.2), const(0.002)) == 0.0  # the playback's waveform: maybe its echo


# -- echo alone over playback ---------------------------------------------------------


@pytest.mark.parametrize("residual_db", [-12, -30], ids=["half-converged", "converged"])
@pytest.mark.parametrize("echo_db", ECHO_DB)
def test_echo_alone_is_gated_off(echo_db, residual_db):
    played, _, _, raw, cleaned = scene(echo_db, residual_db=residual_db)
    assert sum(vad_stand_in(r) > 0.5 for r in raw) > 100  # the stand-in hears the echo as speech
    assert run(EchoGate(), played, raw, cleaned).max() < 0.5


@pytest.mark.parametrize("echo_db", ECHO_DB)
def test_echo_gain_is_learnt_from_the_echo(echo_db):
    gate = EchoGate()
    played, _, _, raw, cleaned = scene(echo_db)
    run(gate, played, raw, cleaned)
    assert abs(10 * np.log10(gate.echo_gain) - echo_db) < 2  # the loud end of the echo path: a dB over


# -- the person over playback ----------------------------------------------------------


@pytest.mark.parametrize("person_db", [0, 10])
@pytest.mark.parametrize("echo_db", ECHO_DB)
def test_person_as_loud_as_the_echo_passes_on_the_cancelled_view(echo_db, person_db):
    played, echo, person, raw, cleaned = scene(echo_db, person_db, view="cancelled")
    prob = run(EchoGate(), played, raw, cleaned)
    voiced = np.array([vad_stand_in(p) > 0.5 for p in person])
    over_echo = np.array([energy(p) >= energy(e) for p, e in zip(person, echo, strict=True)])
    assert (voiced & over_echo).sum() > 50
    assert (prob[voiced & over_echo] > 0.5).all()
    assert (prob[~voiced] < 0.5).all()


@pytest.mark.parametrize("echo_db", ECHO_DB)
def test_person_louder_than_the_echo_passes_on_the_raw_view(echo_db):
    # The canceller's suppressor turns everything down: only the raw view can let the person through,
    # where they are margin_db over the loudest echo expected (of the last window_s of playback).
    played, echo, person, raw, cleaned = scene(echo_db, person_db=20, view="suppressed")
    prob = run(EchoGate(), played, raw, cleaned)
    voiced = np.array([vad_stand_in(p) > 0.5 for p in person])
    loud = np.array([energy_db(p) - energy_db(e) >= 20 for p, e in zip(person, echo, strict=True)]) & voiced
    assert loud.sum() > 50
    assert (prob[loud] > 0.5).mean() >= 0.85
    assert (prob[~voiced] < 0.5).all()


@pytest.mark.parametrize("echo_db", [None, -60, -40], ids=["no-echo", "echo-at-60-dB", "echo-at-40-dB"])
def test_person_over_headphones_passes_though_the_suppressor_assumes_echo(echo_db):
    # The case the raw view is for: with little or no echo, a suppressor would hold the person back for seconds.
    echo = frames(EchoPath(echo_db, 30)(PLAYED) if echo_db is not None else np.zeros_like(PLAYED))
    person = frames(person_track())
    raw = echo + person
    prob = run(EchoGate(), frames(PLAYED), raw, raw * 0.1)
    voiced = np.array([vad_stand_in(p) > 0.5 for p in person])
    assert voiced.sum() > 100
    assert (prob[voiced] > 0.5).all()
    assert (prob[~voiced] < 0.5).all()


@pytest.mark.parametrize("onset_s", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("echo_db", [-20, -10])
def test_person_talking_as_the_reply_starts_is_not_learnt_as_echo(echo_db, onset_s):
    # Issue 44: the person goes on just as the reply starts, and the suppressor, not converged,
    # takes everything for echo. Their voice is not the reply's waveform: it is not learnt as echo,
    # and it passes on the raw view before the echo path is learnt: it is not the reply's waveform.
    start = round(onset_s * ASR_RATE)
    person = np.zeros_like(PLAYED)
    part = PERSON[: len(PLAYED) - start] * 10 ** ((echo_db + 20) / 20)  # 20 dB over the echo
    person[start : start + len(part)] = part
    echo = EchoPath(echo_db, delay_ms=30)(PLAYED)
    raw = frames(echo + person)
    gate = EchoGate()
    prob = run(gate, frames(PLAYED), raw, raw * 0.01)
    assert 10 * np.log10(gate.echo_gain) < echo_db + 3  # the echo path's, not the person's level
    voiced = np.array([vad_stand_in(p) > 0.5 for p in frames(person)])
    over = [energy_db(p) - energy_db(e) >= 20 for p, e in zip(frames(person), frames(echo), strict=True)]
    loud = voiced & np.array(over)
    assert loud.sum() > 30
    assert (prob[loud][2:] > 0.5).mean() >= 0.8  # about as over a reply long under way (above)


def test_echo_coherence_tells_the_echo_from_the_person():
    played = PLAYED[ASR_RATE : 3 * ASR_RATE]
    echo = EchoPath(-10, delay_ms=30)(played)
    person = PERSON[: len(played)] * 10 ** (-10 / 20)
    history = round(0.48 * ASR_RATE) + VAD_FRAME
    echo_only, double_talk = [], []
    for end in range(history, len(played), VAD_FRAME):
        window = played[end - history : end]
        mic = echo[end - VAD_FRAME : end]
        if energy_db(mic) > -50 and energy_db(person[end - VAD_FRAME : end]) > -40:
            echo_only.append(echo_coherence(mic, window))
            double_talk.append(echo_coherence(mic + 3 * person[end - VAD_FRAME : end], window))
    assert len(echo_only) > 10
    assert np.median(echo_only) > 0.7
    assert np.median(double_talk) < 0.5


def test_echo_coherence_of_nothing_is_zero():
    assert echo_coherence(np.zeros(0, np.float32), np.ones(1000, np.float32)) == 0.0
    assert echo_coherence(np.ones(512, np.float32), np.ones(100, np.float32)) == 0.0


# -- near_energy: the person's share ---------------------------------------------------


def test_near_energy_with_the_far_end_silent_is_the_microphones():
    gate = EchoGate()
    assert gate.near_energy(const(0.1), const(0.01)) == pytest.approx(0.01)
    gate.far_frame(np.zeros(VAD_FRAME))
    assert gate.near_energy(const(0.1), const(0.01)) == pytest.approx(0.01)


def test_near_energy_subtracts_the_expected_echo():
    gate = learnt(EchoGate(), ratio=0.5, far=0.1)  # echo energy: half of 0.01
    assert gate.echo_gain == pytest.approx(0.5)
    gate.far_frame(const(0.1))
    assert gate.near_energy(const(0.1), const(0.01)) == pytest.approx(0.01 - 0.5 * 0.01)


def test_near_energy_expects_the_loudest_echo_of_the_window():
    gate = learnt(EchoGate(), ratio=0.5, far=0.1)
    gate.far_frame(const(0.2))  # 0.04: the loudest in the window
    for _ in range(WINDOW - 1):
        gate.far_frame(const(0.05))
    assert gate.near_energy(const(0.2), const(0.01)) == pytest.approx(0.04 - 0.5 * 0.04)
    gate.far_frame(const(0.05))  # the loud one leaves the window
    assert gate.near_energy(const(0.2), const(0.01)) == pytest.approx(0.04 - 0.5 * 0.0025)


def test_near_energy_is_never_under_the_cancelled_energy():
    gate = EchoGate()  # echo_gain 1.0 until learnt: pessimistic
    gate.far_frame(const(0.5))
    assert gate.near_energy(const(0.1), const(0.02)) == pytest.approx(0.0004)


@pytest.mark.parametrize("echo_db", ECHO_DB)
def test_near_energy_of_the_person_in_double_talk(echo_db):
    # The suppressor takes 6 dB off the person: the cancelled view alone would say 6 dB too little.
    played, echo, person, raw, _ = scene(echo_db, person_db=20)
    cleaned = person * 0.5 + echo * 0.05
    gate = EchoGate()
    near, truth, under = [], [], []
    for far, e, p, r, c in zip(played, echo, person, raw, cleaned, strict=True):
        gate.far_frame(far)
        if energy_db(p) - energy_db(e) >= 20 and energy(e) > 1e-6 and vad_stand_in(p) > 0.5:
            near.append(10 * np.log10(gate.near_energy(r, c)))
            truth.append(energy_db(p))
            under.append(energy_db(c))
        gate(vad_stand_in(r), vad_stand_in(c), r, c)
    near, truth, under = np.array(near), np.array(truth), np.array(under)
    assert len(near) > 40
    assert abs(np.median(near - truth)) < 0.5
    assert np.median(under - truth) == pytest.approx(-6, abs=0.2)


@pytest.mark.parametrize("echo_db", ECHO_DB)
def test_near_energy_of_echo_alone_is_what_the_canceller_left(echo_db):
    played, _, _, raw, cleaned = scene(echo_db, residual_db=-20)
    gate = EchoGate()
    left = []
    for i, (far, r, c) in enumerate(zip(played, raw, cleaned, strict=True)):
        gate.far_frame(far)
        if i > 2 * LEARN and max(energy(far), energy(r)) > 1e-5:
            left.append(10 * np.log10(gate.near_energy(r, c)) - energy_db(r))
        gate(vad_stand_in(r), vad_stand_in(c), r, c)
    assert np.median(left) == pytest.approx(-20, abs=0.1)  # the residual: the expected echo is all of the rest
    assert max(left) < 0


# -- the views' thresholds, exactly ---------------------------------------------------------


@pytest.mark.parametrize(("reduction_db", "counts"), [(-3, True), (-8.9, True), (-9.1, False), (-20, False)])
def test_cancelled_view_counts_while_cancellation_leaves_more_than_gate_db(reduction_db, counts):
    gate = EchoGate()
    gate.far_frame(const(0.1))
    prob = gate(0.1, 0.8, const(0.1), const(0.1 * 10 ** (reduction_db / 20)))
    assert prob == (0.8 if counts else 0.0)


@pytest.mark.parametrize(("over_db", "counts"), [(5.9, False), (6.1, True), (20, True)])
def test_raw_view_counts_when_margin_db_over_the_loudest_echo_expected(over_db, counts):
    gate = learnt(EchoGate(), ratio=0.1, far=0.1)  # loudest echo expected: 0.1 x 0.01
    gate.far_frame(const(0.1))
    raw = const(np.sqrt(0.1 * 0.01 * 10 ** (over_db / 10)))
    assert gate(0.7, 0.9, raw, raw / 100) == (0.7 if counts else 0.0)


def test_both_views_counting_give_the_higher_probability():
    gate = learnt(EchoGate(), ratio=0.1)
    gate.far_frame(const(0.1))
    assert gate(0.6, 0.8, const(0.1), const(0.1)) == 0.8
    gate.far_frame(const(0.1))
    assert gate(0.8, 0.6, const(0.1), const(0.1)) == 0.8


@pytest.mark.parametrize(("frames_learnt", "counts"), [(0, False), (1, False), (LEARN - 1, False), (LEARN, True)])
def test_raw_view_counts_only_after_learn_s_of_playback(frames_learnt, counts):
    # The playback's own waveform, 26 dB over the echo learnt: loud, but it could be an echo
    # path that is louder than the one learnt so far.
    gate = learnt(EchoGate(), ratio=0.01, n=frames_learnt)
    gate.far_frame(const(0.1))
    assert gate(0.9, 0.9, const(0.2), const(0.002)) == (0.9 if counts else 0.0)


@pytest.mark.parametrize("frames_learnt", [0, 1, LEARN - 1])
def test_before_learn_s_speech_that_is_not_the_playbacks_counts(frames_learnt):
    # Double talk as the reply starts (issue 44): what is not the playback's waveform, or is
    # too loud to be its echo, is the person, whatever the echo path turns out to be.
    gate = learnt(EchoGate(), ratio=0.01, n=frames_learnt)
    gate.far_frame(const(0.1))
    assert gate(0.9, 0.05, const(1.0), const(0.01)) == 0.9  # 20 dB over all that was played
    voice = frames(PERSON)[20]
    gate.far_frame(frames(PLAYED)[40])
    assert gate(0.9, 0.05, voice, voice * 0.01) == 0.9  # another voice


def test_playback_counts_for_window_s_after_it_stops():
    gate = EchoGate()
    gate.far_frame(const(0.1))
    for _ in range(WINDOW - 1):
        gate.far_frame(np.zeros(VAD_FRAME))
        assert gate(0.9, 0.9, const(0.1), const(0.001)) == 0.0  # the echo's tail may still be heard
    gate.far_frame(np.zeros(VAD_FRAME))
    assert gate(0.9, 0.9, const(0.1), const(0.001)) == 0.9


# -- learning the echo path --------------------------------------------------------------


def test_echo_gain_is_pessimistic_until_learnt():
    assert EchoGate().echo_gain == 1.0


def test_echo_gain_is_the_90th_percentile_of_frames_without_speech():
    gate = EchoGate()
    ratios = [0.01 * k for k in range(1, 21)]
    for r in ratios:
        gate.far_frame(const(0.1))
        gate(0.05, 0.05, const(0.1 * np.sqrt(r)), const(0.0))
    assert gate.echo_gain == pytest.approx(np.percentile(ratios, 90), rel=1e-5)


def test_frames_with_speech_are_not_learnt():
    gate = learnt(EchoGate(), ratio=0.01)
    for _ in range(50):  # the person, loud: passed on both views
        gate.far_frame(const(0.1))
        assert gate(0.9, 0.9, const(1.0), const(1.0)) == 0.9
    assert gate.echo_gain == pytest.approx(0.01)


def test_frames_with_speech_do_not_count_towards_learn_s():
    gate = learnt(EchoGate(), ratio=0.01, n=LEARN - 1)
    for _ in range(50):  # passed on the cancelled view
        gate.far_frame(const(0.1))
        gate(0.9, 0.9, const(1.0), const(1.0))
    gate.far_frame(const(0.1))
    assert gate(0.9, 0.9, const(0.2), const(0.002)) == 0.0  # the raw view: still one frame short


def test_echo_gain_follows_the_echo_path_of_the_last_history_s():
    gate = learnt(EchoGate(), ratio=1.0, n=100)  # speakers, then headphones
    learnt(gate, ratio=0.01, n=100)
    assert gate.echo_gain == pytest.approx(1.0)  # half the history is still the speakers'
    learnt(gate, ratio=0.01, n=HISTORY - 100)
    assert gate.echo_gain == pytest.approx(0.01)


def test_the_first_frames_of_speech_are_not_learnt_though_the_vad_is_not_sure_yet():
    # Headphones: the echo path learnt as next to nothing. The person starts as loud as the reply;
    # the VAD needs a few frames to be sure, and the suppressor takes it all for echo. Learnt as
    # echo, those first frames would make the person's level the echo expected, and gate off the
    # rest of the words (issue 32: a caller 0.5-1 s into the reply went unheard).
    gate = learnt(EchoGate(), ratio=1e-6)
    for p_raw in (0.05, 0.1, 0.2, 0.25):  # the onset: loud, not yet speech to the VAD
        gate.far_frame(const(0.1))
        assert gate(p_raw, 0.02, const(0.1), const(0.0001)) < 0.3
    assert gate.echo_gain == pytest.approx(1e-6, rel=0.05)
    for _ in range(20):  # the words: through on the raw view
        gate.far_frame(const(0.1))
        assert gate(0.9, 0.02, const(0.1), const(0.0001)) == 0.9


def test_before_learn_s_the_persons_share_of_a_frame_that_is_not_the_playbacks_is_all_of_it():
    # Unlearnt, the echo expected is the pessimistic whole of the playback: the person talking over
    # the reply's first words would be heard far under their own level, and taken for the room's.
    gate = EchoGate()
    voice = frames(PERSON)[20]
    gate.far_frame(frames(PLAYED)[40] * 4)  # playback louder than the voice
    assert gate(0.9, 0.05, voice, voice * 0.01) == 0.9
    assert gate.near_energy(voice, voice * 0.01) == pytest.approx(energy(voice))
