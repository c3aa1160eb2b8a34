"""Beyond one machine, measured on this one: workers behind the front door, affinity, resume.

    python -m voice.bench scale [--out DIR] [--workers 1,2,3] [--levels 1,2,4,6,8] [--turns 12]

1. Sessions held in real time by 1, 2 and 3 workers behind HAProxy (deploy/haproxy.cfg as
   shipped), sharing one vLLM server and one PostgreSQL database (Debian's, started on a
   private port): n clients speak a shared recording through the front door at once (their
   starts spread over 2 s), in real time. A level is held when every client was answered and
   no voice-to-voice (end of the question's speech to the reply's first sound, as the client
   hears it) is over twice the single-session p95 of that worker count. The workers run on the
   same 2 cores as everything else: more processes cannot add cores, and that is what this
   shows; on more machines each worker brings its own.
2. TTFT of 12-turn conversations on two vLLM servers through the LLM pool, with affinity (each
   conversation on the replica that caches its prefix) and without (least-loaded, ties in
   turn). Three conversations take turns, so without affinity a conversation's next request
   usually lands on the replica that has not seen it. The replies are the servers' own.
3. TTFT p50/p95/p99 and inter-token latency under load: 1, 2, 4 and 8 requests at once (two
   waves each), against one vLLM server and against two through the pool.
4. Time to resume on another worker: a conversation's worker is killed (SIGKILL), the client
   reconnects through the front door at once with its id, and the time to its ``ready`` (the
   stored history included) is taken.

Prints Markdown tables and writes DIR/scale.json. Cold starts (servers, workers) are reported
apart.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from websockets.asyncio.client import connect

from llm.pool import LLMPool
from shell.models import llm_model_path
from transport.client import talk
from transport.files import load_audio
from voice.app.latency import percentile
from voice.bench.common import ROOT, free_port, parser, recordings
from voice.bench.deployment import FrontDoor, Worker, worker_args
from voice.bench.postgres import PostgresServer
from voice.bench.vllm_server import launch_vllm_server, stop_server

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR"}

RECORDING = "cmu_arctic_us_aew_a0003"
QUESTIONS = [
    "What is a good name for a cat?", "Why is the sky blue?", "How far away is the moon?",
    "What should I cook tonight?", "Can you tell me a fun fact about owls?", "How do trains stay on the rails?",
    "What is the tallest mountain?", "How do bees make honey?", "Why does bread rise?",
    "What is the capital of Australia?", "How do maps show height?", "What makes snow white?",
]  # fmt: skip


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def speech_end_s(audio: np.ndarray, rate: int = 16000) -> float:
    """Where the last 20 ms frame louder than -40 dBFS ends: the end of the speech."""
    frame = rate // 50
    frames = audio[: len(audio) // frame * frame].reshape(-1, frame)
    loud = np.flatnonzero(np.sqrt((frames**2).mean(axis=1)) > 0.01)
    return float((loud[-1] + 1) * frame / rate) if len(loud) else len(audio) / rate


# -- 1. sessions held by 1, 2, 3 workers ------------------------------------------------------


async def one_client(url: str, audio: np.ndarray, delay_s: float) -> float | None:
    await asyncio.sleep(delay_s)
    result = await talk(url, audio, quiet_s=2.0, max_tail_s=30.0)
    start = result.playback_start_s()
    return None if start is None else float(start - speech_end_s(audio))


async def sweep(url: str, audio: np.ndarray, levels: list[int]) -> list[dict]:
    rows: list[dict] = []
    # One session at a time, three times: the figure the levels are held against.
    alone = [v for v in [await one_client(url, audio, 0.0) for _ in range(3)] if v is not None]
    single_p95 = percentile(alone, 0.95)
    for n in levels:
        answered = [v for v in await asyncio.gather(*(one_client(url, audio, 2.0 * k / n) for k in range(n))) if v]
        held = bool(len(answered) == n and single_p95 is not None and max(answered) <= 2 * single_p95)
        rows.append({
            "sessions": n, "answered": len(answered), "held": held,
            "voice_to_voice_p50_s": percentile(answered, 0.5),
            "voice_to_voice_max_s": percentile(answered, 1.0),
            "alone_p95_s": single_p95,
        })  # fmt: skip
        print(f"  {rows[-1]}", file=sys.stderr, flush=True)
        if not held:
            break
    return rows


async def workers_scaling(work: Path, pg_url: str, llm_url: str, counts: list[int], levels: list[int]) -> dict:
    audio = load_audio(next(r for r in recordings() if r.name == RECORDING).path)
    out: dict = {"recording": RECORDING, "levels": levels, "by_workers": {}}
    for n_workers in counts:
        address = f"127.0.0.1:{free_port()}"
        args = worker_args(pg_url, [llm_url], address, max(levels))
        workers = [Worker(free_port(), work / f"scale{n_workers}-{i}.log", args) for i in range(n_workers)]
        t0 = time.monotonic()
        for w in workers:
            w.start()
        front = None
        try:
            for w in workers:
                w.wait_ready()
            cold = time.monotonic() - t0
            front = FrontDoor(address, workers, max(levels), work / f"haproxy{n_workers}.log")
            await asyncio.sleep(2.5)  # every worker checked by the front door
            for _ in workers:  # warm each worker: the first turn of a process is slower
                await one_client(front.url, audio, 0.0)
            print(f"{n_workers} worker(s), ready in {cold:.1f} s:", file=sys.stderr, flush=True)
            rows = await sweep(front.url, audio, levels)
        finally:
            if front is not None:
                front.close()
            for w in workers:
                w.stop()
        held = max((r["sessions"] for r in rows if r["held"]), default=0)
        out["by_workers"][str(n_workers)] = {"cold_start_s": round(cold, 1), "rows": rows, "max_sessions_held": held}
    one = out["by_workers"].get("1", {}).get("max_sessions_held")
    for v in out["by_workers"].values():
        v["ratio_vs_one_worker"] = round(v["max_sessions_held"] / one, 2) if one else None
    return out


# -- 2. affinity ----------------------------------------------------------------------------------


async def conversations_ttft(urls: list[str], affinity: bool, turns: int, n_conversations: int = 3) -> dict:
    """TTFT of each request of ``n_conversations`` conversations that take turns, on a pool."""
    pool = LLMPool(urls, affinity=affinity)
    histories = [
        [{"role": "system", "content": f"You are a helpful voice assistant. Conversation {c}."}]
        for c in range(n_conversations)
    ]
    ttft: dict[int, list[float]] = {}
    replicas: list[list[int]] = [[] for _ in range(n_conversations)]
    try:
        for turn in range(turns):
            for c, messages in enumerate(histories):
                messages.append({"role": "user", "content": QUESTIONS[(turn + c) % len(QUESTIONS)]})
                before = [r["served"] for r in pool.replicas_state()]
                t0, first, text = time.monotonic(), None, ""
                async for delta in pool.stream(messages):
                    if first is None:
                        first = time.monotonic() - t0
                    text += delta
                messages.append({"role": "assistant", "content": text})
                ttft.setdefault(turn + 1, []).append(first or 0.0)
                after = [r["served"] for r in pool.replicas_state()]
                replicas[c].append(next(i for i, (a, b) in enumerate(zip(after, before, strict=True)) if a > b))
    finally:
        await pool.close()
    later = [v for t, vs in ttft.items() if t >= 2 for v in vs]
    moves = sum(sum(1 for a, b in itertools.pairwise(r) if a != b) for r in replicas)
    return {
        "affinity": affinity,
        "ttft_turn1_p50_s": percentile(ttft[1], 0.5),
        "ttft_later_turns_p50_s": percentile(later, 0.5),
        "ttft_later_turns_p95_s": percentile(later, 0.95),
        "ttft_last_turn_p50_s": percentile(ttft[turns], 0.5),
        "replica_changes": moves,
        "replicas_by_conversation": replicas,
    }


# -- 3. TTFT under load --------------------------------------------------------------------------


async def under_load(urls: list[str], levels: list[int]) -> list[dict]:
    rows = []
    for n in levels:
        pool = LLMPool(urls, affinity=False)
        ttfts: list[float] = []
        gaps: list[float] = []

        async def one(k: int, pool=pool, ttfts=ttfts, gaps=gaps) -> None:
            messages = [
                {"role": "system", "content": "You are a helpful voice assistant."},
                {"role": "user", "content": QUESTIONS[k % len(QUESTIONS)]},
            ]
            t0 = last = time.monotonic()
            first = True
            async for delta in pool.stream(messages):
                now = time.monotonic()
                if first:
                    ttfts.append(now - t0)
                    first = False
                elif delta.tokens:
                    gaps.append((now - last) / delta.tokens)
                last = now

        try:
            for wave in range(2):
                await asyncio.gather(*(one(wave * n + k) for k in range(n)))
        finally:
            await pool.close()
        rows.append({
            "servers": len(urls), "concurrency": n,
            "ttft_p50_s": percentile(ttfts, 0.5), "ttft_p95_s": percentile(ttfts, 0.95),
            "ttft_p99_s": percentile(ttfts, 0.99),
            "itl_p50_s": percentile(gaps, 0.5), "itl_p95_s": percentile(gaps, 0.95),
        })  # fmt: skip
        print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    return rows


# -- 4. resume on another worker ----------------------------------------------------------------


async def ready_time(url: str, session: str) -> tuple[float, int]:
    t0 = time.monotonic()
    async with connect(url, open_timeout=30) as ws:
        await ws.send(json.dumps({"type": "hello", "sample_rate": 16000, "session": session}))
        while True:
            message = json.loads(await ws.recv())
            if message["type"] == "ready":
                return time.monotonic() - t0, len(message.get("history", []))


async def resume_times(work: Path, pg_url: str, llm_url: str, runs: int) -> dict:
    audio = load_audio(next(r for r in recordings() if r.name == RECORDING).path)
    address = f"127.0.0.1:{free_port()}"
    args = worker_args(pg_url, [llm_url], address, 4)
    workers = [Worker(free_port(), work / f"resume{i}.log", args).start() for i in range(2)]
    front = None
    times: list[float] = []
    warm: list[float] = []
    try:
        for w in workers:
            w.wait_ready()
        front = FrontDoor(address, workers, 4, work / "haproxy-resume.log")
        for _ in range(runs):
            await asyncio.sleep(2.5)  # both workers checked (up) by the front door
            result = await talk(front.url, audio, quiet_s=2.0)
            warm.append((await ready_time(front.url, result.session))[0])  # its worker alive: a plain resume
            served = next(w for w in workers if result.session in w.log.read_text())
            served.kill()
            elapsed, history = await ready_time(front.url, result.session)
            assert history >= 2, f"resumed without its history ({history} turns)"
            times.append(elapsed)
            print(f"  resumed on another worker in {ms(elapsed)} ms ({history} turns)", file=sys.stderr, flush=True)
            served.start().wait_ready()
    finally:
        if front is not None:
            front.close()
        for w in workers:
            w.stop()
    return {
        "runs": runs,
        "after_sigkill_s": times,
        "after_sigkill_p50_s": percentile(times, 0.5),
        "after_sigkill_max_s": max(times, default=None),
        "worker_alive_p50_s": percentile(warm, 0.5),
    }


async def _main(argv: list[str] | None) -> None:
    ap = parser(__name__, description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--workers", default="1,2,3", help="worker counts to try")
    ap.add_argument("--levels", default="1,2,4,6,8", help="sessions at once to try, in order")
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--resumes", type=int, default=3)
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.workers.split(",")]
    levels = [int(x) for x in args.levels.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    result: dict = {"machine": f"{os.cpu_count()} CPUs, no GPU", "model": "smollm2-135m"}
    llms = []
    with PostgresServer() as pg:
        try:
            t0 = time.monotonic()
            urls = []
            for i in range(2):
                (work / f"vllm{i}").mkdir()
                url, proc = launch_vllm_server(llm_model_path("smollm2-135m"), work / f"vllm{i}")
                urls.append(url)
                llms.append(proc)
            result["vllm_cold_start_s"] = round((time.monotonic() - t0) / 2, 1)
            print("affinity:", file=sys.stderr, flush=True)
            with_ = await conversations_ttft(urls, True, args.turns)
            without = await conversations_ttft(urls, False, args.turns)
            result["affinity"] = {"turns": args.turns, "conversations": 3, "with": with_, "without": without}
            w, wo = with_["ttft_later_turns_p50_s"], without["ttft_later_turns_p50_s"]
            result["affinity"]["ttft_ratio_with_vs_without_p50"] = round(w / wo, 3) if w and wo else None
            print("under load:", file=sys.stderr, flush=True)
            result["load"] = [
                *(await under_load(urls[:1], [1, 2, 4, 8])),
                *(await under_load(urls, [1, 2, 4, 8])),
            ]
            stop_server(llms.pop())  # the rest runs on one LLM server: the workers are what is measured
            print("workers:", file=sys.stderr, flush=True)
            result["workers"] = await workers_scaling(work, pg.create_database("scale"), urls[0], counts, levels)
            print("resume:", file=sys.stderr, flush=True)
            result["resume"] = await resume_times(work, pg.create_database("resume"), urls[0], args.resumes)
        finally:
            for proc in llms:
                stop_server(proc)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(result, indent=2, default=float) + "\n")
    report(result)
    print(f"\nwrote {args.out}/scale.json (logs in {work})")


def report(r: dict) -> None:
    print(f"\nCold start: a vLLM server {r['vllm_cold_start_s']} s; a worker (below) to /health ready.")
    print("\n| workers | sessions held in real time | ratio to 1 worker | voice-to-voice p50 there | cold start |")
    print("|---|---|---|---|---|")
    for n, v in r["workers"]["by_workers"].items():
        held = [x for x in v["rows"] if x["held"]]
        p50 = ms(held[-1]["voice_to_voice_p50_s"]) if held else None
        print(f"| {n} | {v['max_sessions_held']} | {v['ratio_vs_one_worker']} | {p50} ms | {v['cold_start_s']} s |")
    a = r["affinity"]
    print(f"\nTTFT, {a['conversations']} conversations of {a['turns']} turns taking turns, two vLLM servers:\n")
    print("| routing | turn 1 p50 | turns 2+ p50 | turns 2+ p95 | last turn p50 | replica changes |")
    print("|---|---|---|---|---|---|")
    for name in ("with", "without"):
        x = a[name]
        print(
            f"| {'affinity' if x['affinity'] else 'least-loaded'} | {ms(x['ttft_turn1_p50_s'])} ms | "
            f"{ms(x['ttft_later_turns_p50_s'])} ms | {ms(x['ttft_later_turns_p95_s'])} ms | "
            f"{ms(x['ttft_last_turn_p50_s'])} ms | {x['replica_changes']} |"
        )
    print(f"\nwith/without, turns 2+ p50: {a['ttft_ratio_with_vs_without_p50']}")
    print("\nTTFT and inter-token latency under load (requests at once), ms:\n")
    print("| servers | at once | TTFT p50 | TTFT p95 | TTFT p99 | ITL p50 | ITL p95 |\n|---|---|---|---|---|---|---|")
    for x in r["load"]:
        print(
            f"| {x['servers']} | {x['concurrency']} | {ms(x['ttft_p50_s'])} | {ms(x['ttft_p95_s'])} | "
            f"{ms(x['ttft_p99_s'])} | {ms(x['itl_p50_s'])} | {ms(x['itl_p95_s'])} |"
        )
    res = r["resume"]
    print(
        f"\nResume on another worker after SIGKILL (reconnect to ready, history included): p50 "
        f"{ms(res['after_sigkill_p50_s'])} ms, max {ms(res['after_sigkill_max_s'])} ms over {res['runs']}; "
        f"a plain resume with the worker alive: p50 {ms(res['worker_alive_p50_s'])} ms."
    )


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))
