"""A grounded tool's call uses a number the conversation holds, or it was made up (core/grounded.py)."""

from __future__ import annotations

import pytest

from core.grounded import made_up, numbers_in_words, recent_texts, said_numbers


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("three hundred and seventy-five", 375),
        ("How many minutes are there in three and a half hours?", 3.5),
        ("a bill of a hundred and twenty-four fifty", 124),
        ("a bill of a hundred and twenty-four fifty", 50),
        ("one thousand two hundred and five", 1205),
        ("forty-five twelve", 12),
    ],
)
def test_numbers_said_in_words_are_read_as_numbers(text, number):
    assert number in numbers_in_words(text)


def test_a_call_with_a_number_said_runs_one_with_none_of_them_was_made_up():
    said = said_numbers(["How many minutes are there in three and a half hours?"])
    assert not made_up({"expression": "3.5 * 60"}, said)  # its own constant, with the person's number
    assert made_up({"expression": "100 + 200"}, said_numbers(["Ask not what your country can do for you."]))
    assert made_up({"expression": "blue + yellow"}, said_numbers(["Mix blue and yellow."]))
    assert not made_up({"expression": "0.15 * 80"}, said_numbers(["What's fifteen percent of eighty?"]))
    assert not made_up({"minutes": 10}, said_numbers(["Set a timer for 10 minutes."]))


def test_a_follow_up_may_use_the_number_of_the_reply_before_it():
    messages = [
        {"role": "system", "content": "You are 42 years old."},  # not the conversation's
        {"role": "user", "content": "What's twelve times seven?"},
        {"role": "assistant", "content": "It is 84."},
        {"role": "user", "content": "And add four to that."},
    ]
    said = said_numbers(recent_texts(messages))
    assert not made_up({"expression": "84 + 4"}, said)
    assert made_up({"expression": "42 + 1"}, said)
