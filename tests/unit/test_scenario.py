"""The scenario runner on stand-in engines: every expectation kind, passing and failing, with its message.

The stand-ins (tests/unit/stand_in_engines.py) hear a tone's pitch as scripted words and answer
scripted replies instantly; the turns are tone recordings written to files, as a scenario names
them. The real engines running the example scenarios are tests/integration/test_scenarios.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from stand_in_engines import StandInEngines, StandInLLM, StandInRecognizer, silence, tone
from test_session import INTERRUPTION_HZ, QUESTION_HZ, WORDS

from core.audio import ASR_RATE
from core.tool_calls import ToolCallDelta
from shell.config import SessionConfig
from shell.engines import EngineConfig
from shell.tools import load_tools
from transport.files import write_wav
from voice.app.runtime import RunSetup
from voice.scenario.report import junit, result_json, summary, table
from voice.scenario.runner import run_scenario
from voice.scenario.spec import ScenarioError, load_scenario, scenario_from

BACKCHANNEL_HZ = 900
REPLY_HZ = 220  # the stand-in TTS speaks every word as this tone
HEARD = {**WORDS, BACKCHANNEL_HZ: "uh-huh", REPLY_HZ: "son las doce"}
LONG_REPLY = "It is noon now and the sun is high in the sky and the day is warm and bright."


class StandIns:
    """An engine source of stand-ins: ``replies`` in order; every request is kept."""

    def __init__(self, replies: list) -> None:
        self.engines = StandInEngines(StandInRecognizer(HEARD, {"son las doce": ("es", 0.9)}), StandInLLM(replies))

    async def get(self, config: EngineConfig) -> StandInEngines:
        return self.engines


def setup(tools=None, **config) -> RunSetup:
    session = SessionConfig(echo_cancel=False, end_of_turn=None, speculate=False, **config)
    return RunSetup(EngineConfig(), session, tools)


@pytest.fixture
def sounds(tmp_path: Path) -> Path:
    """Tone recordings the stand-in recognizer hears as words."""
    for name, audio in {
        "question.wav": tone(1.2, hz=QUESTION_HZ),
        "stop.wav": tone(1.0, hz=INTERRUPTION_HZ),
        "uh-huh.wav": tone(0.4, hz=BACKCHANNEL_HZ),
        "paused.wav": np.concatenate([tone(0.8, hz=QUESTION_HZ), silence(2.0), tone(0.8, hz=QUESTION_HZ)]),
    }.items():
        write_wav(tmp_path / name, audio, ASR_RATE)
    return tmp_path


def scenario(folder: Path, turns: list[dict], **top):
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "turns": turns, **top}))
    return load_scenario(path)


def by_name(result) -> dict[str, object]:
    return {(c.turn, c.name): c for c in result.checks}


async def test_a_question_answered_in_time_passes_every_check(sounds):
    s = scenario(
        sounds,
        [
            {
                "audio": "question.wav",
                "expect": {
                    "heard": "what time",
                    "answered_within_ms": 1500,
                    "reply": {"says": "it is noon", "matches": r"\bnoon\b"},
                    "tool": "none",
                },
            }
        ],
    )
    result = await run_scenario(s, StandIns(["It is noon."]), setup())
    assert [(c.name, c.passed) for c in result.checks] == [
        ("heard", True),
        ("answered", True),
        ("reply says", True),
        ("reply matches", True),
        ("no tool", True),
    ]
    answered = by_name(result)[(0, "answered")]
    p = result.placed[0]
    assert p.start == 0.5 and answered.figure.endswith(" ms")


async def test_a_scenario_runs_on_the_wall_clock_too(sounds):
    # voice.bench answers --real-time: the same scenario, the engines' own speed counted (a few seconds).
    turns = [{"audio": "question.wav", "expect": {"heard": "what time", "reply": {"says": "it is noon"}}}]
    result = await run_scenario(scenario(sounds, turns), StandIns(["It is noon."]), setup(), real_time=True)
    assert result.passed, [c.message for c in result.checks if not c.passed]


async def test_a_failed_check_says_what_was_measured_and_why(sounds):
    expect = {"answered_within_ms": 1, "reply": {"says": "midnight", "matches": "^bye"}, "heard": "weather"}
    result = await run_scenario(
        scenario(sounds, [{"audio": "question.wav", "expect": expect}]), StandIns(["It is noon."]), setup()
    )
    checks = by_name(result)
    assert not result.passed
    assert checks[(0, "answered")].message == "later than 1 ms after the speech"
    assert checks[(0, "reply says")].message == "the reply does not say 'midnight'"
    assert checks[(0, "reply says")].figure == '"It is noon."'
    assert checks[(0, "reply matches")].message == "the reply does not match /^bye/"
    assert checks[(0, "heard")].message == "the transcript does not hold 'weather'"
    lines = table([result]).splitlines()
    assert any("FAIL" in line and "answered" in line for line in lines)
    assert any("^ later than 1 ms" in line for line in lines)
    assert summary([result]) == "1 scenario, 4 checks: 0 passed, 4 failed (in 1 scenario)"


async def test_a_tool_call_is_checked_by_name_and_arguments(sounds):
    # A timer: a calculation of numbers nobody said would never run (core/grounded.py).
    call = ToolCallDelta(0, id="c0", name="set_timer", arguments='{"minutes": 2}')
    tools = load_tools(["builtin"])
    turn = {"audio": "question.wav", "expect": {"tool": {"name": "set_timer", "arguments": {"minutes": 2}}}}
    result = await run_scenario(scenario(sounds, [turn]), StandIns([[call], "Four."]), setup(tools))
    (c,) = result.checks
    assert c.passed and c.figure == 'set_timer({"minutes": 2})'

    turn["expect"] = {"tool": {"name": "set_timer", "arguments": {"minutes": 3}}}
    result = await run_scenario(scenario(sounds, [turn]), StandIns([[call], "Four."]), setup(tools))
    (c,) = result.checks
    assert not c.passed and c.message == 'no call set_timer({"minutes": 3})'

    turn["expect"] = {"tool": "none"}
    result = await run_scenario(scenario(sounds, [turn]), StandIns([[call], "Four."]), setup(tools))
    (c,) = result.checks
    assert (c.name, c.passed, c.message) == ("no tool", False, "a tool was called")


async def test_an_utterance_cut_at_its_pause_fails_one_turn(sounds):
    turn = {"audio": "paused.wav", "expect": {"one_turn": True}}
    result = await run_scenario(scenario(sounds, [turn]), StandIns(["Okay.", "Sure."]), setup())
    (c,) = result.checks
    assert (c.passed, c.figure) == (False, "2 turns"), c
    assert c.message.startswith("a reply started at") and c.message.endswith("before the speech ended at 4.10 s")

    result = await run_scenario(scenario(sounds, [{"audio": "question.wav", "expect": {"one_turn": True}}]),
                                StandIns(["Okay."]), setup())  # fmt: skip
    (c,) = result.checks
    assert c.passed and c.figure == "1 turn"


async def test_an_interruption_is_timed_and_the_reply_is_stored_as_heard(sounds):
    turns = [
        {"audio": "question.wav"},
        {"audio": "stop.wav", "after_reply_start": 1.0, "expect": {"interrupts": {"within_ms": 1500}}},
    ]
    result = await run_scenario(scenario(sounds, turns), StandIns([LONG_REPLY, "Sure."]), setup())
    checks = by_name(result)
    assert checks[(1, "interrupts")].passed, checks[(1, "interrupts")]
    assert checks[(1, "stored as heard")].passed, checks[(1, "stored as heard")]
    placed = result.placed[1]
    reply_start = next(e.t for e in result.events if e.type == "playback_start")
    assert placed.start == pytest.approx(reply_start + 1.0, abs=0.021)

    turns[1]["expect"] = {"interrupts": {"within_ms": 1}}
    result = await run_scenario(scenario(sounds, turns), StandIns([LONG_REPLY, "Sure."]), setup())
    assert by_name(result)[(1, "interrupts")].message == "stopped later than 1 ms"


async def test_a_backchannel_is_ignored_and_words_are_not(sounds):
    turns = [
        {"audio": "question.wav"},
        {"audio": "uh-huh.wav", "after_reply_start": 1.0, "expect": {"ignored": True}},
    ]
    result = await run_scenario(scenario(sounds, turns), StandIns([LONG_REPLY]), setup())
    assert by_name(result)[(1, "ignored")].passed

    turns[1] = {"audio": "stop.wav", "after_reply_start": 1.0, "expect": {"ignored": True}}
    result = await run_scenario(scenario(sounds, turns), StandIns([LONG_REPLY, "Sure."]), setup())
    c = by_name(result)[(1, "ignored")]
    assert not c.passed and c.message == "it cut the reply"


async def test_the_reply_language_is_what_whisper_hears_in_the_reply_audio(sounds):
    turn = {"audio": "question.wav", "expect": {"reply": {"language": "es"}}}
    result = await run_scenario(scenario(sounds, [turn]), StandIns(["Son las doce."]), setup())
    (c,) = result.checks
    assert c.passed and c.figure == "es"
    turn["expect"] = {"reply": {"language": "fr"}}
    result = await run_scenario(scenario(sounds, [turn]), StandIns(["Son las doce."]), setup())
    (c,) = result.checks
    assert (c.passed, c.message) == (False, "not heard as fr")


async def test_a_quiet_phone_line_ends_the_conversation(sounds):
    agent = {"call": True, "call_greeting": "Hello.", "call_idle_s": 2, "call_reprompts": 1}
    turns = [{"audio": "question.wav"}]
    s = scenario(sounds, turns, agent=agent, listen_s=20, expect={"ended": True})
    result = await run_scenario(s, StandIns(["Hello.", "It is noon."]), setup())
    (c,) = result.checks
    assert (c.turn, c.name, c.passed) == (None, "ended", True)
    said = [e.text for e in result.events if e.type == "tts_chunk"]
    assert said[0] == "Hello." and result.placed[0].start > 1.0  # the caller waited for the greeting

    s = scenario(sounds, turns, expect={"ended": True})
    result = await run_scenario(s, StandIns(["It is noon."]), setup())
    (c,) = result.checks
    assert (c.passed, c.message) == (False, "it did not end")


async def test_the_judge_is_the_local_model_and_marked_as_nondeterministic(sounds):
    turn = {"audio": "question.wav", "expect": {"judge": "Does the reply give a time?"}}
    engines = StandIns(["It is noon."])
    engines.engines.llm.next_tokens = {" yes": 0.7, " Yes": 0.1, " no": 0.2}
    result = await run_scenario(scenario(sounds, [turn]), engines, setup())
    (c,) = result.checks
    assert c.passed and not c.deterministic and c.figure == "yes 0.80, no 0.20"
    asked = engines.engines.llm.asked[-1]
    assert asked.endswith('Reply: "It is noon."\nQuestion: Does the reply give a time?\nAnswer:')
    engines = StandIns(["It is noon."])
    engines.engines.llm.next_tokens = {" yes": 0.3, " no": 0.6}
    result = await run_scenario(scenario(sounds, [turn]), engines, setup())
    (c,) = result.checks
    assert not c.passed and c.message == "no to 'Does the reply give a time?'"
    assert "(judge: a model's opinion, not a measurement)" in table([result])


async def test_the_same_scenario_gives_the_same_json_and_recording(sounds):
    turns = [
        {"audio": "question.wav", "expect": {"answered_within_ms": 1500}},
        {"audio": "stop.wav", "after_reply_start": 0.8, "expect": {"interrupts": {"within_ms": 1500}}},
        {"audio": "question.wav"},
    ]
    first = await run_scenario(scenario(sounds, turns), StandIns([LONG_REPLY, "Sure.", "Noon."]), setup())
    second = await run_scenario(scenario(sounds, turns), StandIns([LONG_REPLY, "Sure.", "Noon."]), setup())
    assert json.dumps(result_json(first)) == json.dumps(result_json(second))
    assert np.array_equal(first.recording.stereo(), second.recording.stereo())
    xml = junit([first])
    assert xml.count("<testcase") == len(first.checks) and 'name="turn 2: interrupts"' in xml


def test_a_wrong_file_is_one_line_naming_where(tmp_path):
    path = tmp_path / "bad.yaml"
    cases = [
        ({"turns": []}, "turns: a list of the person's turns is needed"),
        ({"turns": [{"say": "hi", "audio": "x.wav"}]}, "turns[0]: one of say (text), audio (a file), sound"),
        ({"turns": [{"audio": "missing.wav"}]}, "turns[0].audio: missing.wav: no such file"),
        (
            {"turns": [{"say": "hi", "expect": {"answred_within_ms": 3}}]},
            "turns[0].expect: unknown key 'answred_within_ms'",
        ),
        (
            {"turns": [{"say": "hi", "at": 1, "after_reply_end": 0.5}]},
            "turns[0]: one start is needed, not at and after_reply_end",
        ),
        ({"turns": [{"say": "hi", "expect": {"interrupts": {}}}]}, "turns[0].expect.interrupts: within_ms is needed"),
        ({"turns": [{"sound": "sneeze"}]}, "turns[0].sound: no bundled sound 'sneeze'"),
        (
            {"turns": [{"say": "hi", "expect": {"tool": {"arguments": {}}}}]},
            "turns[0].expect.tool: the tool's name is needed",
        ),
    ]
    for data, message in cases:
        with pytest.raises(ScenarioError) as e:
            scenario_from(data, path)
        assert message in str(e.value), (message, str(e.value))
        assert str(e.value).startswith(f"{path}: ")


async def test_a_reply_that_starts_before_the_speech_ends_is_not_an_answer_in_time(sounds):
    turn = {"audio": "paused.wav", "expect": {"answered_within_ms": 1500}}
    result = await run_scenario(scenario(sounds, [turn]), StandIns(["Okay.", "Sure."]), setup())
    (c,) = result.checks
    assert not c.passed and c.figure.startswith("-")
    assert c.message.startswith("a reply started at") and c.message.endswith("before the speech ended at 4.10 s")


async def test_a_room_runs_under_the_conversation_and_what_it_says_must_not_be_answered(sounds):
    # The room: 6 s quiet, then 1 s of "speech" (a tone the stand-in hears as words), looped.
    write_wav(sounds / "room.wav", np.concatenate([silence(6.0), tone(1.0, hz=QUESTION_HZ)]), ASR_RATE)
    turns = [{"audio": "question.wav", "expect": {"heard": "what time"}}]
    top = {"listen_s": 8.0, "expect": {"no_other_replies": True}}
    loud = scenario(sounds, turns, room={"sound": "room.wav", "db": -10}, **top)
    result = await run_scenario(loud, StandIns(["It is noon.", "Still noon."]), setup())
    c = by_name(result)[(None, "no other replies")]
    assert not c.passed and c.message.startswith("answered speech at 6.") and c.message.endswith("that no turn said")
    assert c.figure == '"what time is it"'
    mic = result.recording.person()
    assert np.abs(mic[round(6.2 * ASR_RATE) : round(6.8 * ASR_RATE)]).max() > 0.2  # the room is in the recording

    quiet = scenario(sounds, turns, room={"sound": "room.wav", "db": -60}, **top)
    result = await run_scenario(quiet, StandIns(["It is noon."]), setup())
    assert by_name(result)[(None, "no other replies")].passed


def test_a_room_needs_a_sound_and_one_level(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"turns": [{"say": "hi"}], "room": {"sound": "cough", "at": 1.0, "db": -20}}))
    with pytest.raises(ScenarioError, match=r"room: unknown key 'at'"):
        load_scenario(path)
    path.write_text(yaml.safe_dump({"turns": [{"say": "hi"}], "room": {"sound": "tap"}}))
    with pytest.raises(ScenarioError, match=r"room: sound, and one of snr_db or db, are needed"):
        load_scenario(path)
