"""Speech far under the person's level (core/near_speech.py): a TV in the room is not a turn, the person over it is.

Scripted levels: the VAD is a stand-in that calls everything above -60 dB speech, so that what
decides is the level policy, not Silero.
"""

from __future__ import annotations

import numpy as np
import pytest
from stand_in_engines import silence
from test_room import behind_a_suppressor as fed_behind_a_suppressor

from core.audio import ASR_BLOCK, ASR_RATE
from core.endpointing import EndpointConfig, SpeechStart
from core.hearing import FRAME_S, Ended, Hearing
from core.near_speech import NearSpeech, NearSpeechConfig, PersonLevel
from core.room import Room, RoomConfig


def vad(frame: np.ndarray) -> float:
    return 0.95 if 10 * np.log10(float(np.mean(frame**2)) + 1e-12) > -60.0 else 0.02


def talk(seconds: float, db: float, seed: int = 0) -> np.ndarray:
    """Speech-like sound at ``db`` (mean square): noise under a 4 Hz syllable envelope, down 12 dB between."""
    n = round(seconds * ASR_RATE)
    rng = np.random.default_rng(seed)
    envelope = 10 ** ((-6 + 6 * np.sin(2 * np.pi * 4 * np.arange(n) / ASR_RATE)) / 20)
    x = rng.standard_normal(n) * envelope
    return (x * 10 ** (db / 20) / np.sqrt(np.mean(x**2))).astype(np.float32)


def feed(hearing: Hearing, audio: np.ndarray) -> list:
    out = []
    for i in range(0, len(audio), ASR_BLOCK):
        block = audio[i : i + ASR_BLOCK]
        out += hearing.push(block, block, np.zeros(len(block), dtype=np.float32), playing=False)
    return out


def hearing_with(person_db: float | None, config: NearSpeechConfig | None = None) -> Hearing:
    person = PersonLevel()
    if person_db is not None:
        person.learn(person_db)
    endpoint = EndpointConfig()
    near = NearSpeech(person, config or NearSpeechConfig(), FRAME_S, endpoint.threshold)
    return Hearing(endpoint, vad, near=near)


def test_the_level_is_learnt_from_the_turns_later_ones_weighing_most():
    person = PersonLevel()
    assert person.db is None
    person.learn(-20.0)
    person.learn(-30.0)
    assert person.db == -25.0


def test_before_the_first_turn_a_quiet_voice_alone_counts():
    heard = feed(hearing_with(None), np.concatenate([silence(0.3), talk(1.5, -45.0), silence(1.0)]))
    assert [h for h in heard if isinstance(h, SpeechStart)]


def test_before_the_first_turn_the_voice_heard_stands_in_for_the_person():
    person = np.concatenate([silence(0.3), talk(1.5, -20.0), silence(1.0)])
    hearing = hearing_with(None)
    heard = feed(hearing, np.concatenate([person, talk(3.0, -35.0, seed=2), silence(1.0)]))
    assert len([h for h in heard if isinstance(h, SpeechStart)]) == 1  # the person, not the TV after them


def test_what_was_heard_is_forgotten_so_a_loud_sound_leaves_no_one_deaf():
    hearing = hearing_with(None)
    feed(hearing, np.concatenate([silence(0.3), talk(0.5, -5.0), silence(20.0)]))  # a shout, then quiet
    heard = feed(hearing, np.concatenate([talk(1.5, -25.0), silence(1.0)]))
    assert [h for h in heard if isinstance(h, SpeechStart)]


@pytest.mark.parametrize("below_db", [15.0, 20.0])
def test_a_voice_far_under_the_person_starts_no_turn(below_db):
    hearing = hearing_with(-20.0)
    heard = feed(hearing, np.concatenate([silence(0.3), talk(3.0, -20.0 - below_db), silence(1.0)]))
    assert not [h for h in heard if isinstance(h, SpeechStart)]
    assert hearing.near is not None and hearing.near.far_frames > 60


@pytest.mark.parametrize("below_db", [0.0, 6.0])
def test_the_person_s_own_quieter_speech_still_counts(below_db):
    heard = feed(hearing_with(-20.0), np.concatenate([silence(0.3), talk(1.5, -20.0 - below_db), silence(1.0)]))
    assert len([h for h in heard if isinstance(h, SpeechStart)]) == 1
    assert len([h for h in heard if isinstance(h, Ended)]) == 1


def test_the_person_going_on_quieter_after_their_own_pause_is_heard():
    """ "No, | for two people.": the words after the comma 9 dB under the person's level."""
    going_on = [talk(0.4, -29.0, seed=3), silence(0.05), talk(0.35, -29.0, seed=5)]  # a stop consonant's dip in it
    said = np.concatenate([silence(0.3), talk(0.4, -20.0), silence(0.25), *going_on, silence(1.0)])
    heard = feed(hearing_with(-20.0), said)
    assert len([h for h in heard if isinstance(h, SpeechStart)]) >= 1
    (ended,) = [h for h in heard if isinstance(h, Ended)]
    assert ended.end == pytest.approx(0.3 + 0.4 + 0.25 + 0.8, abs=0.1)  # the words after the pause are in it


@pytest.mark.parametrize(
    ("pause_s", "between"),
    # Too long after the person; another voice in the gap, long enough to fill the 0.5 s window (a
    # shorter one under the person's own last words is not told from their sentence trailing off).
    [(1.3, None), (0.6, -40.0)],
)
def test_quieter_speech_is_no_continuation_late_or_after_another_voice(pause_s, between):
    gap = silence(pause_s) if between is None else talk(pause_s, between, seed=4)
    said = np.concatenate([silence(0.3), talk(0.4, -20.0), gap, talk(0.8, -29.0, seed=3), silence(1.0)])
    (ended,) = [h for h in feed(hearing_with(-20.0), said) if isinstance(h, Ended)]
    assert ended.end < 0.3 + 0.4 + pause_s + 0.2  # not the quieter words after the gap (to 0.8 s later)


def test_the_person_trailing_off_with_no_pause_is_heard_over_the_talker_they_came_in_over():
    """LJ001-0005 over a TV 10 dB under them: "... of the fifteenth century may justly ..." fell
    5-8 dB under their level for 1.4 s with no pause, within 5 dB of the TV's learnt level, and
    the turn was cut in the middle of the sentence."""
    hearing = hearing_with(-20.0)
    assert hearing.near is not None and hearing.near.room is None
    hearing.near.room = Room(RoomConfig(), FRAME_S, EndpointConfig().threshold)
    hearing.near.room.overtaken(-30.0, -20.0)  # the person came in over a talker 10 dB under them
    trailing = talk(0.9, -27.5, seed=3)  # 7.5 dB under the person, 2.5 dB over the talker
    said = np.concatenate([silence(0.3), talk(1.0, -20.0), trailing, talk(0.6, -20.0, seed=5), silence(1.0)])
    (ended,) = [h for h in feed(hearing, said) if isinstance(h, Ended)]
    assert ended.end == pytest.approx(0.3 + 1.0 + 0.9 + 0.6, abs=0.1)


@pytest.mark.parametrize(
    ("talker_db", "level_db"),
    [(-30.0, -29.0), (-28.0, -27.0)],  # 10 dB under the person; 8 dB, its windows at the person's own margin
)
def test_the_talker_going_on_after_the_person_is_theirs_only_within_continuation_s(talker_db, level_db):
    hearing = hearing_with(-20.0)
    assert hearing.near is not None
    hearing.near.room = Room(RoomConfig(), FRAME_S, EndpointConfig().threshold)
    hearing.near.room.overtaken(talker_db, -20.0)
    talker = talk(3.0, level_db, seed=3)  # 1 dB over its level
    said = np.concatenate([silence(0.3), talk(1.0, -20.0), talker, silence(1.0)])
    (ended,) = [h for h in feed(hearing, said) if isinstance(h, Ended)]
    config = NearSpeechConfig()  # their last window holding their own voice, then continuation_s at most
    assert ended.end <= 0.3 + 1.0 + config.window_s + config.continuation_s + 0.1


def test_the_person_over_a_tv_is_heard_and_their_turn_ends_while_the_tv_goes_on():
    tv = talk(6.0, -35.0, seed=1)
    person = np.concatenate([silence(1.0), talk(1.5, -20.0), silence(3.5)])
    heard = feed(hearing_with(-20.0), tv + person)
    (start,) = [h for h in heard if isinstance(h, SpeechStart)]
    (ended,) = [h for h in heard if isinstance(h, Ended)]
    assert start.onset == pytest.approx(1.0, abs=0.1)
    # Not held open by the TV's speech: the TV's frames count as the person's only while the 0.5 s
    # window still holds enough of the person's own (here 0.35 s).
    assert 2.5 <= ended.end < 2.5 + NearSpeechConfig().window_s
    assert ended.t < ended.end + EndpointConfig().hangover_s + 0.1


def test_off_all_counts():
    heard = feed(
        hearing_with(-20.0, NearSpeechConfig(below_person_db=None)),
        np.concatenate([silence(0.3), talk(1.5, -40.0), silence(1.0)]),
    )
    assert [h for h in heard if isinstance(h, SpeechStart)]


def behind_a_suppressor(person_db: float | None, before: np.ndarray, cleaned: np.ndarray) -> list:
    """What a hearing behind a noise suppressor reports: ``cleaned`` its output, ``before`` its input."""
    person = PersonLevel()
    if person_db is not None:
        person.learn(person_db)
    endpoint = EndpointConfig()
    near = NearSpeech(person, NearSpeechConfig(), FRAME_S, endpoint.threshold)
    return fed_behind_a_suppressor(Hearing(endpoint, vad, near=near, vad_unsuppressed=vad), cleaned, before)


def held_back(audio: np.ndarray, seconds: float) -> np.ndarray:
    """``audio`` as RNNoise let a voice in over a song: its first ``seconds`` 50 dB down."""
    out = audio.copy()
    out[: round(seconds * ASR_RATE)] *= 10 ** (-50 / 20)
    return out


def test_a_voice_the_suppressor_held_back_is_heard_from_its_first_word():
    """RNNoise let "Not at this particular" out of a song 30-50 dB down for 0.7 s (music 10 dB
    under the person): the utterance opened 1.7 s late and Whisper never heard those words. The
    sound before it, at the person's own level, opens the utterance where they began."""
    before = np.concatenate([silence(1.0), talk(2.0, -20.0), silence(1.5)])
    cleaned = np.concatenate([silence(1.0), held_back(talk(2.0, -20.0), 0.9), silence(1.5)])
    (start,) = [h for h in behind_a_suppressor(-20.0, before, cleaned) if isinstance(h, SpeechStart)]
    assert start.onset == pytest.approx(1.0, abs=0.1)


def test_a_tv_under_the_person_stays_out_though_the_suppressor_let_none_of_it_through():
    tv = talk(4.0, -32.0, seed=3)  # 12 dB under the person
    heard = behind_a_suppressor(-20.0, tv, np.zeros(len(tv), dtype=np.float32))
    assert not [h for h in heard if isinstance(h, SpeechStart)]


def test_before_the_first_turn_and_with_no_talking_room_the_suppressor_decides():
    """Nothing yet says how loud the person is: a voice RNNoise held back (a TV across the room,
    which it takes partly for noise) is not let in by its level."""
    voice = np.concatenate([silence(1.0), talk(2.0, -20.0), silence(1.5)])
    heard = behind_a_suppressor(None, voice, np.zeros(len(voice), dtype=np.float32))
    assert not [h for h in heard if isinstance(h, SpeechStart)]
