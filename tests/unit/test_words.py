"""The one tokenizer of the turn-taking rules (core/words.py)."""

from __future__ import annotations

import re

from core.words import join_words, spoken_units, words

TEXTS = ["Uh-huh, yeah.", "Call 555 12", "twenty-one", "forty-two line Bible", "it's 3.5 -- ok-", "Covid-19 A-ok", ""]


def test_the_barge_in_reads_hyphenated_words_whole_and_no_digits():
    assert words("Uh-huh, STOP it!", numbers=False) == ["uh-huh", "stop", "it"]
    assert words("Call 555 12", numbers=False) == ["call"]


def test_end_of_turn_reads_numbers_and_the_parts_of_hyphenated_words():
    assert words("I'm twenty-one and 25", compounds=False) == ["i'm", "twenty", "one", "and", "25"]


def test_the_words_are_those_each_rule_read_before_issue_31():
    for text in TEXTS:
        assert words(text, numbers=False) == re.findall(r"[a-z']+(?:-[a-z']+)*", text.lower())
        assert words(text, compounds=False) == re.findall(r"[a-z0-9']+", text.lower())
        assert [p for w in words(text) for p in w.split("-")] == words(text, compounds=False)


def test_speech_is_timed_by_the_word_where_words_are_spaced_and_by_the_character_where_not():
    assert spoken_units("Hola, ¿qué tal?") == ["Hola,", "¿qué", "tal?"]
    assert spoken_units("「はい」、AIです。") == ["「", "は", "い」、", "AI", "で", "す。"]
    for text in ("東京は日本の首都です。人口は多い。", "「はい」と言った。", "Hola, ¿qué tal?"):
        assert join_words(spoken_units(text)) == text
