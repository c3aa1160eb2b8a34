"""Tool calls in the voice loop, in real time: which tools run, and how long the person waits.

    python -m voice.bench tool_turns [--out DIR] [--slow-s S]     (default: out/bench-tool-turns, 1.5)

Each request of ``voice/bench/tool_requests.py`` (the ones ``python -m voice.bench tools`` sends
to the model alone) is spoken by piper and replayed in real time through a whole session
(Silero, Whisper, Smart Turn, the embedded Qwen2.5-Coder-0.5B, piper) with the built-in
tools, one session per request. Then the time requests again, with ``get_current_time``
taking ``--slow-s`` longer (a lookup over a network), to see the filler.

Per request: the calls that ran (a call the tools refuse does not run: the model is told
why and may try once more), their tool time, and on the session's clock, from the end of
the person's speech:

- first audio: whatever the reply says first (words before the call, the filler, the answer);
- answer audio: the first chunk of the answer asked with the tools' results, ready to play
  (its tool time taken out, and reported beside it);
- filler: whether "One moment." was said.

Scores: call precision and recall over the calls that ran, argument accuracy, and the same
over every call the model made (refused ones included). Prints Markdown tables and writes
DIR/bench_tool_turns.json.
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
from core.events import (
    Event,
    PlaybackStart,
    ResponseContinued,
    SpeechEnd,
    ToolCallEnd,
    ToolCallStart,
    TtsChunk,
)
from shell.clock import MonotonicClock
from shell.config import SessionConfig
from shell.engines import EngineConfig, load_engines
from shell.session import Session
from shell.tools import ToolContext, Tools, builtin, load_tools
from transport.replay import replay
from voice.bench.common import ROOT, parser
from voice.bench.tool_requests import REQUESTS

MODEL = "qwen2.5-coder-0.5b"


def speak(tts, text: str) -> np.ndarray:
    speech = np.concatenate([0.5 * p.audio for p in tts.synthesize(text, exact=True)])
    quiet = np.zeros(ASR_RATE // 2, dtype=np.float32)
    return np.concatenate([quiet, speech, quiet]).astype(np.float32)


def slow_tools(seconds: float) -> Tools:
    """The built-ins, with the time taking ``seconds`` longer to look up."""

    async def get_current_time(context: ToolContext) -> str:
        await asyncio.sleep(seconds)
        return builtin.get_current_time(context)

    get_current_time.__doc__ = builtin.get_current_time.__doc__
    tools = Tools(t for t in load_tools(["builtin"]) if t.name != "get_current_time")
    tools.add(get_current_time, "bench")
    return tools


async def one(engines, tools: Tools, audio: np.ndarray, needs: str | None, meaning) -> dict[str, Any]:
    events: list[Event] = []
    session = Session(engines, MonotonicClock(), SessionConfig(), events.append, tools=tools)
    try:
        await replay(session, audio, settle=False, max_tail_s=60)
    finally:
        await session.aclose()

    def of(kind):
        return [e for e in events if isinstance(e, kind)]

    ends = of(SpeechEnd)
    spoke_end = ends[0].end if ends else None
    started, finished = of(ToolCallStart), of(ToolCallEnd)
    ran = [e for e in finished if not e.result.startswith("The call was not run")]
    continued = of(ResponseContinued)
    answer = next((c for c in of(TtsChunk) if continued and c.t >= continued[0].t), None)
    first_audio = of(PlaybackStart)
    tool_s = sum(e.duration_s for e in ran)
    chunks = [c.text for c in of(TtsChunk)]
    right = []
    for e in ran:
        start = next(s for s in started if s.call_id == e.call_id)
        try:
            arguments = json.loads(start.arguments or "{}")
        except json.JSONDecodeError:
            arguments = {}
        right.append(e.name == needs and meaning is not None and meaning(arguments))
    return {
        "heard": " ".join(t.text for t in session.history.turns if t.role == "user"),
        "made": [{"name": s.name, "arguments": s.arguments} for s in started],
        "ran": [e.name for e in ran],
        "arguments_right": right,
        "tool_s": round(tool_s, 3),
        "first_audio_s": round(first_audio[0].t - spoke_end, 3) if first_audio and spoke_end else None,
        "answer_audio_s": round(answer.t - spoke_end - tool_s, 3) if answer and spoke_end else None,
        "filler": "One moment." in chunks,
        "said": " ".join(chunks),
    }


def score(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def pr(key: str) -> tuple[float | None, float | None]:
        made = [(r, n) for r in rows for n in (r[key] if key == "ran" else [m["name"] for m in r[key]])]
        right = [1 for r, n in made if n == r["needs"]]
        needing = [r for r in rows if r["needs"]]
        recalled = [r for r in needing if r["needs"] in (r[key] if key == "ran" else [m["name"] for m in r[key]])]
        return (
            round(len(right) / len(made), 3) if made else None,
            round(len(recalled) / len(needing), 3) if needing else None,
        )

    p_ran, r_ran = pr("ran")
    p_made, r_made = pr("made")
    tool_turns = [r for r in rows if r["ran"]]
    answers = [r["answer_audio_s"] for r in tool_turns if r["answer_audio_s"] is not None]
    firsts = [r["first_audio_s"] for r in rows if r["first_audio_s"] is not None]
    plain = [r["first_audio_s"] for r in rows if not r["made"] and r["first_audio_s"] is not None]
    args = [ok for r in rows for ok, n in zip(r["arguments_right"], r["ran"], strict=True) if n == r["needs"]]
    p50 = lambda xs: round(statistics.median(xs), 3) if xs else None  # noqa: E731
    return {
        "requests": len(rows),
        "precision_ran": p_ran,
        "recall_ran": r_ran,
        "precision_made": p_made,
        "recall_made": r_made,
        "argument_accuracy": round(sum(args) / len(args), 3) if args else None,
        "first_audio_s_p50": p50(firsts),
        "answer_audio_s_p50": p50(answers),
        "no_tool_first_audio_s_p50": p50(plain),
        "tool_s_p50": p50([r["tool_s"] for r in tool_turns]),
        "filler_rate": round(sum(r["filler"] for r in tool_turns) / len(tool_turns), 3) if tool_turns else None,
    }


async def run(slow_s: float) -> dict[str, Any]:
    from shell import models
    from tts.piper_tts import PiperTTS

    tts = PiperTTS(models.voice_path("joe"), ASR_RATE)
    t0 = time.monotonic()
    engines = await asyncio.to_thread(load_engines, EngineConfig(llm_model=MODEL))
    cold_start_s = time.monotonic() - t0
    try:
        await one(engines, load_tools(["builtin"]), speak(tts, "Hello."), None, None)  # warm
        rows, slow_rows = [], []
        for text, needs, meaning in REQUESTS:
            row = await one(engines, load_tools(["builtin"]), speak(tts, text), needs, meaning)
            rows.append({"request": text, "needs": needs, **row})
            print(f"  {text!r}: ran {row['ran']}, answer {row['answer_audio_s']} s, said {row['said'][:60]!r}",
                  flush=True)  # fmt: skip
        for text, needs, meaning in REQUESTS:
            if needs != "get_current_time":
                continue
            row = await one(engines, slow_tools(slow_s), speak(tts, text), needs, meaning)
            slow_rows.append({"request": text, "needs": needs, **row})
            print(f"  slow {text!r}: filler {row['filler']}, said {row['said'][:60]!r}", flush=True)
    finally:
        await engines.aclose()
    return {
        "model": MODEL,
        "cold_start_s": round(cold_start_s, 1),
        "summary": score(rows),
        "slow_time_tool": {"extra_s": slow_s, **score(slow_rows)},
        "requests": rows,
        "slow_requests": slow_rows,
    }


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-tool-turns")
    ap.add_argument("--slow-s", type=float, default=1.5, help="extra seconds the slow time tool takes")
    args = ap.parse_args(argv)
    result = asyncio.run(run(args.slow_s))
    s, slow = result["summary"], result["slow_time_tool"]
    print(f"\n{MODEL}, real time, {s['requests']} spoken requests (cold start {result['cold_start_s']} s)\n")
    print("| calls | precision | recall | argument accuracy |")
    print("|---|---|---|---|")
    print(f"| that ran | {s['precision_ran']} | {s['recall_ran']} | {s['argument_accuracy']} |")
    print(f"| made (refused included) | {s['precision_made']} | {s['recall_made']} | |")
    print("\n| tools | first audio p50 | answer audio p50 (tool time out) | tool time p50 | filler rate |")
    print("|---|---|---|---|---|")
    print(f"| built-in | {s['first_audio_s_p50']} s | {s['answer_audio_s_p50']} s | {s['tool_s_p50']} s "
          f"| {s['filler_rate']} |")  # fmt: skip
    print(f"| time +{args.slow_s:g} s | {slow['first_audio_s_p50']} s | {slow['answer_audio_s_p50']} s "
          f"| {slow['tool_s_p50']} s | {slow['filler_rate']} |")  # fmt: skip
    print(f"\nno tool: first audio p50 {s['no_tool_first_audio_s_p50']} s")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "bench_tool_turns.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"\nwrote {path}")
