"""A scenario's caller (voice/scenario/caller.py): the line it says to each reply, and when; read
from a scenario file; fed after the scenario's own turns. And a keypad turn's keys, pressed at
their times. Pure logic, no engine: on the real engines these are scenarios/restaurant_caller.yaml,
scenarios/support_keyed.yaml and ``voice.bench flows``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.audio import ASR_RATE, BLOCK_S
from core.events import PlaybackStart, TtsChunk, TurnEnd
from voice.scenario.caller import CallerFeed, CallerTurns, holds, questions
from voice.scenario.feed import Feed
from voice.scenario.person import KEY_GAP_S, TurnAudio, render
from voice.scenario.spec import Answer, Caller, Cue, Keys, ScenarioError, line_turn, scenario_from

BOOKING = Caller(
    (  # the first answer that matches is said: "Under what name shall I book it?" asks the name
        Answer(("what name",), ("Rossi.", "The name is Rossi.")),
        Answer(("how many",), ("Four.",)),
        Answer(("shall i book",), ("Yes.",), unless=(("rossi", "No, the name is Rossi."), ("4|four", "No, four."))),
    )
)


def replied(caller: CallerTurns, response: int, text: str, t: float = 1.0) -> None:
    caller.on_event(TtsChunk(t=t, response=response, chunk=0, text=text))
    caller.on_event(PlaybackStart(t=t, response=response))
    caller.on_event(TurnEnd(t=t + 1, response=response, text=text))


def test_a_question_is_answered_once_the_assistant_has_been_quiet_a_moment():
    caller = CallerTurns(BOOKING)
    replied(caller, 1, "Thank you. Under what name shall I book it?")
    assert caller.next_line(3.0, None) is None  # still speaking
    assert caller.next_line(3.0, 0.2) is None  # quiet too briefly
    assert caller.next_line(3.4, 0.5) == ("Rossi.", 3.4)
    assert caller.next_line(3.5, 0.6) is None  # nothing new heard since


def said_to(caller: CallerTurns, *replies: str) -> list[str]:
    """The caller's line to each reply in turn, each heard whole and followed by a second of quiet."""
    out = []
    for i, text in enumerate(replies):
        replied(caller, i + 1, text, t=3.0 * i)
        line = caller.next_line(3.0 * i + 2.5, 1.0)
        out.append(line[0] if line else "")
    return out


def test_the_question_is_what_is_answered_and_asked_again_the_next_line():
    # "shall I book" is in the statement; the question asks the name. Asked again: the next line, the last repeats
    asked = ("I shall book it once I know. What name is it under?", "Sorry, what name was that?", "What name again?")
    assert said_to(CallerTurns(BOOKING), *asked) == ["Rossi.", "The name is Rossi.", "The name is Rossi."]


def test_a_read_back_missing_a_wanted_value_is_corrected_before_yes():
    read_backs = (
        "A table for 4 under Brassy, Friday at 8. Shall I book it?",
        "A table for 4 under Rossi, Friday at 8. Shall I book it?",
        "A table for four under Rossi. Shall I book it?",  # four in words holds too
    )
    assert said_to(CallerTurns(BOOKING), *read_backs) == ["No, the name is Rossi.", "Yes.", "Yes."]


def test_an_interruption_is_said_over_the_first_reply_that_matches_once():
    caller = CallerTurns(Caller((*BOOKING.answers, Answer(("a table for",), ("Actually, three.",), over_s=1.0))))
    caller.on_event(TtsChunk(t=5.0, response=1, chunk=0, text="A table for 4 under Rossi."))
    caller.on_event(PlaybackStart(t=5.2, response=1))
    assert caller.next_line(5.2, None) == ("Actually, three.", 6.2)
    replied(caller, 2, "A table for 3 under Rossi. Shall I book it?", t=8)
    assert caller.next_line(10, 1)[0] == "No, four."  # not over it again: answered after it


def test_a_reply_nothing_matches_ends_the_caller_unless_it_has_an_otherwise():
    caller = CallerTurns(BOOKING)
    replied(caller, 1, "Thank you for calling. Goodbye!")
    assert caller.next_line(3, 1) is None and caller.done
    patient = CallerTurns(Caller(BOOKING.answers, otherwise="Sorry, could you say that again?"))
    replied(patient, 1, "Hmm.")
    assert patient.next_line(3, 1)[0] == "Sorry, could you say that again?" and not patient.done


def test_at_most_max_turns():
    caller = CallerTurns(Caller(BOOKING.answers, max_turns=2))
    for i in range(3):
        replied(caller, i, "What name?", t=3 * i)
        caller.next_line(3 * i + 2, 1)
    assert caller.said == ["Rossi.", "The name is Rossi."] and caller.done


def test_words_are_matched_whole_and_questions_split():
    assert holds("A table for FOUR, under Rossi.", "four|4")
    assert not holds("A table for fourteen.", "four")
    assert questions("Thanks. How many people? And the day.") == " How many people?"
    assert questions("No question here.") == "No question here."


def speech(seconds: float) -> TurnAudio:
    return TurnAudio(np.full(round(seconds * ASR_RATE), 0.1, np.float32), 0.0, seconds)


def test_the_feed_says_the_callers_lines_after_its_own_turns_until_the_caller_is_done():
    caller = CallerTurns(BOOKING)
    lines = {line: speech(0.4) for line in BOOKING.lines()}
    quiet = {"now": False}
    feed = Feed(
        [(speech(0.5), Cue("at", 0.0))], idle=lambda: quiet["now"], more=CallerFeed(caller, lines, lambda: False)
    )
    blocks = [feed.source(i) for i in range(round(2.0 / BLOCK_S))]  # the turn, then silence
    assert len(feed.placed) == 1 and all(b is not None for b in blocks)
    replied(caller, 1, "What name?", t=1.0)
    quiet["now"] = True
    i = round(2.0 / BLOCK_S)
    while len(feed.placed) < 2:
        assert feed.source(i) is not None
        i += 1
    assert feed.placed[1].start == pytest.approx(2.5, abs=0.05)  # quiet from 2.0 s, then 0.5 s
    quiet["now"] = True
    replied(caller, 2, "Thanks, goodbye.", t=3.0)
    n = 0
    while feed.source(i) is not None and n < 1000:
        i, n = i + 1, n + 1
    assert caller.done and len(feed.placed) == 2 and n < 1000


def test_a_caller_is_read_from_a_scenario_file():
    scenario = scenario_from(
        {
            "turns": [{"say": "I'd like a table."}],
            "caller": {
                "answers": [
                    {"when": ["shall i book"], "say": "Yes.", "unless": {"rossi": "No, Rossi."}},
                    {"when": ["a table for"], "say": ["Wait."], "over_s": 1},
                ],
                "otherwise": "Sorry?",
                "max_turns": 5,
            },
        },
        Path("x.yaml"),
    )
    assert scenario.caller == Caller(
        (
            Answer(("shall i book",), ("Yes.",), (("rossi", "No, Rossi."),)),
            Answer(("a table for",), ("Wait.",), over_s=1.0),
        ),
        "Sorry?",
        5,
    )
    with pytest.raises(ScenarioError, match=r"x.yaml: caller.answers\[0\]: when .* and say .* are needed"):
        scenario_from({"turns": [{"say": "Hi."}], "caller": {"answers": [{"say": "Yes."}]}}, Path("x.yaml"))


def test_a_keypad_turn_presses_its_keys_at_their_times_in_silence():
    scenario = scenario_from({"turns": [{"say": "Hi."}, {"keys": "45#", "at": 3}]}, Path("x.yaml"))
    assert scenario.turns[1].keys == "45#" and scenario.turns[1].label == "keys 45#"
    keyed = render(scenario.turns[1], scenario.person, lambda: None, 22050, lambda a, lang: [])  # type: ignore[arg-type,return-value]
    assert keyed.keys == ((0.0, "4"), (KEY_GAP_S, "5"), (2 * KEY_GAP_S, "#")) and not keyed.audio.any()
    pressed: list[tuple[float, str]] = []
    clock = {"now": 0.0}
    feed = Feed([(keyed, Cue("at", 3.0))], idle=lambda: True, press=lambda k: pressed.append((clock["now"], k)))
    for i in range(round(6.0 / BLOCK_S)):
        clock["now"] = i * BLOCK_S
        feed.source(i)
    assert [k for _, k in pressed] == ["4", "5", "#"]
    assert [round(t, 2) for t, _ in pressed] == [3.0, 3.0 + KEY_GAP_S, 3.0 + 2 * KEY_GAP_S]
    with pytest.raises(ScenarioError, match=r"turns\[0\].keys: keys of a phone's keypad are needed"):
        scenario_from({"turns": [{"keys": "12x"}]}, Path("x.yaml"))


def test_a_callers_line_may_be_keys_pressed_on_the_keypad():
    """``say: {keys: "4#"}``: the answer is keyed, as a phone caller may key the party size."""
    scenario = scenario_from(
        {"turns": [{"say": "A table."}], "caller": {"answers": [{"when": ["how many"], "say": [{"keys": "4#"}]}]}},
        Path("x.yaml"),
    )
    assert scenario.caller.answers[0].say == (Keys("4#"),)
    caller = CallerTurns(scenario.caller)
    replied(caller, 1, "For how many people?")
    assert caller.next_line(3.0, 1.0) == (Keys("4#"), 3.0)
    keyed = render(line_turn(Keys("4#")), scenario.person, lambda: None, 22050, lambda a, lang: [])  # type: ignore[arg-type,return-value]
    assert keyed.keys == ((0.0, "4"), (KEY_GAP_S, "#")) and line_turn(Keys("4#")).label == "keys 4#"
    with pytest.raises(ScenarioError, match=r"caller.answers\[0\].say\[0\].keys: keys of a phone's keypad"):
        scenario_from(
            {"turns": [{"say": "Hi."}], "caller": {"answers": [{"when": ["how"], "say": [{"keys": "4x"}]}]}},
            Path("x.yaml"),
        )
