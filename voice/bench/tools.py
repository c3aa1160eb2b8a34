"""Tool calls from spoken requests: does the model call the right tool, with the right arguments?

    python -m voice.bench tools [--model NAME] [--out DIR]      (default: qwen2.5-coder-0.5b, out/bench-tools)
    python -m voice.bench tools --part mcp                       what an MCP server adds to a call

Each request of :data:`REQUESTS` (written for this benchmark: some need one of the
built-in tools, some need none) is spoken by piper, transcribed by Whisper base as
the pipeline's final pass does, and sent with the built-in tools to the embedded
vLLM engine. The streamed calls are pieced together (``ToolCallStream``) and checked
against the tools' schemas (``Tools.check``) as the pipeline does before running one.

Scores: call precision (calls made that name the tool the request needs), call recall
(requests needing a tool whose tool was called), argument accuracy (right-tool calls
whose arguments fit and mean what was asked), and the time to the call's first piece
and to the whole call. Prints a Markdown table and writes DIR/bench_tools.json. The
model is asked as the session asks it (the session's system prompt with tools, no
repetition penalty). Tools in the whole voice loop, in real time: python -m voice.bench tool_turns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from core.audio import ASR_RATE
from core.tool_calls import ToolCall, ToolCallDelta, ToolCallStream
from llm.base import GenerationConfig
from shell import models
from shell.config import SessionConfig
from shell.tools import load_tools
from voice.bench.common import ROOT, parser
from voice.bench.tool_requests import REQUESTS

# The session's system prompt with tools: its default, then SessionConfig.tools_prompt.
SYSTEM = f"{SessionConfig.system_prompt} {SessionConfig.tools_prompt}"


def speak(tts, text: str) -> np.ndarray:
    return np.concatenate([piece.audio for piece in tts.synthesize(text, exact=True)])


async def ask(engine, tools, text: str, system: str = SYSTEM) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": text}]
    stream, calls, said = ToolCallStream(), [], ""
    start, first = time.monotonic(), None
    async for piece in engine.stream(messages, None, tools=tools.specs()):
        if isinstance(piece, ToolCallDelta):
            first = first if first is not None else time.monotonic() - start
            calls += stream.feed(piece)
        else:
            said += piece
    calls += stream.finish()
    whole = time.monotonic() - start
    return {"said": said, "calls": calls, "first_piece_s": first, "whole_s": whole if calls else None}


def score(rows: list[dict[str, Any]]) -> dict[str, Any]:
    made = [c for r in rows for c in r["calls"]]
    right = [c for r in rows for c in r["calls"] if c["name"] == r["needs"]]
    needing = [r for r in rows if r["needs"]]
    recalled = [r for r in needing if any(c["name"] == r["needs"] for c in r["calls"])]
    firsts = [r["first_piece_s"] for r in rows if r["first_piece_s"] is not None]
    wholes = [r["whole_s"] for r in rows if r["whole_s"] is not None]
    return {
        "requests": len(rows),
        "needing_a_tool": len(needing),
        "calls_made": len(made),
        "precision": round(len(right) / len(made), 3) if made else None,
        "recall": round(len(recalled) / len(needing), 3) if needing else None,
        "argument_accuracy": round(sum(c["arguments_right"] for c in right) / len(right), 3) if right else None,
        "calls_refused": sum(not c["valid"] for c in made),
        "spoken_json": sum("{" in r["said"] for r in rows),
        "first_piece_s_p50": round(statistics.median(firsts), 2) if firsts else None,
        "whole_call_s_p50": round(statistics.median(wholes), 2) if wholes else None,
    }


async def run(model: str, system: str) -> dict[str, Any]:
    from asr.whisper import WhisperRecognizer
    from llm.vllm_engine import VLLMEngine
    from tts.piper_tts import PiperTTS

    tools = load_tools(["builtin"])
    tts = PiperTTS(models.voice_path("joe"), ASR_RATE)
    asr = WhisperRecognizer(models.asr_model_path("base"), "cpu", cpu_threads=2)
    t0 = time.monotonic()
    engine = await asyncio.to_thread(
        VLLMEngine,
        models.llm_model_path(model),
        ROOT / "out" / "vllm-cache",
        GenerationConfig(max_tokens=64),
        tool_parser=models.TOOL_PARSERS[model],
    )
    cold_start_s = time.monotonic() - t0
    try:
        await ask(engine, tools, "Hello.")  # warm
        rows = []
        for text, needs, meaning in REQUESTS:
            heard = asr.transcribe(speak(tts, text))
            answer = await ask(engine, tools, heard, system)
            calls = []
            for call in answer["calls"]:
                checked = tools.check(call)
                valid = not isinstance(checked, str)
                right = valid and call.name == needs and meaning is not None and meaning(checked[1])
                calls.append(_call_json(call, valid, bool(right), checked if isinstance(checked, str) else None))
            rows.append({"request": text, "heard": heard, "needs": needs, **answer, "calls": calls})
            print(f"  {text!r} -> {[c['name'] for c in calls] or answer['said'][:40]!r}", flush=True)
    finally:
        await engine.close()
    summary = score(rows)
    return {
        "model": model,
        "system": system,
        "cold_start_s": round(cold_start_s, 1),
        "summary": summary,
        "requests": rows,
    }


def _call_json(call: ToolCall, valid: bool, right: bool, why: str | None) -> dict[str, Any]:
    return {"name": call.name, "arguments": call.arguments, "valid": valid, "arguments_right": right, "refused": why}


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", choices=sorted(models.TOOL_PARSERS))
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-tools")
    ap.add_argument("--system-prompt", default=SYSTEM)
    ap.add_argument(
        "--part",
        choices=["all", "model", "mcp"],
        default="all",
        help="model: the spoken requests; mcp: what an MCP server adds to a call (voice/bench/mcp_latency.py)",
    )
    ap.add_argument("--mcp-calls", type=int, default=200, help="calls of each kind for --part mcp (default: 200)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part in ("all", "mcp"):
        from voice.bench import mcp_latency

        latency = asyncio.run(mcp_latency.measure(args.mcp_calls))
        mcp_latency.print_table(latency)
        path = args.out / "bench_tools_mcp.json"
        path.write_text(json.dumps(latency, indent=2) + "\n")
        print(f"\nwrote {path}")
        if args.part == "mcp":
            return
    result = asyncio.run(run(args.model, args.system_prompt))
    s = result["summary"]
    print(f"\n{args.model}: {s['requests']} spoken requests, {s['needing_a_tool']} needing a tool "
          f"(cold start {result['cold_start_s']} s)\n")  # fmt: skip
    print(
        "| call precision | call recall | argument accuracy | calls refused | JSON spoken | first piece p50"
        " | whole call p50 |"
    )
    print("|---|---|---|---|---|---|---|")
    print(f"| {s['precision']} | {s['recall']} | {s['argument_accuracy']} | {s['calls_refused']} | {s['spoken_json']} "
          f"| {s['first_piece_s_p50']} s | {s['whole_call_s_p50']} s |")  # fmt: skip
    path = args.out / "bench_tools.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"\nwrote {path}")
