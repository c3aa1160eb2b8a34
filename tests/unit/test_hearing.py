"""The hearing front end on recorded frames: speech edges, loudness, the echo gate's wiring, the partial budget.

The VAD is a stand-in (an energy threshold, see ``stand_in_engines.py``):
what is tested is what :class:`~voice.core.hearing.Hearing` does with the
probabilities, not Silero.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from stand_in_engines import StandInVAD, silence

from transport.files import load_audio
from voice.core.audio import ASR_BLOCK, ASR_RATE
from voice.core.echo_gate import EchoGate
from voice.core.endpointing import EndpointConfig, SpeechOnset, SpeechStart
from voice.core.hearing import FRAME_S, Ended, Hearing, PartialDue, SpeechContinues, SpeechPaused
from voice.core.partials import PartialBudget, PartialConfig

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QUESTION = FIXTURES / "cmu_arctic_us_aew_a0003.wav"


def feed(hearing: Hearing, audio: np.ndarray, playing: bool = False) -> list:
    out = []
    for i in range(0, len(audio), ASR_BLOCK):
        block = audio[i : i + ASR_BLOCK]
        out += hearing.push(block, block, np.zeros(len(block), dtype=np.float32), playing)
    return out


def speech_span(audio: np.ndarray) -> tuple[float, float]:
    """Where the stand-in VAD hears speech in ``audio``: first and last voiced frame."""
    vad = StandInVAD()
    frames = [vad(audio[i : i + 512]) > 0.5 for i in range(0, len(audio) - 511, 512)]
    voiced = np.flatnonzero(frames)
    return voiced[0] * FRAME_S, (voiced[-1] + 1) * FRAME_S


def test_a_recorded_question_is_one_utterance_with_its_edges_and_loudness():
    audio = np.concatenate([silence(0.5), load_audio(QUESTION), silence(1.0)])
    hearing = Hearing(EndpointConfig(), StandInVAD())
    heard = feed(hearing, audio)
    first, last = speech_span(audio)
    (onset,) = [h for h in heard if isinstance(h, SpeechOnset)]
    (start,) = [h for h in heard if isinstance(h, SpeechStart)]
    (end,) = [h for h in heard if isinstance(h, Ended)]
    assert onset.onset == start.onset == pytest.approx(first, abs=FRAME_S)
    assert end.end <= last + FRAME_S and end.t == pytest.approx(end.end + EndpointConfig().hangover_s, abs=FRAME_S)
    # Loudness of the voiced frames: near the recording's own level over its voiced part.
    voiced = audio[round(first * ASR_RATE) : round(last * ASR_RATE)]
    assert end.level_db == pytest.approx(10 * np.log10(np.mean(voiced**2)), abs=6)
    assert end.background_db is None  # nothing was playing: no background measured
    # Inside the utterance every frame says how far the person has spoken, or how long the silence is.
    inside = heard[heard.index(start) + 1 : heard.index(end)]
    assert inside and all(isinstance(h, SpeechContinues | SpeechPaused) for h in inside)
    assert all(h.silence_s < EndpointConfig().hangover_s for h in inside if isinstance(h, SpeechPaused))


def test_the_background_is_measured_only_while_the_assistant_plays():
    noise = (0.001 * np.random.default_rng(0).standard_normal(ASR_RATE * 2)).astype(np.float32)
    quiet = Hearing(EndpointConfig(), StandInVAD())
    feed(quiet, noise, playing=False)
    assert quiet.background.db is None
    playing = Hearing(EndpointConfig(), StandInVAD())
    feed(playing, noise, playing=True)
    assert playing.background.db == pytest.approx(-60, abs=1)


def test_the_echo_gate_needs_the_raw_view_and_decides_between_the_two():
    with pytest.raises(ValueError):
        Hearing(EndpointConfig(), StandInVAD(), gate=EchoGate())
    speech = load_audio(QUESTION)
    # The assistant plays loudly; the cancelled view is near silence (its echo removed), the raw
    # view has the echo only: with the gate, that is not the person.
    far = speech * 0.5
    echo = far * 0.3
    hearing = Hearing(EndpointConfig(), StandInVAD(), vad_raw=StandInVAD(), gate=EchoGate())
    heard = []
    for i in range(0, len(speech), ASR_BLOCK):
        cleaned = echo[i : i + ASR_BLOCK] * 0.01
        heard += hearing.push(cleaned, echo[i : i + ASR_BLOCK], far[i : i + ASR_BLOCK], playing=True)
    assert not [h for h in heard if isinstance(h, SpeechStart)]


def test_partials_follow_their_schedule_and_share_one_budget():
    config = PartialConfig(interval_s=1.0, min_audio_s=0.6)
    budget = PartialBudget(max_in_flight=1)
    a = Hearing(EndpointConfig(), StandInVAD(), partials=config, budget=budget)
    b = Hearing(EndpointConfig(), StandInVAD(), partials=config, budget=budget)
    audio = np.concatenate([silence(0.3), load_audio(QUESTION)])
    due_a, due_b = [], []
    for i in range(0, len(audio), ASR_BLOCK):
        block = audio[i : i + ASR_BLOCK]
        zeros = np.zeros(len(block), dtype=np.float32)
        due_a += [h for h in a.push(block, block, zeros, False) if isinstance(h, PartialDue)]
        due_b += [h for h in b.push(block, block, zeros, False) if isinstance(h, PartialDue)]
    # The first session's pass is due after min_audio_s of speech and holds the budget (never
    # finished here): the second session's due pass is skipped, not queued.
    assert len(due_a) == 1 and due_b == [] and budget.in_flight == 1
    (due,) = due_a
    assert due.onset == a.utterance_onset
    assert a.partial_finished(due.policy, "it is") == ("", "it is") and budget.in_flight == 0


def test_a_partial_of_an_utterance_that_ended_is_not_reported():
    budget = PartialBudget()
    hearing = Hearing(EndpointConfig(), StandInVAD(), partials=PartialConfig(min_audio_s=0.3), budget=budget)
    audio = np.concatenate([silence(0.3), load_audio(QUESTION)])
    (due,) = [h for h in feed(hearing, audio) if isinstance(h, PartialDue)][:1]
    feed(hearing, silence(1.0))  # the endpoint: a new utterance would have a new schedule
    assert hearing.partial_finished(due.policy, "too late") is None and budget.in_flight == 0


def test_a_failed_partial_only_releases_its_budget():
    budget = PartialBudget()
    hearing = Hearing(EndpointConfig(), StandInVAD(), partials=PartialConfig(min_audio_s=0.3), budget=budget)
    (due,) = [
        h for h in feed(hearing, np.concatenate([silence(0.3), load_audio(QUESTION)])) if isinstance(h, PartialDue)
    ][:1]
    assert hearing.partial_finished(due.policy, None) is None
    assert budget.in_flight == 0 and not due.policy.running
