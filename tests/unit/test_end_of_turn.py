"""The end-of-turn decisions, driven by scripted frames and probabilities (no model, no audio)."""

from __future__ import annotations

import pytest

from core.end_of_turn import (
    CheckEndOfTurn,
    EndOfTurn,
    EndOfTurnConfig,
    Endpoint,
    completion_prompt,
    sentence_end_probability,
    trails_off,
)

FRAME = 0.032


def of(kind, commands):
    return [c for c in commands if isinstance(c, kind)]


def speak(eot: EndOfTurn, start: float, until: float) -> list:
    """Voiced frames from ``start`` to ``until`` (the utterance is already started)."""
    out = []
    t = start
    while t < until - 1e-9:
        t += FRAME
        out += eot.speech_continues(t)
    return out


def pause(eot: EndOfTurn, end: float, silence_s: float) -> list:
    """Silent frames after speech that ended at ``end``, up to ``silence_s`` of silence."""
    out = []
    n = 1
    while n * FRAME <= silence_s + 1e-9:
        out += eot.speech_paused(end, n * FRAME, end + n * FRAME)
        n += 1
    return out


def started(config: EndOfTurnConfig | None = None, onset=0.1, end=1.06) -> EndOfTurn:
    eot = EndOfTurn(config)
    eot.speech_started(onset, onset + 0.192)
    speak(eot, onset, end)
    return eot


def test_first_check_after_first_check_s_of_silence_on_the_audio_so_far():
    eot = started()
    assert pause(eot, 1.06, 0.16) == []
    (check,) = pause(eot, 1.06, 0.224)[-1:]
    assert isinstance(check, CheckEndOfTurn)
    assert (check.onset, check.end) == (0.1, 1.06)
    assert check.until == pytest.approx(1.06 + 0.224)  # seventh silent frame: the first at or past 0.2 s


def test_finished_ends_the_turn_now():
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    (ep,) = eot.answer(check.check, 0.93, 1.3)
    assert ep == Endpoint(end=1.06, t=1.3, reason="model", probability=0.93, trails_off=False)
    assert eot.speech_paused(1.06, 0.256, 1.316) == []  # ended: nothing more for this utterance
    assert eot.speech_paused(1.06, 5.0, 6.06) == []


def test_the_threshold_is_inclusive_and_configurable():
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    assert of(Endpoint, eot.answer(check.check, 0.5, 1.3))
    eot = started(EndOfTurnConfig(threshold=0.8))
    (check,) = pause(eot, 1.06, 0.224)
    assert eot.answer(check.check, 0.79, 1.3) == []


RECHECK = EndOfTurnConfig(recheck_s=0.3)


def test_one_check_per_pause_is_the_default():
    assert EndOfTurnConfig().recheck_s is None


def test_not_finished_asks_again_as_the_silence_grows_then_ends_at_max_wait():
    eot = started(RECHECK)
    asked = []
    end = 1.06
    n = 1
    while True:
        silence = n * FRAME
        cmds = eot.speech_paused(end, silence, end + silence)
        n += 1
        if of(Endpoint, cmds):
            (ep,) = cmds
            break
        for c in of(CheckEndOfTurn, cmds):
            asked.append(round(c.until - end, 3))
            assert eot.answer(c.check, 0.2, c.until + 0.05) == []  # each says: not finished
    # every recheck_s (0.3 s) of further silence, on frame boundaries
    assert asked == [0.224, 0.544, 0.864, 1.184, 1.504, 1.824]
    assert ep.reason == "max_wait" and ep.end == end and ep.probability == 0.2
    assert silence == pytest.approx(2.016)  # the first frame at or past max_wait_s


def test_one_check_per_pause_when_recheck_s_is_none():
    eot = started(EndOfTurnConfig(recheck_s=None, max_wait_s=1.0))
    cmds = pause(eot, 1.06, 0.224)
    (check,) = cmds
    assert eot.answer(check.check, 0.1, 1.3) == []
    assert pause(eot, 1.06, 0.96) == []  # the frames up to 0.96 s again: no new check
    (ep,) = eot.speech_paused(1.06, 1.024, 2.084)
    assert ep.reason == "max_wait"


def test_at_most_one_check_in_flight():
    eot = started(RECHECK)
    (check,) = pause(eot, 1.06, 0.224)
    assert eot.pending == check.check
    # the answer is slow: 0.6 s of silence go by without a second check
    assert [eot.speech_paused(1.06, s, 1.06 + s) for s in (0.544, 0.576, 0.608)] == [[], [], []]
    assert eot.answer(check.check, 0.1, 1.7) == []
    # due long ago: the next silent frame asks, and the one after is recheck_s later
    (again,) = eot.speech_paused(1.06, 0.64, 1.7)
    assert again.check == check.check + 1 and again.until == pytest.approx(1.7)
    assert eot.answer(again.check, 0.1, 1.75) == []
    assert eot.speech_paused(1.06, 0.928, 1.988) == []
    assert of(CheckEndOfTurn, eot.speech_paused(1.06, 0.96, 2.02))


def test_speech_resuming_makes_the_answer_in_flight_stale():
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    speak(eot, 1.3, 1.62)  # the person goes on
    assert eot.pending is None
    assert eot.answer(check.check, 0.99, 1.65) == []  # for audio the person has since continued
    # the schedule starts again at the next pause, from its own silence
    assert pause(eot, 1.62, 0.16) == []
    (check2,) = pause(eot, 1.62, 0.224)[-1:]
    assert check2.check == check.check + 1 and check2.end == 1.62
    (ep,) = eot.answer(check2.check, 0.7, 1.86)
    assert ep.end == 1.62


def test_a_pause_with_a_new_end_is_a_new_pause_even_without_speech_continues():
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    # the front end's frames say the speech now ends later (a frame this object was not given)
    assert of(CheckEndOfTurn, pause(eot, 1.5, 0.224)) != []
    assert eot.answer(check.check, 0.99, 1.8) == []


def test_an_answer_after_the_utterance_ended_is_ignored():
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    eot.speech_ended(1.6)  # the endpointer's hangover ended it first
    assert eot.answer(check.check, 0.99, 1.7) == []
    assert eot.speech_paused(1.06, 3.0, 4.06) == []


def test_answers_of_an_earlier_utterance_do_not_end_the_next():
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    eot.speech_started(2.0, 2.192)  # a new utterance before the answer came
    speak(eot, 2.0, 2.5)
    assert eot.answer(check.check, 0.99, 2.5) == []
    (check2,) = pause(eot, 2.5, 0.224)[-1:]
    assert check2.check != check.check and check2.onset == 2.0


def test_a_failed_check_leaves_the_pause_to_silence_and_the_next_pause_is_checked():
    eot = started(EndOfTurnConfig(max_wait_s=1.0))
    (check,) = pause(eot, 1.06, 0.224)
    assert eot.failed(check.check, 1.3) == []
    assert eot.pending is None
    assert eot.speech_paused(1.06, 0.544, 1.604) == []  # no re-check in this pause
    assert eot.speech_paused(1.06, 0.8, 1.86) == []
    eot.speech_continues(1.9)
    (again,) = pause(eot, 1.9, 0.224)
    (ep,) = eot.answer(again.check, 0.9, 2.2)
    assert ep.reason == "model"


def test_a_failed_check_still_ends_the_turn_at_max_wait():
    eot = started(EndOfTurnConfig(max_wait_s=1.0))
    (check,) = pause(eot, 1.06, 0.224)
    eot.failed(check.check, 1.3)
    (ep,) = pause(eot, 1.06, 1.024)[-1:]
    assert ep.reason == "max_wait" and ep.probability is None


def test_a_failure_reported_for_a_stale_check_changes_nothing():
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    eot.speech_continues(1.3)
    eot.failed(check.check, 1.32)
    assert len(pause(eot, 1.3, 0.224)) == 1  # the new pause is checked


def test_max_wait_ends_the_turn_even_with_a_check_in_flight():
    eot = started(EndOfTurnConfig(max_wait_s=0.5))
    (check,) = pause(eot, 1.06, 0.224)
    (ep,) = pause(eot, 1.06, 0.512)[-1:]
    assert ep.reason == "max_wait" and ep.probability is None
    assert eot.answer(check.check, 0.99, 1.6) == []


def test_a_transcript_that_trails_off_weighs_the_probability_down():
    eot = started(RECHECK)
    (check,) = pause(eot, 1.06, 0.224)
    eot.transcript("I'd like a pizza and", end=1.06, t=1.3)
    assert eot.answer(check.check, 0.8, 1.3) == []  # 0.8 x 0.6 = 0.48
    (check2,) = pause(eot, 1.06, 0.544)[-1:]
    (ep,) = eot.answer(check2.check, 0.9, 1.65)  # 0.54: sure enough
    assert ep.reason == "model" and ep.probability == 0.9 and ep.trails_off


def test_a_finished_transcript_changes_nothing():
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    eot.transcript("I'd like a pizza.", end=1.06, t=1.3)
    (ep,) = eot.answer(check.check, 0.55, 1.3)
    assert not ep.trails_off


def test_a_transcript_that_misses_the_last_words_is_not_used():
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    eot.transcript("I'd like a pizza and", end=0.9, t=1.3)  # a partial from before the speech's last frames
    assert of(Endpoint, eot.answer(check.check, 0.8, 1.3))


def test_a_transcript_is_forgotten_when_the_person_goes_on():
    eot = started()
    eot.transcript("so", end=1.06, t=1.3)
    speak(eot, 1.06, 1.5)
    (check,) = pause(eot, 1.5, 0.224)[-1:]
    assert of(Endpoint, eot.answer(check.check, 0.6, 1.8))


def test_the_weight_is_configurable():
    eot = started(EndOfTurnConfig(continuation_weight=1.0))
    (check,) = pause(eot, 1.06, 0.224)
    eot.transcript("and", end=1.06, t=1.3)
    assert of(Endpoint, eot.answer(check.check, 0.6, 1.3))


@pytest.mark.parametrize(
    "text",
    [
        "I was thinking and",
        "I was thinking, and...",
        "It's fine but",
        "so",
        "I want the",
        "Let me see, um",
        "My number is 555 12",
        "My number is 555-1234",
        "it's five five five",
        "twenty one",
        "the code is 4, 7,",
    ],
)
def test_trails_off(text):
    assert trails_off(text)


@pytest.mark.parametrize(
    "text",
    ["", "What time is it?", "I'm 25.", "In 1961.", "That one.", "Yes.", "Sandy", "android", "the end"],
)
def test_does_not_trail_off(text):
    assert not trails_off(text)


def test_i_think_so_trails_off_but_a_sure_model_still_ends_the_turn():
    # "so" is a conjunction more often than not; the weight, not a veto, keeps "I think so" answerable.
    assert trails_off("I think so")
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    eot.transcript("I think so", end=1.06, t=1.3)
    assert of(Endpoint, eot.answer(check.check, 0.9, 1.3))


def read(text: str, sentence_end: float, config: EndOfTurnConfig | None = None) -> tuple[EndOfTurn, CheckEndOfTurn]:
    """An utterance whose pause is checked and whose transcript ``text`` the LLM read at
    ``sentence_end`` before the model answers (answer it at 1.3)."""
    eot = started(config)
    (check,) = pause(eot, 1.06, 0.224)
    eot.transcript(text, end=1.06, t=1.25, sentence_end=sentence_end)
    return eot, check


def held(config: EndOfTurnConfig | None = None) -> tuple[EndOfTurn, CheckEndOfTurn]:
    """An utterance whose pause is checked, with the transcripts of pauses to come."""
    eot = EndOfTurn(config, transcripts=True)
    eot.speech_started(0.1, 0.292)
    speak(eot, 0.1, 1.06)
    (check,) = pause(eot, 1.06, 0.224)
    return eot, check


def test_unfinished_words_overrule_a_finished_sound():
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    assert eot.transcript("Not at this particular.", end=1.06, t=1.25, sentence_end=0.0004) == []
    assert eot.unfinished_words
    assert eot.answer(check.check, 0.95, 1.3) == []
    (ep,) = pause(eot, 1.06, 2.016)[-1:]  # left to the silence: the person goes on, or max_wait_s ends it
    assert ep.reason == "max_wait" and ep.sentence_end == 0.0004


def test_a_finished_sentence_is_not_overruled():
    eot, check = read("What time is it?", 0.35)
    (ep,) = eot.answer(check.check, 0.9, 1.3)
    assert ep.reason == "model" and ep.sentence_end == 0.35 and not eot.unfinished_words


def test_one_word_is_never_unfinished():
    # "Yes" scores 0.01 (the LLM expects more), and a one-word turn is finished more often than not.
    eot, check = read("Yes.", 0.001)
    assert of(Endpoint, eot.answer(check.check, 0.9, 1.3))


def test_no_llm_floor_no_veto():
    eot, check = read("I want to", 0.0, EndOfTurnConfig(min_sentence_end=None))
    assert of(Endpoint, eot.answer(check.check, 0.9, 1.3))


def test_a_finished_sound_waits_for_the_transcript_on_its_way():
    eot, check = held()
    assert eot.answer(check.check, 0.9, 1.3) == [] and eot.holding
    assert pause(eot, 1.06, 0.352) == []  # still within transcript_wait_s
    (ep,) = eot.transcript("What time is it?", end=1.06, t=1.45, sentence_end=0.35)
    assert ep == Endpoint(1.06, 1.45, "model", 0.9, False, 0.35)
    assert not eot.holding


def test_the_transcript_on_its_way_can_hold_the_turn_open():
    eot, check = held()
    eot.answer(check.check, 0.9, 1.3)
    assert eot.transcript("I want to", end=1.06, t=1.45, sentence_end=0.0) == []
    assert not eot.holding
    assert not of(Endpoint, pause(eot, 1.06, 1.95))
    (ep,) = pause(eot, 1.06, 2.016)[-1:]
    assert ep.reason == "max_wait"


def test_a_transcript_that_trails_off_after_a_finished_sound_weighs_it_down():
    eot, check = held()
    eot.answer(check.check, 0.7, 1.3)  # 0.7 x 0.6 = 0.42 once the words are in
    assert eot.transcript("I'd like a pizza and", end=1.06, t=1.45) == []


def test_a_late_transcript_leaves_the_model_to_decide():
    eot, check = held()
    eot.answer(check.check, 0.9, 1.28)
    assert pause(eot, 1.06, 0.512) == []  # 1.06 + 0.512 < 1.28 + 0.3
    (ep,) = pause(eot, 1.06, 0.544)[-1:]
    assert ep.reason == "model" and ep.t == pytest.approx(1.06 + 0.544)
    assert eot.transcript("What time is it?", end=1.06, t=1.7) is None  # the turn is over


def test_speech_ends_the_wait_for_the_transcript():
    eot, check = held()
    eot.answer(check.check, 0.9, 1.3)
    speak(eot, 1.06, 1.5)
    assert not eot.holding
    assert eot.transcript("What time", end=1.06, t=1.55, sentence_end=0.5) is None  # stale
    (check2,) = pause(eot, 1.5, 0.224)[-1:]
    assert eot.answer(check2.check, 0.9, 1.75) == [] and eot.holding  # waits for this pause's words


def test_a_transcript_before_the_answer_is_used_at_once():
    eot, check = held()
    assert eot.transcript("What time is it?", end=1.06, t=1.2, sentence_end=0.35) == []
    assert of(Endpoint, eot.answer(check.check, 0.9, 1.3))


def test_the_words_just_before_are_read_with_these():
    eot, check = held()
    eot.answer(check.check, 0.9, 1.3)
    assert of(Endpoint, eot.transcript("the invention of movable metal letters.", end=1.06, t=1.4, sentence_end=0.3))
    eot.speech_started(1.06 + 0.224 + 1.5, 2.9)  # 1.5 s later: the same sentence goes on
    assert eot.completion_prompt("may justly be considered.") == (
        "The invention of movable metal letters. may justly be considered"
    )
    eot.speech_started(6.0, 6.2)  # no words in that one (and long after): nothing before
    assert eot.completion_prompt("Hello.") == "Hello"
    speak(eot, 6.0, 7.0)
    (check,) = pause(eot, 7.0, 0.224)[-1:]
    eot.answer(check.check, 0.9, 7.3)
    eot.transcript("Hello there.", end=7.0, t=7.35, sentence_end=0.3)
    eot.speech_started(7.0 + 0.224 + 3.5, 10.9)  # 3.5 s later: a new sentence
    assert eot.completion_prompt("Thanks") == "Thanks"


def test_one_word_with_words_before_it_may_be_unfinished():
    eot, check = held()
    eot.answer(check.check, 0.9, 1.3)
    eot.transcript("I would like to", end=1.06, t=1.4, sentence_end=0.0)  # held open, then max wait
    pause(eot, 1.06, 2.016)
    eot.speech_started(3.5, 3.7)
    speak(eot, 3.5, 3.8)
    (check,) = pause(eot, 3.8, 0.224)[-1:]
    eot.answer(check.check, 0.9, 4.1)
    assert eot.transcript("order", end=3.8, t=4.2, sentence_end=0.001) == []
    assert eot.unfinished_words


def test_finished_words_end_a_doubted_turn_sooner():
    eot, check = read("Lord, but I'm glad to see you again, Phil.", 0.59)
    assert eot.answer(check.check, 0.15, 1.3) == []  # the model doubts it
    assert not of(Endpoint, pause(eot, 1.06, 0.768))
    (ep,) = pause(eot, 1.06, 0.8)[-1:]
    assert (ep.reason, ep.t) == ("words", pytest.approx(1.86))


def test_words_that_may_go_on_wait_the_whole_maximum():
    eot, check = read("the Gutenberg, or forty-two line Bible of about 1455,", 0.28)
    assert eot.answer(check.check, 0.02, 1.3) == []
    (ep,) = pause(eot, 1.06, 2.016)[-1:]
    assert ep.reason == "max_wait"


def test_finished_words_that_trail_off_do_not_count():
    eot, check = read("My number is five five", 0.5)
    eot.answer(check.check, 0.2, 1.3)
    assert not of(Endpoint, pause(eot, 1.06, 1.5))


def test_completion_prompt():
    assert completion_prompt(" not at this particular.") == "Not at this particular"
    assert completion_prompt("in B. ") == "In B"
    assert completion_prompt('He said "fine," and...') == 'He said "fine," and'
    assert completion_prompt("") == ""


def test_sentence_end_probability_sums_the_tokens_that_end_a_sentence():
    top = {".": 0.2, " .": 0.01, "?": 0.05, '!"': 0.01, "...": 0.02, ",": 0.3, " the": 0.1, "Mr.": 0.01, "": 0.01}
    assert sentence_end_probability(top) == pytest.approx(0.29)
    assert sentence_end_probability({}) == 0.0


def test_config_is_checked():
    with pytest.raises(ValueError):
        EndOfTurnConfig(first_check_s=2.5, max_wait_s=2.0)
    with pytest.raises(ValueError):
        EndOfTurnConfig(recheck_s=0.0)
    for threshold in (0.0, 1.5):
        with pytest.raises(ValueError):
            EndOfTurnConfig(threshold=threshold)
    with pytest.raises(ValueError):
        EndOfTurnConfig(min_sentence_end=1.5)
    with pytest.raises(ValueError):
        EndOfTurnConfig(transcript_wait_s=-0.1)
    with pytest.raises(ValueError):
        EndOfTurnConfig(finished_wait_s=0.0)
    assert EndOfTurnConfig(threshold=1.0).threshold == 1.0


def test_frames_before_any_speech_do_nothing():
    eot = EndOfTurn()
    assert eot.speech_paused(0.0, 3.0, 3.0) == []
    assert eot.speech_continues(0.5) == []
    assert eot.answer(1, 0.99, 1.0) == []


def test_after_an_endpoint_only_a_new_utterance_is_checked():
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    assert of(Endpoint, eot.answer(check.check, 0.9, 1.3))
    speak(eot, 1.3, 1.6)  # frames the front end still counts as the ended utterance's
    assert pause(eot, 1.6, 0.5) == []
    eot.speech_started(2.0, 2.192)
    speak(eot, 2.0, 2.5)
    (check2,) = pause(eot, 2.5, 0.224)[-1:]
    assert (check2.onset, check2.end) == (2.0, 2.5)


def test_an_unsure_finished_needs_words_that_read_finished():
    # "in being | comparatively modern": the model said 0.74 to "in B.", the words 0.055.
    eot, check = read("in B.", 0.055)
    assert eot.answer(check.check, 0.74, 1.3) == []
    assert eot.words_hold
    assert not of(Endpoint, pause(eot, 1.06, 0.768))  # not finished words either: no early end
    (ep,) = pause(eot, 1.06, 2.016)[-1:]
    assert ep.reason == "max_wait"


def test_an_unsure_finished_ends_the_turn_on_finished_words():
    # "For the twentieth time that evening the two men shook hands.": the model 0.74, the words 0.40.
    eot, check = read("For the twentieth time that evening the two men shook hands.", 0.40)
    (ep,) = eot.answer(check.check, 0.74, 1.3)
    assert ep.reason == "model" and not eot.words_hold


def test_a_sure_finished_needs_only_words_that_are_not_unfinished():
    eot, check = read("In being comparatively modern.", 0.047)
    assert of(Endpoint, eot.answer(check.check, 0.99, 1.3))


def test_an_unsure_finished_waits_for_its_words_then_doubts_them():
    eot, check = held()
    assert eot.answer(check.check, 0.81, 1.3) == [] and eot.holding
    words = "The invention of movable metal letters in the middle of the 15th century."
    assert eot.transcript(words, end=1.06, t=1.45, sentence_end=0.26) == []
    assert eot.words_hold and not eot.holding


def test_the_sure_threshold_can_be_switched_off():
    eot, check = read("in B.", 0.055, EndOfTurnConfig(sure_threshold=None))
    assert of(Endpoint, eot.answer(check.check, 0.74, 1.3))


# -- closing words, and the goodbye that may follow them (core/goodbye.py) -----


def closing(eot: EndOfTurn, text: str, silence_s: float, p: float = 0.9) -> list:
    """A pause after ``text``: its transcript, the model's answer, then silence up to ``silence_s``."""
    out = pause(eot, 1.06, 0.224)
    check = out[-1]
    eot.transcript(text, end=1.06, t=1.3)
    out = eot.answer(check.check, p, 1.3)
    return out + pause(eot, 1.06, silence_s)


def test_closing_words_wait_for_a_goodbye_then_end_at_closing_wait_s():
    eot = started(EndOfTurnConfig())
    (ep,) = of(Endpoint, closing(eot, "Thank you,", silence_s=0.9))
    assert ep.t == pytest.approx(1.06 + 0.8, abs=FRAME)  # not at the model's "finished" (1.3)


def test_a_goodbye_after_closing_words_is_the_same_turn():
    eot = started(EndOfTurnConfig())
    assert of(Endpoint, closing(eot, "Thank you,", silence_s=0.5)) == []
    speak(eot, 1.56, 2.1)  # "goodbye."
    (check,) = pause(eot, 2.1, 0.224)[-1:]
    eot.transcript("Thank you, goodbye.", end=2.1, t=2.33)
    (ep,) = of(Endpoint, eot.answer(check.check, 0.9, 2.33))
    assert ep.reason == "model"  # a goodbye ends the turn as soon as the model says finished


def test_other_words_end_the_turn_at_the_models_finished():
    eot = started(EndOfTurnConfig())
    (ep,) = of(Endpoint, closing(eot, "A table for four, please.", silence_s=0.3))
    assert ep.t == pytest.approx(1.3)


def test_the_closing_wait_can_be_turned_off():
    eot = started(EndOfTurnConfig(closing_wait_s=None))
    (ep,) = of(Endpoint, closing(eot, "Thank you,", silence_s=0.3))
    assert ep.t == pytest.approx(1.3)


# Words that read not unfinished: the model is asked again as the silence grows (finished_recheck_s).


def test_words_not_unfinished_ask_the_model_again_as_the_silence_grows():
    # The demo's "How are you doing?": Smart Turn 0.43 after 0.22 s of silence, the words 0.20.
    eot, check = read("How are you doing?", 0.20)
    assert eot.answer(check.check, 0.43, 1.3) == []
    (again,) = pause(eot, 1.06, 0.448)[-1:]  # the first frame at or past 0.224 + 0.2 s
    assert isinstance(again, CheckEndOfTurn) and again.until == pytest.approx(1.06 + 0.448)
    (ep,) = eot.answer(again.check, 0.96, 1.55)
    assert (ep.reason, ep.t, ep.probability) == ("model", 1.55, 0.96)


def test_the_re_check_repeats_until_max_wait():
    eot, check = read("How are you doing?", 0.20)
    eot.answer(check.check, 0.1, 1.3)
    asked = []
    for n in range(8, 64):
        for c in of(CheckEndOfTurn, cmds := eot.speech_paused(1.06, n * FRAME, 1.06 + n * FRAME)):
            asked.append(round(c.until - 1.06, 3))
            assert eot.answer(c.check, 0.1, c.until) == []
        if of(Endpoint, cmds):
            break
    assert asked == [0.448, 0.672, 0.896, 1.12, 1.344, 1.568, 1.792]
    assert cmds[0].reason == "max_wait"


def test_unsure_answers_to_a_re_check_still_need_words_that_read_finished():
    eot, check = read("How are you doing?", 0.20)
    eot.answer(check.check, 0.43, 1.3)
    (again,) = pause(eot, 1.06, 0.448)[-1:]
    assert eot.answer(again.check, 0.7, 1.55) == []  # 0.5-0.85 with words under 0.3: doubted


def test_no_re_check_for_unfinished_words_words_that_trail_off_or_none_read():
    for text, p in (("Not at this", 0.0), ("My number is five five", 0.5)):
        eot, check = read(text, p)
        eot.answer(check.check, 0.43, 1.3)
        assert not of(CheckEndOfTurn, pause(eot, 1.06, 1.9))
    eot = started()
    (check,) = pause(eot, 1.06, 0.224)
    eot.answer(check.check, 0.43, 1.3)
    assert not of(CheckEndOfTurn, pause(eot, 1.06, 1.9))  # no transcript came


def test_no_re_check_for_words_that_merely_do_not_read_unfinished():
    # "in being |" heard "in B.": SmolLM2 read 0.061, over min_sentence_end; re-asked at 0.67 s of a
    # 1.0 s pause, Smart Turn said 0.92 and the sentence was cut.
    eot, check = read("in B.", 0.061)
    eot.answer(check.check, 0.16, 1.3)
    assert not of(CheckEndOfTurn, pause(eot, 1.06, 1.9))
    eot, check = read("Yes.", 0.01)  # one word is never unfinished, and is re-asked
    eot.answer(check.check, 0.3, 1.3)
    assert of(CheckEndOfTurn, pause(eot, 1.06, 0.448))


def test_no_re_check_after_the_model_failed_or_when_it_is_switched_off():
    eot, check = read("How are you doing?", 0.20)
    eot.failed(check.check, 1.3)
    assert not of(CheckEndOfTurn, pause(eot, 1.06, 1.9))
    eot, check = read("How are you doing?", 0.20, EndOfTurnConfig(finished_recheck_s=None))
    eot.answer(check.check, 0.43, 1.3)
    assert not of(CheckEndOfTurn, pause(eot, 1.06, 1.9))
