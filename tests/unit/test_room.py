"""A room that talks (core/room.py): babble there before the person is not a turn, the person over it is.

Scripted sound: a stand-in VAD calls "voiced" what its caller says is voiced (babble and speech
are, a tap is not), so that what decides is the room's floor, not Silero.
"""

from __future__ import annotations

import numpy as np
from stand_in_engines import silence

from core.audio import ASR_BLOCK, ASR_RATE, VAD_FRAME
from core.commands import Emit, StartResponse, TranscribeFinal
from core.endpointing import EndpointConfig, SpeechStart
from core.events import SpeechEnd
from core.hearing import FRAME_S, Ended, Hearing
from core.near_speech import NearSpeech, NearSpeechConfig, PersonLevel
from core.room import Room, RoomConfig
from core.turns import Conversation


def steady(seconds: float, db: float, seed: int = 1) -> np.ndarray:
    """Babble-like: noise at ``db`` (mean square) whose level wanders by a dB or two."""
    n = round(seconds * ASR_RATE)
    x = np.random.default_rng(seed).standard_normal(n)
    x *= 10 ** ((1.5 * np.sin(2 * np.pi * 0.7 * np.arange(n) / ASR_RATE)) / 20)
    return (x * 10 ** (db / 20) / np.sqrt(np.mean(x**2))).astype(np.float32)


def talk(seconds: float, db: float, seed: int = 0) -> np.ndarray:
    """Speech-like: noise under a 4 Hz syllable envelope, 25 dB down between syllables, and a
    0.25 s pause for breath every 2 s (LJ Speech's 8-10 s sentences pause so)."""
    n = round(seconds * ASR_RATE)
    t = np.arange(n) / ASR_RATE
    x = np.random.default_rng(seed).standard_normal(n)
    envelope = np.maximum(np.sin(2 * np.pi * 4 * t), 10 ** (-25 / 20))
    envelope[(t % 2.0) > 1.75] = 10 ** (-40 / 20)
    x *= envelope
    return (x * 10 ** (db / 20) / np.sqrt(np.mean(x**2))).astype(np.float32)


def frames_of(audio: np.ndarray, voiced: bool) -> list[tuple[float, float]]:
    """(VAD probability, energy) per frame: the stand-in VAD says ``voiced`` wherever the sound is
    over -45 dB (between the syllables of :func:`talk`, it is not)."""
    out = []
    for i in range(0, len(audio) - VAD_FRAME + 1, VAD_FRAME):
        energy = float(np.mean(audio[i : i + VAD_FRAME].astype(np.float64) ** 2))
        out.append((0.95 if voiced and energy > 10 ** (-45 / 10) else 0.02, energy))
    return out


ON = RoomConfig(above_room_db=7.0)  # the rule as measured (off by default for now)


def room() -> Room:
    return Room(ON, FRAME_S, 0.5)


def test_babble_from_the_start_is_found_once_the_window_and_the_learning_are_through():
    r = room()
    found_at = None
    for i, (prob, energy) in enumerate(frames_of(steady(8.0, -35.0), voiced=True)):
        r(prob, energy)
        if r.found:
            found_at = i * FRAME_S
    cfg = ON
    assert found_at is not None and abs(found_at - (cfg.window_s + cfg.learn_s)) < 0.1
    assert r.db is not None and -40.0 < r.db < -35.0  # its floor: under its mean
    assert r.under(-34.0) and not r.under(-25.0)  # the person 10 dB over the babble stands out


def test_a_person_alone_and_a_tap_are_not_a_talking_room():
    for frames in (
        frames_of(np.concatenate([silence(0.5), talk(9.0, -25.0), silence(0.5)]), voiced=True),
        frames_of(steady(8.0, -40.0), voiced=False),  # a tap: loud, steady, never voiced
    ):
        r = room()
        for prob, energy in frames:
            r(prob, energy)
            assert r.db is None


def test_a_room_that_stops_is_forgotten():
    r = room()
    for prob, energy in frames_of(steady(6.0, -35.0), voiced=True) + frames_of(silence(3.0), voiced=False):
        r(prob, energy)
    assert r.db is None


def test_off_looks_for_nothing():
    r = Room(RoomConfig(above_room_db=None), FRAME_S, 0.5)
    for prob, energy in frames_of(steady(8.0, -35.0), voiced=True):
        r(prob, energy)
    assert r.db is None and not r.under(-35.0)


class ScriptedVad:
    """Voiced wherever the next frame's script says so: babble and speech are, silence is not."""

    def __init__(self, voiced: list[bool]) -> None:
        self.voiced = iter(voiced)

    def __call__(self, frame: np.ndarray) -> float:
        return 0.95 if next(self.voiced) else 0.02


def room_then_person(room_sound: np.ndarray, at_s: float, person: np.ndarray) -> tuple[list, list]:
    """The hearing's speech starts and ends for ``room_sound`` with ``person`` said over it from ``at_s``."""
    audio = room_sound.copy()
    start = round(at_s * ASR_RATE)
    audio[start : start + len(person)] += person
    heard = hear(audio, [p > 0.5 for p, _ in frames_of(audio, voiced=True)])
    return [h for h in heard if isinstance(h, SpeechStart)], [h for h in heard if isinstance(h, Ended)]


def hear(audio: np.ndarray, voiced: list[bool]) -> list:
    endpoint = EndpointConfig()
    near = NearSpeech(PersonLevel(), NearSpeechConfig(), FRAME_S, endpoint.threshold, room())
    hearing = Hearing(endpoint, ScriptedVad(voiced), near=near)
    out = []
    for i in range(0, len(audio), ASR_BLOCK):
        block = audio[i : i + ASR_BLOCK]
        out += hearing.push(block, block, np.zeros(len(block), dtype=np.float32), playing=False)
    return out


def test_the_utterance_babble_opened_ends_as_the_rooms_and_the_person_over_it_is_a_turn():
    starts, ends = room_then_person(steady(14.0, -35.0), 8.0, talk(2.0, -25.0, seed=3))
    # The babble's utterance, opened at once, ends as the room's when the room is found (~5 s).
    assert starts[0].onset < 0.5 and ends[0].room and 4.5 < ends[0].t < 5.5
    # The person's words over it open one turn, which ends when they stop; it is not the room's.
    (own,) = [s for s in starts if 7.5 < s.onset < 8.5]
    after = [e for e in ends if e.t > own.onset]
    assert after and not after[0].room and after[0].end < 10.5


def test_a_person_reading_on_without_pauses_after_a_quiet_start_is_never_the_room():
    # es_fleurs_test_es004: 8 s read without a pause fills the window with the reader's own voice,
    # its quietest tenth voiced and 6.4 dB under their level. The same steady sound that is a room
    # when it was there from the start is the person when the floor was quiet for 2 s before it.
    reader = steady(9.0, -25.0, seed=5)
    audio = np.concatenate([silence(3.0), reader, silence(2.0)])
    voiced = [p > 0.5 for p, _ in frames_of(audio, voiced=True)]
    heard = hear(audio, voiced)
    ends = [h for h in heard if isinstance(h, Ended)]
    assert ends and not any(e.room for e in ends)
    from_the_start = hear(reader, voiced[round(3.0 / FRAME_S) :])
    assert any(h.room for h in from_the_start if isinstance(h, Ended))
    # Quiet for only 1 s first (a song's instrumental start before its singer): no proof of a quiet room.
    after_a_short_quiet = np.concatenate([silence(1.0), reader])
    heard = hear(after_a_short_quiet, [p > 0.5 for p, _ in frames_of(after_a_short_quiet, voiced=True)])
    assert any(h.room for h in heard if isinstance(h, Ended))


def test_the_rooms_utterance_is_not_transcribed_stored_or_answered():
    conv = Conversation()
    conv.speech_started(0.1, 0.3)
    cmds = conv.heard(Ended(4.9, 4.93, -33.0, None, room=True), 4.93)
    (end,) = [c.event for c in cmds if isinstance(c, Emit) and isinstance(c.event, SpeechEnd)]
    assert end.room and end.to_json()["room"] is True
    assert not [c for c in cmds if isinstance(c, TranscribeFinal | StartResponse)]
    assert conv.history.turns == [] and not conv.user_speaking


def test_a_voice_that_comes_in_louder_over_what_opened_the_utterance_starts_its_own():
    """A TV talking on (no talking room: it pauses), then the person 10 dB over it (7 dB over
    its voiced frames): the TV's utterance ends as the room's when they come in, theirs ends
    when they stop, and the TV talking on is no turn."""
    starts, ends = room_then_person(talk(12.0, -35.0, seed=5), 4.0, talk(2.5, -25.0, seed=6))
    assert starts[0].onset < 0.5 and ends[0].room and 4.0 < ends[0].t < 4.6
    (own,) = [s for s in starts if 4.0 < s.onset < 5.0]
    (theirs,) = [e for e in ends if e.t > own.onset][:1]
    assert not theirs.room and 6.0 < theirs.end < 7.0
    assert [s for s in starts if s.onset > theirs.end] == []


def test_a_person_alone_is_never_overtaken_by_themselves():
    audio = np.concatenate([silence(0.5), talk(4.0, -30.0), talk(4.0, -26.0, seed=2), silence(1.0)])
    heard = hear(audio, [p > 0.5 for p, _ in frames_of(audio, voiced=True)])
    assert not [h for h in heard if isinstance(h, Ended) and h.room]


def behind_a_suppressor(hearing: Hearing, cleaned: np.ndarray, before: np.ndarray) -> list:
    """What ``hearing`` reports for a suppressor's output ``cleaned`` of the sound ``before`` it."""
    heard = []
    for i in range(0, len(cleaned), ASR_BLOCK):
        block = cleaned[i : i + ASR_BLOCK]
        far = np.zeros(len(block), dtype=np.float32)
        heard += hearing.push(block, block, far, playing=False, unsuppressed=before[i : i + ASR_BLOCK])
    return heard


def test_behind_a_noise_suppressor_levels_are_compared_in_the_sound_before_it():
    """RNNoise lets a voice in over babble quietly and then loud: in its output the person's own
    words came in 10 dB over their first ones, as if over a TV, and their question ended as the
    room's. Compared before the suppressor, where the room is looked for, they are one turn."""
    babble = steady(20.0, -35.0)
    person = talk(4.0, -25.0, seed=6)
    start = round(15.0 * ASR_RATE)
    before = babble.copy()
    before[start : start + len(person)] += person
    cleaned = np.full(len(babble), 1e-4, dtype=np.float32)  # RNNoise took the babble out
    let_in = person.copy()
    let_in[: round(2.0 * ASR_RATE)] *= 10 ** (-20 / 20)  # and let the voice in quietly at first
    cleaned[start : start + len(person)] += let_in
    endpoint = EndpointConfig()
    near = NearSpeech(PersonLevel(), NearSpeechConfig(), FRAME_S, endpoint.threshold, room())
    hearing = Hearing(
        endpoint,
        ScriptedVad([p > 0.5 for p, _ in frames_of(cleaned, voiced=True)]),
        near=near,
        vad_unsuppressed=ScriptedVad([p > 0.5 for p, _ in frames_of(before, voiced=True)]),
    )
    heard = behind_a_suppressor(hearing, cleaned, before)
    starts = [h for h in heard if isinstance(h, SpeechStart) and h.onset > 14.5]
    ends = [h for h in heard if isinstance(h, Ended) and h.t > 14.5]
    assert len(starts) == 1 and len(ends) == 1
    assert not ends[0].room and 18.6 < ends[0].end < 19.0  # they stop at 18.75 s


def test_babble_the_suppressor_took_out_is_not_let_back_in_at_the_persons_level():
    """Behind RNNoise, sound before it that is as loud as the person is let in (it held their
    voice back over a song, core/near_speech.py ``lets_in``); babble only 5 dB under the person
    reaches their level in its louder tenths of a second, and must still stand out of the room."""
    babble = steady(20.0, -30.0)
    tenths = np.random.default_rng(4).uniform(-6.0, 6.0, size=len(babble) // 1600 + 1)
    babble *= (10 ** (np.repeat(tenths, 1600)[: len(babble)] / 20)).astype(np.float32)  # its louder tenths of a second
    endpoint = EndpointConfig()
    person = PersonLevel()
    person.learn(-25.0)
    near = NearSpeech(person, NearSpeechConfig(), FRAME_S, endpoint.threshold, room())
    cleaned = np.full(len(babble), 1e-4, dtype=np.float32)
    hearing = Hearing(
        endpoint,
        ScriptedVad([False] * (len(babble) // VAD_FRAME + 1)),
        near=near,
        vad_unsuppressed=ScriptedVad([p > 0.5 for p, _ in frames_of(babble, voiced=True)]),
    )
    heard = behind_a_suppressor(hearing, cleaned, babble)
    assert near.room is not None and near.room.talking
    assert not [h for h in heard if isinstance(h, SpeechStart) and h.onset > 5.5]
