"""A call's numbers come from the conversation, or the call was made up (pure).

Offered a calculator, a 0.5B model calls it for things that are not arithmetic, with numbers
nobody said: "100 + 200" for JFK's "ask not what your country can do for you", "5 + 3" for
"What's your favourite number?", ``sqrt(2) * (3 + 4.5)`` (its description's example) for "Which
planet is closest to the sun?" (``docs/bench/answers.md``). A tool that only works on numbers
the person gives it is marked ``grounded`` (``@tool(grounded=True)``; the built-in calculator
is), and a call of it is run only if at least one of its arguments' numbers is one the recent
conversation holds, said in digits or in words ("three and a half", "a hundred and twenty").
Constants of its own (60 minutes, 100 centimetres) are its to add, so one said number is enough.
"""

from __future__ import annotations

import re

from core.faithful import given, numbers_given, numbers_in

UNIT_WORDS = {
    "zero": 0, "oh": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_FRACTIONS = {"half": 0.5, "quarter": 0.25, "third": 1 / 3}
_WORD = re.compile(r"[a-z]+")


def numbers_in_words(text: str) -> list[float]:
    """The numbers ``text`` says in English words, each run of number words read as one number
    ("three hundred and seventy-five" -> 375, "a hundred" -> 100, "three and a half" -> 3.5), and
    each word of a run on its own too ("twenty three" may be two numbers)."""
    found: list[float] = []
    total = current = 0.0
    in_number = False
    words = _WORD.findall(text.lower().replace("-", " "))
    for i, word in enumerate(words):
        follows = words[i + 1] if i + 1 < len(words) else ""
        if word in UNIT_WORDS:
            value = UNIT_WORDS[word]
            if in_number and (current % 10 or (value >= 10 and current % 100)):
                found.append(total + current)  # "four fifty", "two two": a new number begins
                total = current = 0.0
            current += value
            found.append(float(value))
        elif word in _SCALES and (in_number or words[i - 1 : i] in (["a"], ["one"])):
            current = max(current, 1.0) * _SCALES[word]
            if _SCALES[word] >= 1000:
                total, current = total + current, 0.0
            found.append(float(_SCALES[word]))
        elif word in _FRACTIONS and in_number:
            current += _FRACTIONS[word]
        elif word in ("and", "a", "an") and (in_number or follows in _SCALES):
            continue  # "a hundred and five", "three and a half": the run goes on
        else:
            if in_number:
                found.append(total + current)
            total = current = 0.0
            in_number = False
            continue
        in_number = True
    if in_number:
        found.append(total + current)
    return found


# The messages whose numbers a call may use: the person's request, and the turn or result before it
# ("And add four to that." after "12 times 7 is 84").
RECENT_MESSAGES = 4


def recent_texts(messages: list[dict]) -> list[str]:
    """The texts of the conversation's last messages, the system prompt's left out."""
    recent = [m for m in messages if m.get("role") != "system"][-RECENT_MESSAGES:]
    return [m["content"] for m in recent if isinstance(m.get("content"), str)]


def said_numbers(texts: list[str]) -> list[str]:
    """Every number the texts hold, in digits or words, as digits ("3.5", "375")."""
    out: list[str] = []
    for text in texts:
        out += numbers_in(text)
        out += [f"{n:g}" for n in numbers_in_words(text)]
    return out


def made_up(arguments: object, said: list[str]) -> bool:
    """Whether a grounded tool's call holds none of the numbers said (``said``: :func:`said_numbers` of
    the recent conversation). A call with no number at all ("blue + yellow") has none of them."""
    return not any(_is_said(n, said) for n in numbers_given(arguments))


def _is_said(number: str, said: list[str]) -> bool:
    # Said as it is (or rounded to its decimals: core/faithful.py), or "0.15" for "fifteen percent".
    return given(number, said) or ("." in number and any(abs(float(number) * 100 - float(s)) < 1e-9 for s in said))
