"""The rubric of the answers benchmark (``python -m voice.bench answers``): what a request is, and how its
replies are scored without a person.

A reply must match one of a turn's accepted forms, and none of its wrong ones (case-insensitive regular
expressions accepting digits and words: "84", "eighty-four"), since a reply is scored as text before it is
spoken. The tool decisions: the right tool with arguments that mean the right thing, or no tool when none is
needed. Requests whose right answer depends on a tool's result (the time, the date) accept :data:`TOOL_RESULT`:
the reply must state what the tool returned, checked on its key tokens (:func:`states`). Open requests (a joke,
small talk) have no :class:`Expected`: they are judged for sense and form only. Pure, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A form meaning "what the tool returned, said in the reply". Alone: the whole result. Followed by a
# regular expression: only the first part of the result it matches (the time of a date-and-time).
TOOL_RESULT = "<tool result>"

CATEGORIES = (
    "everyday",
    "arithmetic",
    "time",
    "shop",
    "no_tool",
    "follow_up",
    "correction",
    "language",
    "real_voice",
)


@dataclass(frozen=True)
class Expected:
    """What one reply must say to be right: any one of ``forms``, and none of ``none_of`` (a wrong number said
    alongside). Both are case-insensitive regular expressions."""

    forms: tuple[str, ...]
    none_of: tuple[str, ...] = ()

    def holds(self, reply: str, tool_result: str | None = None) -> bool:
        """Whether ``reply`` is right. A :data:`TOOL_RESULT` form holds when the reply states ``tool_result``
        (never without one)."""
        reply = _plain(reply)
        if any(re.search(wrong, reply, re.IGNORECASE) for wrong in self.none_of):
            return False
        for form in self.forms:
            if form.startswith(TOOL_RESULT):
                if tool_result is not None and states(reply, tool_result, form[len(TOOL_RESULT) :]):
                    return True
            elif re.search(form, reply, re.IGNORECASE):
                return True
        return False


@dataclass(frozen=True)
class ToolWanted:
    """The tool a turn must call (``name``; None: no call at all) and what its arguments must mean
    (``arguments``; None: anything)."""

    name: str | None
    arguments: Callable[[dict[str, Any]], bool] | None = None


@dataclass(frozen=True)
class Turn:
    """What the person says, and what the reply to it must hold (``expect``; None: open, judged only for sense
    and form) and call (``tool``; None: not scored for tools). ``recording``: a real person's recording of
    ``say`` (a path from the repository root), played instead of synthesised speech."""

    say: str
    expect: Expected | None
    tool: ToolWanted | None
    recording: str | None = None


@dataclass(frozen=True)
class Request:
    """One conversation to score: one turn usually, two or three for a follow-up or a correction (only the last
    answer depends on the earlier ones, but every turn may be scored). ``needs``: the tool sets that must be
    offered for it to be answerable ("builtin", "mcp:shop")."""

    id: str
    category: str
    turns: tuple[Turn, ...]
    language: str = "en"
    needs: tuple[str, ...] = ()
    note: str = ""


NO_TOOL = ToolWanted(None, None)
BUILTIN = ("builtin",)
SHOP = ("builtin", "mcp:shop")


def _n(digits: str, words: str) -> str:
    """A number said either way: its digits as a whole number, or its words (a regular expression)."""
    return rf"(?<![\d.,]){digits}(?![\d]|[.,]\d)|\b(?:{words})\b"


def _said(*forms: str, none_of: tuple[str, ...] = ()) -> Expected:
    return Expected(forms=forms, none_of=none_of)


def _minutes(digits: str, words: str) -> str:
    """A duration in minutes, confirmed: "10 minutes", "ten-minute", "10 min"."""
    return rf"(?:(?<![\d.,]){digits}|\b(?:{words}))[- ]?min"


def _near(value: float, within: float) -> Callable[[dict[str, Any]], bool]:
    """A calculation whose result is ``value`` give or take ``within`` (a unit conversion rounds its factor)."""

    def check(a: dict[str, Any]) -> bool:
        from shell.tools.builtin import calculate

        try:
            return abs(float(calculate(a["expression"])) - value) <= within
        except Exception:
            return False

    return check


def _order(number: str) -> Callable[[dict[str, Any]], bool]:
    """The order the shop looks up: it reads only the digits of what it is given (tests/fixtures/mcp/shop_server.py)."""
    return lambda a: "".join(c for c in str(a.get("order_id", "")) if c.isdigit()) == number


def _day(day: str) -> Callable[[dict[str, Any]], bool]:
    """The day asked about, however written ("Saturday", "sat")."""
    return lambda a: str(a.get("day", "")).strip().lower()[:3] == day[:3]


def _one(
    id: str,
    category: str,
    say: str,
    expect: Expected | None,
    tool: ToolWanted | None,
    *,
    language: str = "en",
    needs: tuple[str, ...] = (),
    recording: str | None = None,
    note: str = "",
) -> Request:
    return Request(id, category, (Turn(say, expect, tool, recording),), language, needs, note)


# What tests/fixtures/mcp/shop_server.py returns: 4512 "was shipped on Monday and arrives tomorrow before noon",
# 1007 "is being packed and ships today", any other "There is no order N."; every day 9 am to 6 pm.
_ORDER_4512 = _said(r"tomorrow", r"\bshipped\b|on (?:its|the) way", none_of=(r"being packed|ships today",))
_ORDER_1007 = _said(r"pack", r"\btoday\b", none_of=(r"tomorrow|before noon|was shipped",))
_NO_ORDER = (
    r"no order|no record|no such|(?:can't|cannot|can not|couldn't|could not|unable to|didn't|did not) find"
    r"|(?:doesn't|does not|don't|do not) (?:seem to )?(?:exist|have)|not (?:be )?found|isn't (?:an|any) order"
)


def score_facts(request: Request, replies: list[str], tool_results: list[str | None]) -> list[bool | None]:
    """Per turn, whether its reply holds the turn's :class:`Expected` (None where it has none). ``replies`` and
    ``tool_results`` hold one entry per turn (the tool result's text, None where no tool was called); missing
    ones count as silence and no result."""
    scores: list[bool | None] = []
    for i, turn in enumerate(request.turns):
        if turn.expect is None:
            scores.append(None)
            continue
        reply = replies[i] if i < len(replies) else ""
        result = tool_results[i] if i < len(tool_results) else None
        scores.append(turn.expect.holds(reply, result))
    return scores


def score_tool(turn: Turn, calls: list[tuple[str, dict[str, Any]]]) -> bool | None:
    """Whether the calls made in a turn (name, arguments) are the right ones: none when no tool is wanted;
    else at least one, every one of the wanted tool with arguments meeting its check (a second timer, a
    retracted number worked out, a hang-up nobody asked for are all wrong). None where ``turn.tool`` is None."""
    wanted = turn.tool
    if wanted is None:
        return None
    if wanted.name is None:
        return not calls
    if not calls or any(name != wanted.name for name, _ in calls):
        return False
    if wanted.arguments is None:
        return True
    return all(_meets(wanted.arguments, arguments) for _, arguments in calls)


def _meets(check: Callable[[dict[str, Any]], bool], arguments: dict[str, Any]) -> bool:
    """A check that cannot read the arguments (a string where a number was due) is not met."""
    try:
        return bool(check(arguments))
    except Exception:
        return False


def states(reply: str, result: str, part: str = "") -> bool:
    """Whether ``reply`` states a tool's ``result`` (or the first part of it that the regular expression ``part``
    matches): at least 60% of its key tokens (numbers, and words of 3 letters or more) are in the reply, or all
    its numbers are. Numbers count however said ("6", "06", "six", "sixth"); a clock time's hour in 12-hour form
    too, and its ":00" need not be said ("two o'clock")."""
    if part:
        found = re.search(part, result, re.IGNORECASE)
        if found is None:
            return False
        result = found.group(0)
    numbers, words = _key_tokens(result)
    if not numbers and not words:
        return False
    said_numbers = _numbers(reply)
    said_stems = {w[:5] for w in re.findall(r"[^\W\d_]+", reply.lower())}
    numbers_said = sum(1 for alternatives in numbers if alternatives & said_numbers)
    words_said = sum(1 for w in words if w[:5] in said_stems)
    if numbers and numbers_said == len(numbers):
        return True
    return numbers_said + words_said >= 0.6 * (len(numbers) + len(words))


def _key_tokens(result: str) -> tuple[set[frozenset[int]], set[str]]:
    """A result's numbers (each the values that say it) and its words of 3 letters or more."""
    numbers: set[frozenset[int]] = set()

    def clock(m: re.Match[str]) -> str:
        hour, minute = int(m[1]), int(m[2])
        numbers.add(frozenset({hour, hour % 12 or 12}))
        if minute:
            numbers.add(frozenset({minute}))
        return " "

    rest = re.sub(r"\b(\d{1,2}):(\d\d)\b", clock, result)
    numbers.update(frozenset({int(d)}) for d in re.findall(r"\d+", rest))
    return numbers, set(re.findall(r"[^\W\d_]{3,}", rest.lower()))


# Word lists read best as words (as in core/sentences.py).
_UNITS = (  # noqa: SIM905
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen"
    " eighteen nineteen"
).split()
_ORDINAL_UNITS = (  # noqa: SIM905
    "zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth"
    " fifteenth sixteenth seventeenth eighteenth nineteenth"
).split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()  # noqa: SIM905
_ORDINAL_TENS = "twentieth thirtieth fortieth fiftieth sixtieth seventieth eightieth ninetieth".split()  # noqa: SIM905
_NUMBER_WORDS = {
    "oh": 0,
    **{w: i for i, w in enumerate(_UNITS)},
    **{w: i for i, w in enumerate(_ORDINAL_UNITS)},
    **{w: 20 + 10 * i for i, w in enumerate(_TENS)},
    **{w: 20 + 10 * i for i, w in enumerate(_ORDINAL_TENS)},
}


def _numbers(text: str) -> set[int]:
    """The numbers a text says, in digits or words ("twenty-six", "one hundred and five", "two oh three": 2, 0,
    3); a compound counts as itself and as its parts."""
    found = {int(d) for d in re.findall(r"\d+", text)}
    run: int | None = None
    for word in re.findall(r"[^\W\d_]+", text.lower()):
        value = _NUMBER_WORDS.get(word)
        if value is None:
            if word == "hundred" and run is not None:
                run *= 100
                found.add(run)
            elif not (word == "and" and run is not None and run >= 100):
                run = None
            continue
        tens = run is not None and run % 100 >= 20 and run % 10 == 0 and value < 10
        after_hundred = run is not None and run >= 100 and run % 100 == 0 and value < 100
        run = run + value if run is not None and (tens or after_hundred) else value
        found.update((value, run))
    return found


def _plain(reply: str) -> str:
    """Typographic apostrophes and dashes as typed ones, so that the forms need only one spelling."""
    return reply.replace("\u2019", "'").replace("\u2018", "'").replace("\u2013", "-").replace("\u2011", "-")
