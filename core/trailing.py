"""Whether the words of a pause trail off where a sentence goes on (pure).

The end of the turn (``core/end_of_turn.py``) weighs the end-of-turn model's answer down when the
transcript of the pause stops on a conjunction, an article, a filler (each language's
``continuation_words``) or in a number being dictated.
"""

from __future__ import annotations

from core.language import ENGLISH, Language
from core.words import letters, words

NUMBER_WORDS = frozenset(
    [
        "zero",
        "oh",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "sixty",
        "seventy",
        "eighty",
        "ninety",
        "hundred",
        "thousand",
    ]
)


def _is_number(word: str) -> bool:
    return word in NUMBER_WORDS or word.isdigit()


def trails_off(text: str, language: Language = ENGLISH) -> bool:
    """Whether ``text`` stops where a sentence goes on: on one of ``language``'s continuation
    words, or in a number being dictated (at least two number tokens in a row at the end: "555
    12", "five five", "twenty one"; a single one, "I'm 25", "in 1961", is left alone). Where
    words are not spaced, on the characters of a continuation word ("行きたいけど")."""
    if not language.spaced:
        said = letters(text)
        return any(said.endswith(w) for w in language.continuation_words)
    said = words(text, compounds=False)  # "twenty-one": two number words
    if not said:
        return False
    return said[-1] in language.continuation_words or (len(said) > 1 and _is_number(said[-1]) and _is_number(said[-2]))
