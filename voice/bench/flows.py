"""Agents as flows (issue 46): the restaurant's booking line on spoken callers, and what a step's
transition costs the reply (``python -m voice.bench flows``).

Each of the 21 variants is a caller who books a table at Luigi's (``agents/restaurant.yaml``),
said by a voice that is not the assistant's, on the real engines and virtual time: other
phrasings, fillers, a correction at the read-back, everything said at once, numbers in digits and
in words and keyed on the phone's keypad, interruptions of the read-back. A caller answers what
the line asks (a scenario ``caller:``, voice/scenario/caller.py) and corrects a read-back that
lacks what they want, as a person would. It counts the callers that end with the right booking
(the booking tool called, the call ended, the name, party, day and time in the state) and the
turns it took. A reply's voice-to-voice (the end of the speech to its first sample, virtual time)
is grouped by whether the reply entered a step, so the transition's cost is read beside the turns
without one.
``--context``: every step's context set to one choice (all, none, summary, a number of turns), to
read what a transition costs with each; ``--llm-model``: the line on another bundled model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.events import Collected, PlaybackStart, ResponseStart, SpeechEnd, StepEntered, ToolCallStart
from core.grounded import UNIT_WORDS
from voice.bench.common import nearest_rank
from voice.scenario.caller import holds
from voice.scenario.runner import LoadedEngines, ScenarioResult, run_scenario
from voice.scenario.spec import Answer, Caller, Cue, Keys, Line, Person, Scenario, ScenarioError, Turn

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "agents" / "restaurant.yaml"


@dataclass(frozen=True)
class Variant:
    """A caller who wants a table: how they open, how they answer each of the line's questions
    (the name, the party, the day, the time; the name asked again is said in a sentence), how
    they say yes to the read-back, and the booking they want (each value as the state must hold
    it, case ignored).
    A read-back that lacks one of the wanted values is corrected (``fix``: what they say then);
    ``over``: said 1 s into the first read-back, over it."""

    name: str
    opening: tuple[str, ...]
    answers: tuple[str, Line, str, str]  # to the name, the party (said, or keyed), the day, the time
    yes: str
    booking: dict[str, str]
    fix: dict[str, str] = field(default_factory=dict)
    over: str | None = None

    @property
    def wanted(self) -> dict[str, str]:
        """What the state must hold at the end (case ignored)."""
        return {k: self.booking[k] for k in WANTED}

    def caller(self) -> Caller:
        """The caller who answers what the line asks, by the words of its questions."""
        name, party, date, time = self.answers
        again = f"The name is {self.booking['Name']}."  # asked again, said in a sentence
        answers = [Answer(NAME_Q, (name, again)), Answer(PARTY_Q, (party,)), Answer(DAY_Q, (date,))]
        answers.append(Answer(TIME_Q, (time,)))
        answers.append(Answer(GREETING_Q, self.opening[-1:]))
        # After the questions: the line's "Under what name shall I book it?" asks the name.
        wanted = {k: self.fix.get(k) or FIXES[k].format(**self.booking) for k in WANTED}
        unless = tuple((HEARD[k].format(**self.booking), line) for k, line in wanted.items())
        answers.append(Answer(CONFIRM_Q, (self.yes,), unless))
        if self.over is not None:
            answers.append(Answer(READBACK_Q, (self.over,), over_s=1.0))
        return Caller(tuple(answers), max_turns=MAX_TURNS)


# What the line's questions (the flow's own, or the model's words for them) hold.
NAME_Q = ("what name", "which name", "your name")
PARTY_Q = ("how many",)
DAY_Q = ("which day", "what day", "which date", "what date")
TIME_Q = ("what time", "which time")
CONFIRM_Q = ("shall i book", "should i book")
READBACK_Q = ("a table for",)
GREETING_Q = ("how can i help",)
# What a read-back must hold for the caller to say yes, and what they say when it does not.
NUMBER_WORDS = {str(n): w for w, n in UNIT_WORDS.items() if w != "oh"}  # "4": "four"
HEARD = {"name": "{name}", "party_size": "{party_size}|{party_words}", "date": "{date}", "time": "{time}"}
FIXES = {
    "name": "No, the name is {Name}.",
    "party_size": "No, for {party_words} people.",
    "date": "No, {Date}.",
    "time": "No, {time_said}.",
}
MAX_TURNS = 12  # a caller gives up after this many turns
WANTED = ("name", "party_size", "date", "time")  # what the booking must hold


def booking(name: str, party_size: int, date: str, time: tuple[str, str]) -> dict[str, str]:
    """The booking a caller wants, with the words a read-back may say it in. ``time``: the ways
    the time may be written (``|`` between them), and how the caller says it in a correction."""
    size = str(party_size)
    return {
        "name": name.lower(),
        "Name": name,
        "party_size": size,
        "party_words": NUMBER_WORDS[size],
        "date": date.lower(),
        "Date": date,
        "time": time[0],
        "time_said": time[1],
    }


EIGHT = ("8|eight", "at eight")
SEVEN = ("7|seven", "at seven")
HALF_PAST_EIGHT = ("half past eight|half past 8|8:30|8 30", "at half past eight")


ROSSI = booking("Rossi", 4, "Friday", EIGHT)
VARIANTS = (
    Variant(
        "plain",
        ("I'd like to book a table, please.",),
        ("Rossi.", "Four.", "Friday.", "At eight."),
        "Yes.",
        ROSSI,
    ),
    Variant(
        "sentences",
        ("Hi, can I book a table?",),
        ("The name is Rossi.", "For four people.", "This Friday.", "Eight in the evening."),
        "Yes please.",
        ROSSI,
    ),
    Variant(
        "reservation",
        ("I want to make a reservation.",),
        ("It's Chen.", "Two of us.", "Tomorrow.", "Seven o'clock."),
        "Sounds good.",
        booking("Chen", 2, "Tomorrow", SEVEN),
    ),
    Variant(
        "digits",
        ("Table for 6 please.",),
        ("Garcia.", "6.", "Saturday.", "At 9."),
        "Yes.",
        booking("Garcia", 6, "Saturday", ("9|nine", "at nine")),
    ),
    Variant(
        "correction",
        ("I'd like to book a table.",),
        ("Rossi.", "Four.", "Friday.", "At eight."),
        "Yes.",
        booking("Rossi", 5, "Friday", EIGHT),
        fix={"party_size": "No, make it five people."},
    ),
    Variant(
        "interrupted read-back",
        ("Book a table, please.",),
        ("Rossi.", "Four.", "Friday.", "At eight."),
        "Yes.",
        booking("Rossi", 3, "Friday", EIGHT),
        over="Actually, make it three people.",
    ),
    Variant(
        "names",
        ("Could I reserve a table?",),
        ("Under Patel.", "Three.", "Next Monday.", "Half past seven."),
        "Perfect.",
        booking("Patel", 3, "Monday", ("half past seven|half past 7|7:30|7 30", "at half past seven")),
    ),
    Variant(
        "short",
        ("Table please.",),
        ("Kim.", "Two.", "Today.", "Six."),
        "Go ahead.",
        booking("Kim", 2, "Today", ("6|six", "at six")),
    ),
    Variant(
        "polite",
        ("Good evening, I'd like to reserve a table for dinner.",),
        ("My name is Johnson.", "There will be four of us.", "On Saturday.", "At seven thirty."),
        "Yes, that's right.",
        booking("Johnson", 4, "Saturday", ("seven thirty|7:30|7 30|730|half past seven", "at seven thirty")),
    ),
    Variant(
        "all at once",
        ("Hi, a table for two this Friday at eight, please. The name is Rossi.",),
        ("Rossi.", "Two.", "Friday.", "At eight."),
        "Yes, please.",
        booking("Rossi", 2, "Friday", EIGHT),
    ),
    Variant(
        "name first",
        ("Hello, this is Maria Lopez, I'd like to book a table.",),
        ("Maria Lopez.", "Three people.", "Tomorrow.", "At half past eight."),
        "Yes.",
        booking("Lopez", 3, "Tomorrow", HALF_PAST_EIGHT),
    ),
    Variant(
        "tonight",
        ("Can I book a table for tonight?",),
        ("Brown.", "We are a party of eight.", "Tonight.", "Half past eight."),
        "Yes, book it.",
        booking("Brown", 8, "Tonight", HALF_PAST_EIGHT),
    ),
    Variant(
        "day corrected",
        ("I'd like to book a table.",),
        ("The name is Smith.", "Two people.", "Thursday.", "At seven."),
        "Yes.",
        booking("Smith", 2, "Friday", SEVEN),
        fix={"date": "Sorry, make it Friday."},
    ),
    Variant(
        "fillers",
        ("Um, hi, yes, I wanted to book a table.",),
        ("Uh, it's Wilson.", "Um, four.", "Friday, please.", "Around eight."),
        "Yes, thanks.",
        booking("Wilson", 4, "Friday", EIGHT),
    ),
    Variant(
        "party in digits",
        ("Table for 2, please.",),
        ("Taylor.", "2.", "Sunday.", "At 1 pm."),
        "Yes.",
        booking("Taylor", 2, "Sunday", ("1|one", "at one pm")),
    ),
    Variant(
        "wait four",
        ("I'd like a table, please.",),
        ("Anderson.", "Five.", "Saturday.", "At eight."),
        "Yes.",
        booking("Anderson", 4, "Saturday", EIGHT),
        over="Wait, four people.",
    ),
    Variant(
        "group",
        ("Do you take bookings for a group?",),
        ("Martin.", "Twelve people.", "Next Friday.", "At seven."),
        "Great.",
        booking("Martin", 12, "Friday", SEVEN),
    ),
    Variant(
        "sure",
        ("I need a table.",),
        ("Davis.", "Three.", "Wednesday.", "At six."),
        "Sure, go ahead.",
        booking("Davis", 3, "Wednesday", ("6|six", "at six")),
    ),
    Variant(
        "keyed party",
        ("I'd like to book a table.",),
        ("Lee.", Keys("3#"), "Saturday.", "At seven."),
        "Yes.",
        booking("Lee", 3, "Saturday", SEVEN),
    ),
    Variant(
        "quarter to",
        ("Could I book a table for Thursday?",),
        ("Clark.", "Two.", "Thursday.", "At a quarter to nine."),
        "That's perfect.",
        booking("Clark", 2, "Thursday", ("quarter to nine|quarter to 9|8:45|8 45", "at a quarter to nine")),
    ),
    Variant(
        "tomorrow night",
        ("Hi there, I'd like to make a booking for tomorrow night.",),
        ("The name's Evans.", "Six of us.", "Tomorrow.", "Eight o'clock."),
        "Yes, please do.",
        booking("Evans", 6, "Tomorrow", EIGHT),
    ),
)


def scenario_of(v: Variant, agent: Path = AGENT, llm_model: str | None = None) -> Scenario:
    """Caller ``v`` on the line ``agent`` (``llm_model``: the model it runs on; None: the default)."""
    first = Cue("after_reply_end", 0.3)  # after the greeting
    turns = tuple(Turn(text=text, cue=first if i == 0 else None) for i, text in enumerate(v.opening))
    return Scenario(
        name=v.name,
        path=ROOT / "voice" / "bench" / f"{v.name}.flows",
        agent={"agent": str(agent), **({"llm_model": llm_model} if llm_model else {})},
        call=False,
        person=Person(),
        turns=turns,
        caller=v.caller(),
    )


def figures(v: Variant, result: ScenarioResult) -> dict[str, Any]:
    """One variant's outcome: the state collected, whether the booking was made with it, the turns,
    and each reply's voice-to-voice with whether it entered a step."""
    events = result.observed.events
    state: dict[str, Any] = {}
    for e in events:
        if isinstance(e, Collected):
            state.update(e.values)
    booked = [e for e in events if isinstance(e, ToolCallStart) and e.name == "book_table"]
    right = all(holds(str(state.get(k, "")), want) for k, want in v.wanted.items())
    ends = {e.utterance: e.t for e in events if isinstance(e, SpeechEnd)}
    first = {}
    for e in events:
        if isinstance(e, PlaybackStart) and e.response not in first:
            first[e.response] = e.t
    moved = {e.response for e in events if isinstance(e, StepEntered) and e.response}
    replies = []
    for e in events:
        if isinstance(e, ResponseStart) and e.utterance in ends and e.response in first:
            v2v = (first[e.response] - ends[e.utterance]) * 1000
            replies.append({"response": e.response, "v2v_ms": round(v2v, 1), "transition": e.response in moved})
    return {
        "variant": v.name,
        "booked_right": bool(booked) and right and result.observed.ended,
        "booked": bool(booked),
        "state": state,
        "wanted": v.wanted,
        "ended": result.observed.ended,
        "turns": len(result.observed.placed),
        "said": result.observed.said,
        "replies": replies,
        "transcript": [(t["role"], t["text"]) for t in result.observed.transcript if t["role"] != "tool"],
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    with_step = [r["v2v_ms"] for row in rows for r in row["replies"] if r["transition"]]
    without = [r["v2v_ms"] for row in rows for r in row["replies"] if not r["transition"]]
    right = sum(r["booked_right"] for r in rows)
    return {
        "variants": len(rows),
        "booked_right": right,
        "share_right": round(right / len(rows), 3) if rows else None,
        "turns_when_right": [r["turns"] for r in rows if r["booked_right"]],
        "v2v_ms_transition": _spread(with_step),
        "v2v_ms_no_transition": _spread(without),
    }


def _spread(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "p50": nearest_rank(values, 0.5), "p95": nearest_rank(values, 0.95)}


def with_context(context: str, folder: Path) -> Path:
    """The booking line with every step's context ``context`` (all, none, summary, a number of turns),
    written into ``folder`` beside a copy of its tools."""
    data = yaml.safe_load(AGENT.read_text())
    for step in data["steps"].values():
        step["context"] = int(context) if context.isdigit() else context
    shutil.copy(AGENT.parent / data["tools"], folder / data["tools"])
    path = folder / f"restaurant_{context}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


async def measure(
    variants: tuple[Variant, ...], agent: Path = AGENT, llm_model: str | None = None
) -> list[dict[str, Any]]:
    engines = LoadedEngines()
    rows = []
    try:
        for v in variants:
            t0 = time.monotonic()
            result = await run_scenario(scenario_of(v, agent, llm_model), engines)
            row = figures(v, result)
            row["wall_s"] = round(time.monotonic() - t0, 1)
            rows.append(row)
            mark = "right" if row["booked_right"] else "WRONG"
            print(f"{v.name:24} {mark}  state={row['state']}  ({row['wall_s']} s)", flush=True)
    finally:
        await engines.aclose()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m voice.bench flows", description="the booking line on spoken variants")
    ap.add_argument("--variants", default="", help="only these variants, by name (comma-separated)")
    ap.add_argument(
        "--context", default="", help="every step's context: all, none, summary or N turns (default: as the file says)"
    )
    ap.add_argument("--llm-model", help="the bundled model the line runs on (default: the default model)")
    ap.add_argument("--out", default="docs/bench")
    args = ap.parse_args(argv)
    wanted = {n.strip() for n in args.variants.split(",") if n.strip()}
    chosen = tuple(v for v in VARIANTS if not wanted or v.name in wanted)
    with tempfile.TemporaryDirectory() as folder:
        agent = with_context(args.context, Path(folder)) if args.context else AGENT
        try:
            rows = asyncio.run(measure(chosen, agent, args.llm_model))
        except ScenarioError as e:  # the line cannot run as asked (a model that calls no tools)
            print(f"python -m voice.bench flows: {e}", file=sys.stderr)
            return 2
    s = summary(rows)
    print("\n| variants | booked right | turns (right ones) | v2v p50 / p95, reply entering a step | without |")
    print("|---:|---:|---|---|---|")
    t, n = s["v2v_ms_transition"], s["v2v_ms_no_transition"]
    print(
        f"| {s['variants']} | {s['booked_right']} ({s['share_right']:.0%}) | {s['turns_when_right']} |"
        f" {t['p50']} / {t['p95']} ms (n={t['n']}) | {n['p50']} / {n['p95']} ms (n={n['n']}) |"
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = f"flows_context_{args.context}.json" if args.context else "flows.json"
    if args.llm_model:
        name = name.replace(".json", f"_{args.llm_model}.json")
    doc = {"summary": s, "context": args.context or None, "llm_model": args.llm_model, "variants": rows}
    (out / name).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
