"""The hearing front end on recorded frames: speech edges, loudness, the echo gate's wiring, the partial
budget, the end-of-turn model's checks (answered with scripted probabilities).

The VAD is a stand-in (an energy threshold, see ``stand_in_engines.py``):
what is tested is what :class:`~core.hearing.Hearing` does with the
probabilities, not Silero.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from stand_in_engines import StandInVAD, silence

from core.audio import ASR_BLOCK, ASR_RATE
from core.budget import Budget
from core.echo_gate import EchoGate
from core.end_of_turn import CheckEndOfTurn, EndOfTurnConfig
from core.endpointing import EndpointConfig, SpeechOnset, SpeechStart
from core.hearing import FRAME_S, Ended, Hearing, PartialDue, SpeechContinues, SpeechPaused
from core.partials import PartialConfig
from transport.files import load_audio

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
    budget = Budget(max_in_flight=1)
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
    budget = Budget()
    hearing = Hearing(EndpointConfig(), StandInVAD(), partials=PartialConfig(min_audio_s=0.3), budget=budget)
    audio = np.concatenate([silence(0.3), load_audio(QUESTION)])
    (due,) = [h for h in feed(hearing, audio) if isinstance(h, PartialDue)][:1]
    feed(hearing, silence(1.0))  # the endpoint: a new utterance would have a new schedule
    assert hearing.partial_finished(due.policy, "too late") is None and budget.in_flight == 0


def test_a_failed_partial_only_releases_its_budget():
    budget = Budget()
    hearing = Hearing(EndpointConfig(), StandInVAD(), partials=PartialConfig(min_audio_s=0.3), budget=budget)
    (due,) = [
        h for h in feed(hearing, np.concatenate([silence(0.3), load_audio(QUESTION)])) if isinstance(h, PartialDue)
    ][:1]
    assert hearing.partial_finished(due.policy, None) is None
    assert budget.in_flight == 0 and not due.policy.running


def closing_passes(config: PartialConfig) -> list[tuple[PartialDue, float]]:
    """The partial passes due over a recorded question and the silence after it (each finished
    at once), with where the speech before each closing one ended."""
    hearing = Hearing(EndpointConfig(), StandInVAD(), partials=config, budget=Budget())
    audio = np.concatenate([silence(0.3), load_audio(QUESTION), silence(1.0)])
    out, paused_at = [], None
    for i in range(0, len(audio), ASR_BLOCK):
        block = audio[i : i + ASR_BLOCK]
        for h in hearing.push(block, block, np.zeros(len(block), dtype=np.float32), False):
            if isinstance(h, SpeechPaused):
                paused_at = h.end
            if isinstance(h, PartialDue):
                hearing.partial_finished(h.policy, "it is")
                out.append((h, paused_at if h.end is not None else None))
    return out


def test_each_pause_gets_one_closing_partial_on_all_the_speech_before_it():
    passes = closing_passes(PartialConfig())
    closing = [(due, at) for due, at in passes if due.end is not None]
    assert closing and all(due.end == at for due, at in closing)
    ends = [due.end for due, _ in closing]
    assert len(ends) == len(set(ends))  # once a pause
    # The last one closes the question: its speech end is the utterance's.
    _, last = speech_span(np.concatenate([silence(0.3), load_audio(QUESTION)]))
    assert ends[-1] == pytest.approx(last, abs=FRAME_S)
    assert all(due.end is None for due in (p for p, _ in closing_passes(PartialConfig(closing_after_s=None))))


def test_the_pauses_the_person_spoke_on_after_are_kept_for_the_utterance():
    hearing = Hearing(EndpointConfig(), StandInVAD())
    heard = feed(hearing, np.concatenate([silence(0.3), load_audio(QUESTION)]))
    spans, last = [], None
    for h in heard:
        if isinstance(h, SpeechPaused):
            last = (h.end, h.end + h.silence_s)
        elif isinstance(h, SpeechContinues) and last is not None:
            spans.append(last)
            last = None
    assert spans and hearing.pauses == spans
    feed(hearing, np.concatenate([silence(1.0), load_audio(QUESTION)[:8000]]))  # the next utterance
    assert all(start > spans[-1][1] for start, _ in hearing.pauses)


# -- the end of the turn: an end-of-turn model's answers, scripted ------------------

EOT = EndOfTurnConfig(first_check_s=0.2, recheck_s=0.3, max_wait_s=1.5)


def feed_answering(hearing: Hearing, audio: np.ndarray, answers: list[float | None]) -> tuple[list, list]:
    """Feed ``audio``; each end-of-turn check is answered at once, in order, with ``answers``
    (None: the model failed), at the end of the frame that asked for it. Returns what was
    heard (the endpoint a check returns included, in its place) and each (check, TurnChecked)."""
    heard, checked = [], []
    answers = list(answers)
    for i in range(0, len(audio), ASR_BLOCK):
        block = audio[i : i + ASR_BLOCK]
        for h in hearing.push(block, block, np.zeros(len(block), dtype=np.float32), False):
            heard.append(h)
            if isinstance(h, CheckEndOfTurn):
                result = hearing.turn_checked(h, answers.pop(0), hearing.heard_s)
                checked.append((h, result))
                if result.ended is not None:
                    heard.append(result.ended)
    return heard, checked


def question(after_s: float = 2.5) -> np.ndarray:
    return np.concatenate([silence(0.5), load_audio(QUESTION), silence(after_s)])


def test_without_an_end_of_turn_model_nothing_is_checked_and_the_hangover_ends_the_turn():
    hearing = Hearing(EndpointConfig(), StandInVAD())
    heard = feed(hearing, question())
    assert not [h for h in heard if isinstance(h, CheckEndOfTurn)]
    (end,) = [h for h in heard if isinstance(h, Ended)]
    assert end.t - end.end == pytest.approx(0.5, abs=FRAME_S)
    with pytest.raises(ValueError):
        hearing.turn_checked(CheckEndOfTurn(1, 0.5, 1.0, 1.2), 0.9, 1.3)


def test_a_finished_answer_is_the_endpoint_at_the_first_check():
    audio = question()
    _, last = speech_span(audio)
    hearing = Hearing(EndpointConfig(), StandInVAD(), end_of_turn=EOT)
    heard, checked = feed_answering(hearing, audio, [0.9])
    (start,) = [h for h in heard if isinstance(h, SpeechStart)]
    ((check, result),) = checked
    # The check scores the utterance from its onset to the end of the frame that asked for it.
    assert check.onset == start.onset and check.end == pytest.approx(last, abs=FRAME_S)
    assert check.until - check.end == pytest.approx(EOT.first_check_s, abs=FRAME_S)
    assert result.decision == "end" and not result.trails_off
    (end,) = [h for h in heard if isinstance(h, Ended)]
    assert end is result.ended and end.end == check.end and end.t == pytest.approx(check.until)
    # With the same loudness figures as the hangover's endpoint on the same audio.
    (by_silence,) = [h for h in feed(Hearing(EndpointConfig(), StandInVAD()), audio) if isinstance(h, Ended)]
    assert (end.end, end.level_db, end.background_db) == (by_silence.end, by_silence.level_db, None)
    # The utterance is over: the rest of the silence reports nothing, and nothing more is checked.
    assert heard[-1] is end and not hearing.endpointer.in_speech


def test_the_next_words_after_an_endpoint_start_a_new_utterance():
    hearing = Hearing(EndpointConfig(), StandInVAD(), end_of_turn=EOT)
    audio = np.concatenate([question(after_s=0.5), load_audio(QUESTION), silence(0.5)])
    heard, checked = feed_answering(hearing, audio, [0.9, 0.9])
    starts = [h for h in heard if isinstance(h, SpeechStart)]
    ends = [h for h in heard if isinstance(h, Ended)]
    assert len(starts) == len(ends) == 2 and [r.decision for _, r in checked] == ["end", "end"]
    assert checked[1][0].onset == starts[1].onset  # the second check scores the second utterance only


def test_not_finished_asks_again_and_silence_ends_the_turn_at_max_wait():
    audio = question()
    hearing = Hearing(EndpointConfig(), StandInVAD(), end_of_turn=EOT)
    heard, checked = feed_answering(hearing, audio, [0.1, 0.2, 0.3, 0.4, 0.45])
    silences = [round(c.until - c.end, 3) for c, _ in checked]
    # At 0.2 s, then every 0.3 s more (whole frames), until max_wait_s.
    assert silences == pytest.approx([0.224, 0.544, 0.864, 1.184], abs=0.001)
    assert all(r.decision == "wait" and r.ended is None for _, r in checked)
    (end,) = [h for h in heard if isinstance(h, Ended)]
    assert end.t - end.end == pytest.approx(EOT.max_wait_s, abs=FRAME_S)
    assert hearing.endpointer.config.hangover_s == EOT.max_wait_s  # the hangover is the fallback


def test_speech_resuming_makes_the_check_in_flight_stale():
    """A 0.6 s pause inside a sentence: its check is answered only once the person has
    gone on (an answer that finished, had it come in time): it changes nothing."""
    first, rest = load_audio(QUESTION)[:ASR_RATE], load_audio(QUESTION)[ASR_RATE:]
    audio = np.concatenate([silence(0.5), first, silence(0.6), rest, silence(2.0)])
    hearing = Hearing(EndpointConfig(), StandInVAD(), end_of_turn=EOT)
    held: list[CheckEndOfTurn] = []
    heard, results = [], []
    for i in range(0, len(audio), ASR_BLOCK):
        block = audio[i : i + ASR_BLOCK]
        for h in hearing.push(block, block, np.zeros(len(block), dtype=np.float32), False):
            heard.append(h)
            if isinstance(h, CheckEndOfTurn):
                held.append(h)
            elif isinstance(h, SpeechContinues) and held and not results:  # the person went on: now it answers
                results.append(hearing.turn_checked(held[0], 0.99, hearing.heard_s))
    (late,) = results
    assert late.decision == "stale" and late.ended is None
    # The pause's check, then the sentence's end: one utterance, still going until it is answered.
    assert len(held) == 2 and held[1].onset == held[0].onset and held[1].end > held[0].until
    assert len([h for h in heard if isinstance(h, SpeechStart)]) == 1
    assert hearing.turn_checked(held[1], 0.99, hearing.heard_s).decision == "stale"  # max_wait_s ended it


def test_a_failed_check_leaves_the_pause_to_silence():
    audio = question()
    hearing = Hearing(EndpointConfig(), StandInVAD(), end_of_turn=EOT)
    heard, checked = feed_answering(hearing, audio, [None])
    ((_, result),) = checked
    assert result.decision == "failed" and result.ended is None
    (end,) = [h for h in heard if isinstance(h, Ended)]
    assert end.t - end.end == pytest.approx(EOT.max_wait_s, abs=FRAME_S)  # the turn is kept


def test_a_transcript_that_trails_off_weighs_the_answer_down():
    audio = question()
    hearing = Hearing(EndpointConfig(), StandInVAD(), end_of_turn=EOT)
    heard = []
    for i in range(0, len(audio), ASR_BLOCK):
        block = audio[i : i + ASR_BLOCK]
        for h in hearing.push(block, block, np.zeros(len(block), dtype=np.float32), False):
            heard.append(h)
            if isinstance(h, SpeechPaused) and h.silence_s >= 0.128 and h.silence_s < 0.16:
                hearing.transcript(
                    "for the twentieth time that evening and", h.end, h.end + h.silence_s
                )  # the early final
            if isinstance(h, CheckEndOfTurn):
                result = hearing.turn_checked(h, 0.7, hearing.heard_s)
                break
        else:
            continue
        break
    assert result.decision == "wait" and result.trails_off  # 0.7 x 0.6 < 0.5
