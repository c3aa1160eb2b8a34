"""Goodbyes: said with a breath after the closing words, and said over the reply.

    python -m voice.bench goodbyes [--out DIR] [--json-name FILE]     (default: docs/bench, goodbyes.json)

Ten voices (piper's joe at five paces, the five bundled Kokoro voices speaking English), on virtual
time on the real engines, each in three conversations:

1. a question, answered, then a goodbye in two breaths ("Thank you, goodbye.", "OK, bye then."):
   one turn, or cut at its comma into two (a reply before the speech ended, or two transcripts).
   Each with ``closing_wait_s`` (closing words alone wait 0.8 s for a goodbye) and without it
   (``--turn-closing-wait-ms 0``: the turn ends at the model's "finished", as before issue 44),
   in the same run; the pause the voice made after the closing words is measured on its audio;
2. a long reply, and "Goodbye." over it 2 s in: how soon the reply stops (speech onset to pause)
   and whether it was cut (a barge-in), not taken for a backchannel.

Prints a table and writes DIR/JSON_NAME.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from core.audio import ASR_RATE
from core.events import AsrFinal, BargeIn, PlaybackStart
from voice.bench.common import ROOT, parser
from voice.scenario.runner import LoadedEngines, run_scenario
from voice.scenario.spec import Cue, Expectation, Person, Scenario, Turn

ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR", "TQDM_DISABLE": "1"}

VOICES = [("joe", pace) for pace in (0.8, 0.9, 1.0, 1.1, 1.2)] + [
    (name, 1.0) for name in ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
]
GOODBYES = ("Thank you, goodbye.", "OK, bye then.")
QUESTION = "What is twelve times seven?"
STORY = "Tell me a long story about a dragon who lived in a castle."


def _scenario(name: str, person: Person, turns: tuple[Turn, ...], agent: dict[str, Any]) -> Scenario:
    return Scenario(
        name=name,
        path=ROOT / "scenarios" / "bench-goodbyes.yaml",
        agent=agent,
        call=False,
        person=person,
        turns=turns,
        expect=Expectation(),
    )


def longest_pause_s(audio: np.ndarray, start: float, end: float) -> float:
    """The longest stretch of 10 ms frames 40 dB under the loudest, inside the speech."""
    frame = ASR_RATE // 100
    span = audio[round(start * ASR_RATE) : round(end * ASR_RATE)]
    energy = np.mean(span[: len(span) // frame * frame].reshape(-1, frame) ** 2, axis=1) + 1e-12
    quiet = 10 * np.log10(energy / energy.max()) < -40
    best = run = 0
    for q in quiet:
        run = run + 1 if q else 0
        best = max(best, run)
    return best * frame / ASR_RATE


async def one_turn(engines: LoadedEngines, voice: str, pace: float, said: str, closing_wait: bool) -> dict:
    person = Person(voice=voice, speed=pace)
    agent = {} if closing_wait else {"turn_closing_wait_ms": 0}
    turns = (Turn(text=QUESTION), Turn(text=said, expect=Expectation(one_turn=True)))
    result = await run_scenario(_scenario(f"{voice} {pace} {said}", person, turns, agent), engines)
    check = next(c for c in result.checks if c.name == "one turn")
    placed = next(p for p in result.placed if p.index == 1)
    audio = result.turns[1]
    utterances = result.observed.utterances(placed)
    finals = [e.text for e in result.observed.of(AsrFinal) if e.utterance in utterances]
    return {
        "voice": voice,
        "pace": pace,
        "said": said,
        "closing_wait": closing_wait,
        "one_turn": check.passed,
        "pause_s": round(longest_pause_s(audio.audio, audio.speech_start, audio.speech_end), 3),
        "heard": finals,
    }


async def over_reply(engines: LoadedEngines, voice: str, pace: float) -> dict:
    person = Person(voice=voice, speed=pace)
    turns = (Turn(text=STORY), Turn(text="Goodbye.", cue=Cue("after_reply_start", 2.0)))
    result = await run_scenario(_scenario(f"{voice} {pace} over", person, turns, {}), engines)
    placed = next(p for p in result.placed if p.index == 1)
    utterances = result.observed.utterances(placed)
    cuts = [e for e in result.observed.of(BargeIn) if e.utterance in utterances]
    started = [e for e in result.observed.of(PlaybackStart)]
    return {
        "voice": voice,
        "pace": pace,
        "cut": bool(cuts),
        "stopped_ms": round((cuts[0].paused_at - placed.speech_start) * 1000) if cuts else None,
        "replies": len(started),
    }


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--json-name", default="goodbyes.json")
    args = ap.parse_args(argv)
    asyncio.run(_main(args))


async def _main(args: argparse.Namespace) -> None:
    engines = LoadedEngines()
    turns, over = [], []
    try:
        for voice, pace in VOICES:
            for said in GOODBYES:
                for closing_wait in (True, False):
                    turns.append(await one_turn(engines, voice, pace, said, closing_wait))
                    print(turns[-1], file=sys.stderr)
            over.append(await over_reply(engines, voice, pace))
            print(over[-1], file=sys.stderr)
    finally:
        await engines.aclose()
    summary = {
        "one_turn": {
            ("with" if wait else "without") + " closing_wait_s": {
                said: f"{sum(r['one_turn'] for r in turns if r['said'] == said and r['closing_wait'] == wait)}"
                f"/{sum(r['said'] == said and r['closing_wait'] == wait for r in turns)}"
                for said in GOODBYES
            }
            for wait in (True, False)
        },
        "pause_s": {s: [r["pause_s"] for r in turns if r["said"] == s and r["closing_wait"]] for s in GOODBYES},
        "goodbye_over_reply_cut": f"{sum(r['cut'] for r in over)}/{len(over)}",
        "goodbye_over_reply_stopped_ms_max": max((r["stopped_ms"] or 0 for r in over), default=None),
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / args.json_name).write_text(
        json.dumps({"mode": "virtual time", "summary": summary, "turns": turns, "over_reply": over}, indent=2) + "\n"
    )
    print("\n| voice | pace | said | pause (ms) | one turn, closing wait 0.8 s | without |\n|---|---|---|---|---|---|")
    for r in (r for r in turns if r["closing_wait"]):
        without = next(
            o
            for o in turns
            if not o["closing_wait"] and (o["voice"], o["pace"], o["said"]) == (r["voice"], r["pace"], r["said"])
        )
        print(
            f"| {r['voice']} | {r['pace']} | {r['said']} | {r['pause_s'] * 1000:.0f} | "
            f"{'yes' if r['one_turn'] else 'NO'} | {'yes' if without['one_turn'] else 'no'} |"
        )
    print("\n| voice | pace | goodbye over the reply: cut | stopped (ms) |\n|---|---|---|---|")
    for r in over:
        print(f"| {r['voice']} | {r['pace']} | {'yes' if r['cut'] else 'NO'} | {r['stopped_ms']} |")
    print(f"\n{json.dumps(summary)}")
