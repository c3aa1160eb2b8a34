"""A tool's result read back as the tool gave it (pure).

Asked to say a result, a small model rewrites its numbers: Qwen2.5-Coder-0.5B turned "AAPL last
traded at 187 dollars and 42 cents" into "AAPL last traded at 187.42 cents", an amount off by a
hundred. So each chunk of the answer given with results is checked: a number it states (in
digits) that nothing the model was given holds (the results, its calls' arguments, the person's
words), at the precision it is stated, was made up or misread, and the chunk is replaced by the
result itself, said once ("37.78" is 37.7777... rounded, and stands).
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")


def numbers_in(text: str) -> list[str]:
    """The numbers ``text`` writes in digits, as written ("1,250.5" -> "1250.5")."""
    return _NUMBER.findall(_THOUSANDS.sub("", text))


def numbers_given(value: object) -> list[str]:
    """The numbers in every text of ``value`` (the messages the model was given, a call's arguments, nested
    as they are), and the numbers it holds as numbers (unsigned, as :func:`numbers_in` reads them)."""
    if isinstance(value, str):
        return numbers_in(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return [str(abs(value))]
    if isinstance(value, float):
        return [f"{abs(value):.10f}".rstrip("0").rstrip(".")]
    if isinstance(value, dict):
        return [n for v in value.values() for n in numbers_given(v)]
    if isinstance(value, list | tuple):
        return [n for v in value for n in numbers_given(v)]
    return []


def given(number: str, known: list[str]) -> bool:
    """Whether ``number`` is one of ``known`` as stated: equal, or one of them rounded to its decimals."""
    places = len(number.partition(".")[2])
    value = float(number)
    return any(abs(round(float(k), places) - value) < 1e-9 for k in known)


def misread(chunk: str, known: list[str]) -> bool:
    """Whether ``chunk`` states a number that none of ``known`` (the numbers it was given) is."""
    return any(not given(n, known) for n in numbers_in(chunk))


def read_back(chunks: list[str], known: list[str], result: str, said: bool) -> tuple[list[str], bool]:
    """``chunks`` of an answer given with results, those that misread a number replaced by
    ``result`` (the last result that came back), said once (``said``: already). Returns the chunks
    to say and whether the result has been said."""
    out: list[str] = []
    for chunk in chunks:
        if not misread(chunk, known):
            out.append(chunk)
        elif not said:
            out.append(result)
            said = True
    return out, said
