"""The answers benchmark's requests (voice/bench/answer_requests.py): well formed, and scored as meant."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from shell.tools.builtin import get_current_time
from voice.bench.answer_requests import (
    CATEGORIES,
    REQUESTS,
    TOOL_RESULT,
    Expected,
    ToolWanted,
    Turn,
    score_facts,
    score_tool,
    states,
)

ROOT = Path(__file__).resolve().parents[2]
BY_ID = {r.id: r for r in REQUESTS}
NOW = get_current_time(SimpleNamespace(now=lambda: datetime(2026, 12, 5, 14, 3, tzinfo=UTC)))


def test_the_set_is_well_formed():
    assert len(REQUESTS) >= 64
    assert len(BY_ID) == len(REQUESTS), "ids are unique"
    assert all(re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*", r.id) for r in REQUESTS)
    assert {r.category for r in REQUESTS} == set(CATEGORIES)
    assert all(r.turns for r in REQUESTS)
    assert all(set(r.needs) <= {"builtin", "mcp:shop"} for r in REQUESTS)


def test_every_regex_compiles():
    for request in REQUESTS:
        for turn in request.turns:
            if turn.expect is None:
                continue
            assert turn.expect.forms, request.id
            for pattern in turn.expect.forms + turn.expect.none_of:
                re.compile(pattern.removeprefix(TOOL_RESULT), re.IGNORECASE)


def test_a_wanted_tool_is_offered():
    """A request that wants a tool called needs the set that holds it."""
    sets = {"calculate": "builtin", "set_timer": "builtin", "get_current_time": "builtin"}
    for request in REQUESTS:
        for turn in request.turns:
            if turn.tool is not None and turn.tool.name is not None:
                assert sets.get(turn.tool.name, "mcp:shop") in request.needs, request.id


def test_what_the_person_says_names_no_tool():
    for request in REQUESTS:
        for turn in request.turns:
            for name in ("calculate", "get_current_time", "get_order_status", "get_store_hours", "end_conversation"):
                assert name not in turn.say.lower()


def test_recordings_are_named_where_they_are():
    real = [r for r in REQUESTS if r.category == "real_voice"]
    assert len(real) >= 4
    for request in real:
        recording = request.turns[0].recording
        assert recording is not None and recording.endswith(".wav")
        if not recording.startswith("../"):  # one lives only in ../shared, outside the repository
            assert (ROOT / recording).is_file(), recording


# (request id, a right reply, a wrong reply): the last turn's
ANSWERS = [
    ("spider_legs", "A spider has eight legs.", "Spiders have six legs."),
    ("gold_symbol", "The chemical symbol for gold is Au.", "It's Ag."),
    ("leap_year_days", "A leap year has 366 days.", "There are 365 days in a year."),
    ("twelve_times_seven", "Twelve times seven is eighty-four.", "That's 74."),
    ("fahrenheit_to_celsius", "A hundred degrees Fahrenheit is about 37.8 degrees Celsius.", "That's 212 Celsius."),
    ("split_the_bill", "Each of you pays $41.50.", "Each of you pays 42 dollars."),
    ("miles_to_kilometres", "Ten miles is about 16.1 kilometres.", "Ten miles is about 6.2 kilometres."),
    ("timer_ten_minutes", "Okay, your ten-minute timer is running.", "Timer set for one minute."),
    ("remind_ninety_seconds", "Sure, I'll remind you in a minute and a half.", "I'll remind you in 9 seconds."),
    ("order_4512", "Your order shipped on Monday and arrives tomorrow before noon.", "It's being packed."),
    ("order_unknown", "Sorry, I couldn’t find an order 2203.", "It shipped on Monday and arrives tomorrow."),
    ("opens_saturday", "On Saturday the shop opens at 9 am.", "It opens at 10 in the morning."),
    ("nine_times_corrected", "Nine times seven is 63.", "Nine times six is 54, and nine times seven is 63."),
    ("meant_times_four", "Twenty times four is eighty.", "That's still sixty."),
    ("timer_make_it_ten", "Done, ten minutes it is.", "Your timer is set for five minutes."),
    ("capital_japan_ja", "日本の首都は東京です。", "日本の首都は大阪です。"),
    ("days_in_week_fr", "Il y a sept jours dans une semaine.", "Il y a six jours, en septembre."),
]


@pytest.mark.parametrize(("request_id", "right", "wrong"), ANSWERS)
def test_a_right_reply_holds_and_a_wrong_one_does_not(request_id, right, wrong):
    expect = BY_ID[request_id].turns[-1].expect
    assert expect is not None
    assert expect.holds(right)
    assert not expect.holds(wrong)


def test_score_facts_scores_each_turn():
    request = BY_ID["times_then_add"]
    assert score_facts(request, ["Fifty-six.", "That makes 60."], [None, None]) == [True, True]
    assert score_facts(request, ["56", "58"], [None, None]) == [True, False]
    assert score_facts(request, ["56"], [None]) == [True, False], "a missing reply is silence"
    assert score_facts(BY_ID["joke_cats"], ["Why did the cat..."], [None]) == [None]


def test_the_time_is_what_the_tool_returned():
    assert NOW == "Saturday, 05 December 2026, 14:03 (UTC, UTC+0000)"
    time_now, date_today, weekday = (BY_ID[i] for i in ("time_now", "date_today", "day_of_week"))
    for reply in ("It's 2:03 pm.", "It's 14:03.", "It's three minutes past two.", "It's two oh three."):
        assert score_facts(time_now, [reply], [NOW]) == [True], reply
    for reply in ("It's 2:30.", "It's 3 pm.", "It's Saturday."):
        assert score_facts(time_now, [reply], [NOW]) == [False], reply
    assert score_facts(time_now, ["It's 2:03 pm."], [None]) == [False], "no result: nothing to state"
    for reply in ("Today is December 5th.", "It's the fifth of December, 2026.", "Saturday, 5 December."):
        assert score_facts(date_today, [reply], [NOW]) == [True], reply
    assert score_facts(date_today, ["It's December 6th."], [NOW]) == [False]
    assert score_facts(weekday, ["It's Saturday."], [NOW]) == [True]
    assert score_facts(weekday, ["It's Friday."], [NOW]) == [False]


def test_a_whole_tool_result_is_stated_by_most_of_its_tokens():
    result = "Order 4512 was shipped on Monday and arrives tomorrow before noon."
    assert states("Your order 4512 shipped on Monday and will arrive tomorrow before noon.", result)
    assert states("Order forty-five twelve? It's 4512: it arrives tomorrow.", "4512 arrives 12")  # all numbers
    assert not states("Your order is on its way.", result)
    assert states("It's 2:03 on Saturday, December the fifth, 2026.", NOW)
    assert not states("It's two.", NOW)
    assert Expected(forms=(TOOL_RESULT,)).holds("It shipped Monday and arrives tomorrow before noon.", result)


def _call(name, **arguments):
    return (name, arguments)


def test_score_tool():
    assert score_tool(Turn("Hi.", None, None), [_call("calculate", expression="1+1")]) is None
    joke = BY_ID["joke_cats"].turns[0]
    assert score_tool(joke, []) is True
    assert score_tool(joke, [_call("get_current_time")]) is False
    assert score_tool(joke, [_call("end_conversation")]) is False

    times = BY_ID["twelve_times_seven"].turns[0]
    assert score_tool(times, [_call("calculate", expression="12 * 7")]) is True
    assert score_tool(times, [_call("calculate", expression="12 * 6")]) is False
    assert score_tool(times, []) is False
    assert score_tool(times, [_call("calculate", expression="12*7"), _call("end_conversation")]) is False
    assert score_tool(times, [_call("calculate", expr="12*7")]) is False, "arguments it cannot read"

    celsius = BY_ID["fahrenheit_to_celsius"].turns[0]
    assert score_tool(celsius, [_call("calculate", expression="(100 - 32) / 1.8")]) is True
    assert score_tool(celsius, [_call("calculate", expression="round((100 - 32) * 5 / 9, 1)")]) is True
    assert score_tool(celsius, [_call("calculate", expression="100 - 32")]) is False

    corrected = BY_ID["timer_three_no_four"].turns[0]
    assert score_tool(corrected, [_call("set_timer", minutes=4)]) is True
    assert score_tool(corrected, [_call("set_timer", seconds=240)]) is True
    assert score_tool(corrected, [_call("set_timer", minutes=3), _call("set_timer", minutes=4)]) is False

    order = BY_ID["order_arrival"].turns[0]
    assert score_tool(order, [_call("get_order_status", order_id="45 12")]) is True
    assert score_tool(order, [_call("get_order_status", order_id="4521")]) is False
    hours = BY_ID["opens_saturday"].turns[0]
    assert score_tool(hours, [_call("get_store_hours", day="Saturday")]) is True
    assert score_tool(hours, [_call("get_store_hours", day="Sunday")]) is False

    now = BY_ID["time_now"].turns[0]
    assert score_tool(now, [_call("get_current_time")]) is True
    assert score_tool(Turn("?", None, ToolWanted("get_current_time")), [_call("calculate", expression="1")]) is False
