"""How each bundled LLM reads the words of a pause: ``python -m voice.bench reading``.

The end of the turn asks the LLM for P(the sentence ends here) after the words heard so far
(``core/end_of_turn.py``: ``completion_prompt``, ``sentence_end_probability``). Its thresholds
(``min_sentence_end`` and the others) hold for any model only if the models read alike. For each
model, in a process of its own, every word boundary of the sentences below is read: the ends of
the finished sentences, and the boundaries inside them, where a person may pause. Prints a table
per model (inside: the share under ``min_sentence_end`` and the highest; at the end: min, p50,
max) and the boundaries the endpoint benchmark pauses at, and writes the JSON. Text only: no
audio, no clock; the figures are the model's, and repeat exactly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from core.end_of_turn import EndOfTurnConfig, completion_prompt, sentence_end_probability
from shell import models
from voice.bench.common import ROOT

# The endpoint benchmark's finished sentences (as said), the demo's question, everyday requests.
SENTENCES = (
    "Author of the danger trail, Philip Steels, etc.",
    "Not at this particular case, Tom, apologized Whittemore.",
    "For the twentieth time that evening the two men shook hands.",
    "Lord, but I'm glad to see you again, Phil.",
    "In being comparatively modern.",
    "The invention of movable metal letters in the middle of the fifteenth century may justly be "
    "considered as the invention of the art of printing.",
    "How are you doing?",
    "I'd like to book a table for four people on Saturday at eight.",
    "Can you tell me what the weather will be like in Paris tomorrow?",
    "How many minutes are there in three and a half hours?",
    "I need help with my order from last week.",
    "What is the capital of France?",
    "Could you remind me to call my mother at six tonight?",
)
# Where voice.bench endpoint inserts its pauses (voice/bench/turns.py: BOUNDARIES), as word counts.
PAUSES = {0: 2, 1: 3, 2: 5, 3: 4, 4: 2, 5: 7}  # sentence index: words before the pause


async def _child(model: str) -> list[dict[str, Any]]:
    from llm.vllm_engine import VLLMEngine
    from shell.engines import EngineConfig

    cfg = EngineConfig(llm_model=model)
    llm = VLLMEngine(models.llm_model_path(model), cfg.cache_dir, cfg.generation)
    rows = []
    try:
        for i, sentence in enumerate(SENTENCES):
            said = sentence.split()
            for n in range(1, len(said) + 1):
                top = await llm.next_token_probabilities(completion_prompt(" ".join(said[:n])))
                rows.append(
                    {
                        "sentence": i,
                        "words": " ".join(said[:n]),
                        "end": n == len(said),
                        "bench_pause": PAUSES.get(i) == n,
                        "sentence_end": round(sentence_end_probability(top), 4),
                    }
                )
    finally:
        await llm.close()
    return rows


def _read(model: str) -> list[dict[str, Any]]:
    cmd = [sys.executable, "-m", "voice.bench", "reading", "--child", model]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    if done.returncode or not lines:
        raise SystemExit(f"{model}: {(done.stderr or done.stdout)[-800:]}")
    return json.loads(lines[-1])


def summary(rows: list[dict[str, Any]], floor: float) -> dict[str, Any]:
    inside = [r["sentence_end"] for r in rows if not r["end"]]
    ends = [r["sentence_end"] for r in rows if r["end"]]
    return {
        "inside": len(inside),
        "inside_under_floor": sum(p < floor for p in inside),
        "inside_max": max(inside),
        "bench_pauses_max": max(r["sentence_end"] for r in rows if r["bench_pause"]),
        "ends_min": min(ends),
        "ends_p50": round(statistics.median(ends), 3),
        "ends_max": max(ends),
        "ends_under_floor": sum(p < floor for p in ends),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m voice.bench reading", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b", help="comma-separated; provisioned ones")
    ap.add_argument("--out", default="docs/bench/reading.json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(asyncio.run(_child(args.child))), flush=True)
        return 0
    wanted = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in wanted:
        if m not in models.LLM_MODELS:
            ap.error(f"unknown model {m!r}; bundled: {', '.join(models.LLM_MODELS)}")
    floor = EndOfTurnConfig().min_sentence_end or 0.0
    result: dict[str, Any] = {"sentences": SENTENCES, "min_sentence_end": floor, "models": {}}
    print(f"P(the sentence ends here) at every word boundary of {len(SENTENCES)} sentences (min_sentence_end {floor})")
    print()
    print(
        "| model | inside: under the floor | inside: highest | at the bench's pauses: highest |"
        " finished: min / p50 / max | finished under the floor |"
    )
    print("|---|---:|---:|---:|---|---:|")
    for m in wanted:
        rows = _read(m)
        s = summary(rows, floor)
        result["models"][m] = {"summary": s, "rows": rows}
        print(
            f"| {m} | {s['inside_under_floor']}/{s['inside']} | {s['inside_max']} | {s['bench_pauses_max']} |"
            f" {s['ends_min']} / {s['ends_p50']} / {s['ends_max']} | {s['ends_under_floor']}/{len(SENTENCES)} |",
            flush=True,
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
