"""Agents as flows (issue 46): the restaurant's booking line on spoken variants, and what a step's
transition costs the reply (``python -m voice.bench flows``).

Each of the 20 variants is a caller who books a table at Luigi's (``agents/restaurant.yaml``),
said by a voice that is not the assistant's, on the real engines and virtual time: other
phrasings, fillers, a correction at the read-back, everything said at once, numbers in digits and
in words, interruptions of the read-back. It counts the variants that end with the right booking (the
booking tool called with the caller's details, and the call ended) and the turns it took. A
reply's voice-to-voice (the end of the speech to its first sample, virtual time) is grouped by
whether the reply entered a step, so the transition's cost is read beside the turns without one.
``--context``: every step's context set to one choice (all, none, summary, a number of turns), to
read what a transition costs with each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core.events import Collected, PlaybackStart, ResponseStart, SpeechEnd, StepEntered, ToolCallStart
from voice.bench.common import nearest_rank
from voice.scenario.runner import LoadedEngines, ScenarioResult, run_scenario
from voice.scenario.spec import Cue, Person, Scenario, Turn

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "agents" / "restaurant.yaml"


@dataclass(frozen=True)
class Variant:
    """A caller: what they say, turn by turn (``None`` before a text: said over the read-back), and
    the booking they want (each value as it must be found in the state, case ignored)."""

    name: str
    turns: tuple[str, ...]
    booking: dict[str, str]
    interrupt_readback: bool = False  # the last-but-one turn is said 1 s into the read-back


ROSSI = {"name": "rossi", "party_size": "4", "date": "friday"}
VARIANTS = (
    Variant("plain", ("I'd like to book a table, please.", "Rossi.", "Four.", "Friday.", "At eight.", "Yes."), ROSSI),
    Variant(
        "sentences",
        (
            "Hi, can I book a table?",
            "The name is Rossi.",
            "For four people.",
            "This Friday.",
            "Eight in the evening.",
            "Yes please.",
        ),
        ROSSI,
    ),
    Variant(
        "reservation",
        ("I want to make a reservation.", "It's Chen.", "Two of us.", "Tomorrow.", "Seven o'clock.", "Sounds good."),
        {"name": "chen", "party_size": "2", "date": "tomorrow"},
    ),
    Variant(
        "digits",
        ("Table for 6 please.", "Garcia.", "6.", "Saturday.", "At 9.", "Yes."),
        {"name": "garcia", "party_size": "6", "date": "saturday"},
    ),
    Variant(
        "correction",
        ("I'd like to book a table.", "Rossi.", "Four.", "Friday.", "At eight.", "No, make it five people.", "Yes."),
        {"name": "rossi", "party_size": "5", "date": "friday"},
    ),
    Variant(
        "interrupted read-back",
        ("Book a table, please.", "Rossi.", "Four.", "Friday.", "At eight.", "Actually, make it three people.", "Yes."),
        {"name": "rossi", "party_size": "3", "date": "friday"},
        interrupt_readback=True,
    ),
    Variant(
        "names",
        ("Could I reserve a table?", "Under Patel.", "Three.", "Next Monday.", "Half past seven.", "Perfect."),
        {"name": "patel", "party_size": "3", "date": "monday"},
    ),
    Variant(
        "short",
        ("Table please.", "Kim.", "Two.", "Today.", "Six.", "Go ahead."),
        {"name": "kim", "party_size": "2", "date": "today"},
    ),
    Variant(
        "polite",
        (
            "Good evening, I'd like to reserve a table for dinner.",
            "My name is Johnson.",
            "There will be four of us.",
            "On Saturday.",
            "At seven thirty.",
            "Yes, that's right.",
        ),
        {"name": "johnson", "party_size": "4", "date": "saturday"},
    ),
    Variant(
        "all at once",
        ("Hi, a table for two this Friday at eight, please. The name is Rossi.", "Yes, please."),
        {"name": "rossi", "party_size": "2", "date": "friday"},
    ),
    Variant(
        "name first",
        (
            "Hello, this is Maria Lopez, I'd like to book a table.",
            "Three people.",
            "Tomorrow.",
            "At half past eight.",
            "Yes.",
        ),
        {"name": "lopez", "party_size": "3", "date": "tomorrow"},
    ),
    Variant(
        "tonight",
        ("Can I book a table for tonight?", "Brown.", "We are a party of eight.", "Half past eight.", "Yes, book it."),
        {"name": "brown", "party_size": "8", "date": "tonight"},
    ),
    Variant(
        "day corrected",
        (
            "I'd like to book a table.",
            "The name is Smith.",
            "Two people.",
            "Thursday.",
            "At seven.",
            "Sorry, make it Friday.",
            "Yes.",
        ),
        {"name": "smith", "party_size": "2", "date": "friday"},
    ),
    Variant(
        "fillers",
        (
            "Um, hi, yes, I wanted to book a table.",
            "Uh, it's Wilson.",
            "Um, four.",
            "Friday, please.",
            "Around eight.",
            "Yes, thanks.",
        ),
        {"name": "wilson", "party_size": "4", "date": "friday"},
    ),
    Variant(
        "party in digits",
        ("Table for 2, please.", "Taylor.", "Sunday.", "At 1 pm.", "Yes."),
        {"name": "taylor", "party_size": "2", "date": "sunday"},
    ),
    Variant(
        "wait four",
        ("I'd like a table, please.", "Anderson.", "Five.", "Saturday.", "At eight.", "Wait, four people.", "Yes."),
        {"name": "anderson", "party_size": "4", "date": "saturday"},
        interrupt_readback=True,
    ),
    Variant(
        "group",
        ("Do you take bookings for a group?", "Martin.", "Twelve people.", "Next Friday.", "At seven.", "Great."),
        {"name": "martin", "party_size": "12", "date": "friday"},
    ),
    Variant(
        "sure",
        ("I need a table.", "Davis.", "Three.", "Wednesday.", "At six.", "Sure, go ahead."),
        {"name": "davis", "party_size": "3", "date": "wednesday"},
    ),
    Variant(
        "quarter to",
        ("Could I book a table for Thursday?", "Clark.", "Two.", "At a quarter to nine.", "That's perfect."),
        {"name": "clark", "party_size": "2", "date": "thursday"},
    ),
    Variant(
        "tomorrow night",
        (
            "Hi there, I'd like to make a booking for tomorrow night.",
            "The name's Evans.",
            "Six of us.",
            "Eight o'clock.",
            "Yes, please do.",
        ),
        {"name": "evans", "party_size": "6", "date": "tomorrow"},
    ),
)


def scenario_of(v: Variant, agent: Path = AGENT) -> Scenario:
    turns = []
    for i, text in enumerate(v.turns):
        cue = None
        if i == 0:
            cue = Cue("after_reply_end", 0.3)  # after the greeting
        elif v.interrupt_readback and i == len(v.turns) - 2:
            cue = Cue("after_reply_start", 1.0)  # over the read-back
        turns.append(Turn(text=text, cue=cue))
    return Scenario(
        name=v.name,
        path=ROOT / "voice" / "bench" / f"{v.name}.flows",
        agent={"agent": str(agent)},
        call=False,
        person=Person(),
        turns=tuple(turns),
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
    right = all(want in str(state.get(k, "")).lower() for k, want in v.booking.items())
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
        "wanted": v.booking,
        "ended": result.observed.ended,
        "turns": len(v.turns),
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


async def measure(variants: tuple[Variant, ...], agent: Path = AGENT) -> list[dict[str, Any]]:
    engines = LoadedEngines()
    rows = []
    try:
        for v in variants:
            t0 = time.monotonic()
            result = await run_scenario(scenario_of(v, agent), engines)
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
    ap.add_argument("--out", default="docs/bench")
    args = ap.parse_args(argv)
    wanted = {n.strip() for n in args.variants.split(",") if n.strip()}
    chosen = tuple(v for v in VARIANTS if not wanted or v.name in wanted)
    with tempfile.TemporaryDirectory() as folder:
        agent = with_context(args.context, Path(folder)) if args.context else AGENT
        rows = asyncio.run(measure(chosen, agent))
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
    (out / name).write_text(
        json.dumps({"summary": s, "context": args.context or None, "variants": rows}, indent=1) + "\n"
    )
    print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
