"""The embedded LLM compiled or eager (issue 47, item 3): ``python -m voice.bench compile``.

For each bundled model, three starts, each in a process of its own, as a program starts:
eager (``--llm-compile`` off, today's default); compiled with an empty compile cache (the first
start, torch.compile at work); compiled again with the cache the first one left (every later start,
since ``llm/vllm_plugin.py`` lets vLLM load it on the CPU). Each start is timed to the engine being
ready, then answers the same short chat requests through the pipeline's own ``stream``, one at a
time: its first token (time to the first text) and its decode rate (tokens after the first, over
the time after it). The first request after a start is reported apart (warm-up), so the figures
are of the requests after it. Real time: run it on a quiet machine, compare rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shell import models

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = (
    "What is the capital of France?",
    "Tell me a short story about a cat.",
    "How many minutes are there in three and a half hours?",
    "What should I cook for dinner tonight?",
    "Explain what a rainbow is.",
    "Name three planets.",
)
STARTS = ("eager", "compiled, first start", "compiled, from its cache")


async def _child(model: str, compiled: bool, cache_dir: Path) -> dict[str, Any]:
    """In the child: start the engine, answer the questions, report the figures."""
    from llm.base import Delta
    from shell.engines import EngineConfig, make_llm

    t0 = time.monotonic()
    llm = make_llm(EngineConfig(llm_model=model, llm_compile=compiled, cache_dir=cache_dir))
    start_s = time.monotonic() - t0
    requests = []
    try:
        for k, question in enumerate(QUESTIONS):
            t = time.monotonic()
            first = None
            tokens = 0
            async for piece in llm.stream([{"role": "user", "content": question}], f"q{k}"):
                if isinstance(piece, Delta):
                    if first is None and piece:
                        first = time.monotonic() - t
                    tokens += piece.tokens
            total = time.monotonic() - t
            rate = (tokens - 1) / (total - first) if first is not None and tokens > 1 and total > first else None
            requests.append(
                {
                    "first_token_ms": round(first * 1000, 1) if first else None,
                    "tokens": tokens,
                    "tokens_per_s": round(rate, 1) if rate else None,
                }
            )
    finally:
        await llm.close()
    return {"start_s": round(start_s, 1), "requests": requests}


def _start(model: str, how: str, cache_dir: Path) -> dict[str, Any]:
    """One start of ``model`` in a child process."""
    # Through the benchmarks' entry point: its reaper ends the child's engine with the child.
    cmd = [sys.executable, "-m", "voice.bench", "compile", "--child", model, "--cache-dir", str(cache_dir)]
    if how != "eager":
        cmd.append("--compiled")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"start": how, "error": (done.stderr or done.stdout)[-800:], "wall_s": round(wall, 1)}
    row = json.loads(lines[-1])
    later = row["requests"][1:]
    firsts = [r["first_token_ms"] for r in later if r["first_token_ms"] is not None]
    rates = [r["tokens_per_s"] for r in later if r["tokens_per_s"] is not None]
    return {
        "start": how,
        "wall_s": round(wall, 1),
        "start_s": row["start_s"],
        "first_request_first_token_ms": row["requests"][0]["first_token_ms"],
        "first_token_ms_p50": round(statistics.median(firsts), 1) if firsts else None,
        "tokens_per_s_p50": round(statistics.median(rates), 1) if rates else None,
        "requests": row["requests"],
    }


def measure(model: str) -> list[dict[str, Any]]:
    """The three starts of ``model``: eager, then compiled into an empty cache, then from it."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="compile-bench-") as folder:
        compiled_cache = Path(folder) / "compiled"
        for how in STARTS:
            cache = Path(folder) / "eager" if how == "eager" else compiled_cache
            row = _start(model, how, cache)
            row["model"] = model
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def _line(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"| {r['model']} | {r['start']} | failed: {r['error'].splitlines()[-1] if r['error'] else '?'} | | | |"
    return (
        f"| {r['model']} | {r['start']} | {r['start_s']} | {r['first_request_first_token_ms']} |"
        f" {r['first_token_ms_p50']} | {r['tokens_per_s_p50']} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m voice.bench compile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b", help="comma-separated; provisioned ones")
    ap.add_argument("--out", default="docs/bench/compile.json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--compiled", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(asyncio.run(_child(args.child, args.compiled, Path(args.cache_dir)))), flush=True)
        return 0
    wanted = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in wanted:
        if m not in models.LLM_MODELS:
            ap.error(f"unknown model {m!r}; bundled: {', '.join(models.LLM_MODELS)}")
    print("| model | start | ready (s) | first request's first token (ms) | first token p50 (ms) | decode (tok/s) |")
    print("|---|---|---:|---:|---:|---:|")
    rows = [row for m in wanted for row in measure(m)]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"questions": QUESTIONS, "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
