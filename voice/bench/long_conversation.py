"""The first token over a long conversation: what the prefix cache holds, and what trimming does to it.

    python -m voice.bench long_conversation [--out DIR] [--turns 50] [--llm-model NAME]

The embedded vLLM answers a conversation of TURNS questions, text in, as a session asks
(the system prompt, the history, the new question), once per way of fitting a conversation
that outgrows the context (llm/context.py):

- ``marks``: cut at marks fixed on the conversation's length (the default), so the prompt
  starts the same from turn to turn until the cut moves;
- ``quarter_marks``: marks every quarter of the budget, not half: more kept, more moves;
- ``oldest``: the oldest message dropped one at a time (as before issue 32), so once the
  conversation is full every turn's prompt starts differently.

The prefix cache is emptied before each, and the last turn asks the first turn's question.
Per turn: the prompt's tokens, how many of them the prefix cache held, the time from the
request to its first text and to its last.

Prints a Markdown table and writes DIR/long_conversation.json and DIR/long_conversation.png
(the first token's time by turn, per way).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from voice.bench.common import ROOT, parser

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1"}

# llm/context.py's step, as a share of the budget: None is the default (half), 0 (a step of 1 token)
# drops one message at a time.
WAYS: dict[str, float | None] = {"marks": None, "quarter_marks": 0.25, "oldest": 0.0}

QUESTIONS = [
    "What is a good way to start learning to cook?",
    "How far is the moon from the earth?",
    "Can you suggest a name for a small grey cat?",
    "Why is the sky blue during the day?",
    "What should I pack for a weekend by the sea?",
    "How do I keep basil alive on a windowsill?",
    "What is the difference between weather and climate?",
    "Tell me a short fact about octopuses.",
    "How long should I boil an egg for a soft yolk?",
    "What is a polite way to decline an invitation?",
]


def question(k: int, turns: int) -> str:
    """Turn ``k``'s question (0-based); the last turn asks the first's again."""
    return QUESTIONS[0] if k == turns - 1 else QUESTIONS[k % len(QUESTIONS)]


async def conversation(engine: Any, system: str, turns: int) -> list[dict[str, Any]]:
    """One conversation of ``turns`` questions on ``engine``; a row per turn."""
    history: list[dict[str, Any]] = [{"role": "system", "content": system}]
    rows = []
    for k in range(turns):
        messages = [*history, {"role": "user", "content": question(k, turns)}]
        prompt0, cached0 = engine.prompt_tokens, engine.cached_prompt_tokens
        start = time.perf_counter()
        first = None
        text = ""
        async for delta in engine.stream(messages, f"turn-{k}"):
            if first is None and delta:
                first = time.perf_counter() - start
            text += delta
        rows.append({
            "turn": k + 1,
            "prompt_tokens": engine.prompt_tokens - prompt0,
            "cached_tokens": engine.cached_prompt_tokens - cached0,
            "first_token_s": None if first is None else round(first, 4),
            "reply_s": round(time.perf_counter() - start, 4),
            "reply_chars": len(text),
        })  # fmt: skip
        print(f"  turn {k + 1}: {rows[-1]}", file=sys.stderr, flush=True)
        history = [*messages, {"role": "assistant", "content": text}]
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The first and last turn (same question), and medians over the first and last ten turns."""

    def median(part: list[dict[str, Any]], key: str) -> float:
        return round(statistics.median(r[key] for r in part if r[key] is not None), 4)

    first, last = rows[0], rows[-1]
    return {
        "turn_1_first_token_s": first["first_token_s"],
        "last_turn_first_token_s": last["first_token_s"],
        "last_over_first": round(last["first_token_s"] / first["first_token_s"], 2),
        "first_ten_median_s": median(rows[:10], "first_token_s"),
        "last_ten_median_s": median(rows[-10:], "first_token_s"),
        "last_ten_max_s": max(r["first_token_s"] for r in rows[-10:]),
        "cached_share_last_ten": round(
            sum(r["cached_tokens"] for r in rows[-10:]) / sum(r["prompt_tokens"] for r in rows[-10:]), 3
        ),
        "last_prompt_tokens": last["prompt_tokens"],
    }


async def measure(model: str, turns: int) -> dict[str, Any]:
    from llm.vllm_engine import VLLMEngine
    from shell.config import SessionConfig
    from shell.engines import EngineConfig
    from shell.models import llm_model_path

    cfg = EngineConfig(llm_model=model)
    started = time.perf_counter()
    engine = VLLMEngine(llm_model_path(model), cfg.cache_dir, cfg.generation)
    cold = time.perf_counter() - started
    out: dict[str, Any] = {"model": model, "turns": turns, "max_model_len": engine.max_model_len, "cold_start_s": cold}
    try:
        budget = engine.max_model_len - engine.generation.max_tokens
        for way, share in WAYS.items():
            engine.context_step = None if share is None else max(1, round(share * budget))
            await engine.engine.reset_prefix_cache()
            print(f"{way}:", file=sys.stderr)
            rows = await conversation(engine, SessionConfig().system_prompt, turns)
            out[way] = {"summary": summary(rows), "turns": rows}
    finally:
        await engine.close()
    return out


def table(result: dict[str, Any]) -> str:
    head = "| way | turn 1 | last turn | last/first | median 1-10 | median last 10 | max last 10 | cached, last 10 |"
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for way in WAYS:
        s = result[way]["summary"]
        lines.append(
            f"| {way} | {s['turn_1_first_token_s']:.3f} s | {s['last_turn_first_token_s']:.3f} s | "
            f"x{s['last_over_first']:.2f} | {s['first_ten_median_s']:.3f} s | {s['last_ten_median_s']:.3f} s | "
            f"{s['last_ten_max_s']:.3f} s | {100 * s['cached_share_last_ten']:.0f}% |"
        )
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for way in WAYS:
        rows = result[way]["turns"]
        ax.plot([r["turn"] for r in rows], [r["first_token_s"] for r in rows], marker=".", label=way)
    ax.set_xlabel("turn")
    ax.set_ylabel("first token (s)")
    ax.set_title(f"First token over a long conversation ({result['model']}, {result['max_model_len']} context)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str]) -> None:
    ap = parser(__name__)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "long_conversation")
    ap.add_argument("--turns", type=int, default=50)
    ap.add_argument("--llm-model", default="smollm2-135m")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(measure(args.llm_model, args.turns))
    print(table(result))
    (args.out / "long_conversation.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out / "long_conversation.png")
    print(f"wrote {args.out / 'long_conversation.json'} and long_conversation.png", file=sys.stderr)
