"""The server's memory over many sessions, for each way of handing freed memory back (shell/heap.py).

    python -m voice.bench session_memory [--out DIR] [--cycles 1000] [--rounds 4] [--strategies none,trim,...]

For each strategy, a fresh server (`python -m voice.run --serve`, the real
engines, in a subprocess; the strategy is given by its environment:
VOICE_HEAP, or glibc's MALLOC_* variables read at the process's start):

1. one warm-up spoken conversation over /ws (a real recording, in real time,
   by transport.client.talk); the server's RSS after it is the reference;
2. CYCLES sessions on /ws (open, hello, 0.2 s of speech, close), then CYCLES on
   /v1/realtime (open, session.created, 0.2 s of speech, close), CONCURRENCY at
   a time; the server's RSS (VmRSS in /proc/PID/status) every 100 cycles;
3. one more conversation alone, and one while sessions open and close
   around it (voice-to-voice at the client), and how long a session took to
   open (hello to ready), p50/p95.

Voice-to-voice is too noisy on a shared CPU to show a cost of tens of ms, so
what a strategy costs the engines is measured apart: in a fresh process per
strategy and round (ROUNDS rounds, the strategies interleaved), the same code
as the server's at start-up (heap.tune), then the median time of the final
Whisper pass on the recording, a partial pass (2 s), a sentence of TTS, 2 s
of VAD and 1 s of echo cancelling; with a trim strategy, malloc_trim(0) runs
before each pass (as if a session had closed between any two).

Prints Markdown tables and writes DIR/session_memory.json (every sample).
Strategies: none, trim, mmap, mmap+trim, mmap-4m (VOICE_HEAP), env-arena2 and
env-mmap (MALLOC_ARENA_MAX=2, MALLOC_MMAP_THRESHOLD_=131072 from the start).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from voice.app.latency import percentile
from voice.bench.common import ROOT, SHARED_SPEECH, free_port, parser
from voice.bench.serve_process import ServeProcess

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1"}

STRATEGIES: dict[str, dict[str, str]] = {
    "none": {"VOICE_HEAP": "none"},
    "trim": {"VOICE_HEAP": "trim"},
    "mmap": {"VOICE_HEAP": "mmap"},
    "mmap+trim": {"VOICE_HEAP": "mmap+trim"},
    "mmap-4m": {"VOICE_HEAP": "mmap-4m"},
    "env-arena2": {"VOICE_HEAP": "none", "MALLOC_ARENA_MAX": "2"},
    "env-mmap": {"VOICE_HEAP": "none", "MALLOC_MMAP_THRESHOLD_": "131072"},
}
RECORDING = "cmu_arctic_us_aew_a0003.wav"
SPEECH_S = 0.2  # the little audio each cycle sends
PROBE_PASSES = 9  # timed passes per engine in a probe
QUIET_S = 4.0  # a conversation is over after this long without an event (the final pass may be slow on a busy CPU)


def recording() -> Path:
    shared = SHARED_SPEECH / RECORDING
    return shared if shared.exists() else ROOT / "tests" / "fixtures" / RECORDING


def v2v(result) -> float | None:
    """End of the first utterance to the first reply sample out of the client's speaker."""
    loud = np.flatnonzero(np.abs(result.reply) > 1e-4)
    ends = [e["end"] for e in result.of("speech_end")]
    if not ends or not len(loud):
        return None
    return round(float(loud[0]) / result.output_rate - ends[0], 3)


class Server(ServeProcess):
    """The server with the strategy's environment (``root``: the tree it runs from), started at once."""

    def __init__(self, env: dict[str, str], work: Path, root: Path = ROOT) -> None:
        self.port = free_port()
        full_env = {**os.environ, **env, "PYTHONPATH": str(root)}
        for key in ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
            if key not in env:
                full_env.pop(key, None)
        args = ["--port", str(self.port), "--db", str(work / "c.db"), "--max-sessions", "16"]
        super().__init__(args, work / "server.log", env=full_env, cwd=root)
        self.start()

    async def ready(self, timeout_s: float = 900) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        async with httpx.AsyncClient(trust_env=False) as http:
            while time.monotonic() < deadline:
                if not self.alive():
                    raise RuntimeError(f"the server exited: {self.log_text()[-3000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"http://127.0.0.1:{self.port}/health", timeout=1)).status_code == 200:
                        return
                await asyncio.sleep(1)
        raise RuntimeError(f"the server did not come up in {timeout_s:.0f} s")

    def rss_mb(self) -> float:
        return round(super().rss_mb(), 1)


async def ws_cycle(url: str, speech: np.ndarray) -> float:
    """/ws: open, hello, a little speech, close; returns hello-to-ready in ms."""
    from websockets.asyncio.client import connect

    from transport.protocol import float_to_pcm16

    async with connect(url, compression=None) as ws:
        t0 = time.perf_counter()
        await ws.send(json.dumps({"type": "hello", "sample_rate": 16000}))
        while json.loads(await ws.recv())["type"] != "ready":
            pass
        opened = (time.perf_counter() - t0) * 1000
        for i in range(0, len(speech), 320):
            await ws.send(float_to_pcm16(speech[i : i + 320]))
        await asyncio.sleep(SPEECH_S + 0.05)  # the server feeds it at real time
    return opened


async def realtime_cycle(url: str, speech_24k: np.ndarray) -> float:
    """/v1/realtime: open (the session starts), session.created, a little speech, close; returns open-to-created."""
    from websockets.asyncio.client import connect

    from transport.protocol import float_to_pcm16

    t0 = time.perf_counter()
    async with connect(url, compression=None) as ws:
        while json.loads(await ws.recv())["type"] != "session.created":
            pass
        opened = (time.perf_counter() - t0) * 1000
        audio = base64.b64encode(float_to_pcm16(speech_24k)).decode()
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
        await asyncio.sleep(SPEECH_S + 0.05)
    return opened


async def churn(cycle, n: int | None, concurrency: int, on_done=None, failed: list | None = None) -> list[float]:
    """``n`` cycles (None: until cancelled), ``concurrency`` at a time; ``on_done(count)`` after each."""
    opened: list[float] = []
    started = done = 0

    async def worker() -> None:
        nonlocal started, done
        while n is None or started < n:
            started += 1
            try:
                opened.append(await cycle())
            except (OSError, ConnectionError, RuntimeError) as e:  # counted, not fatal: the server is what is measured
                if failed is not None:
                    failed.append(repr(e))
            done += 1
            if on_done is not None:
                on_done(done)

    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    try:
        await asyncio.gather(*workers)
    finally:
        for t in workers:
            t.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return opened


async def measure(name: str, env: dict[str, str], args, audio: np.ndarray) -> dict:
    from transport.client import talk
    from transport.files import load_audio

    onset = int(0.6 * 16000)  # into the words (the recording starts with silence)
    speech = audio[onset : onset + round(SPEECH_S * 16000)]
    speech_24k = load_audio(recording(), 24000)[int(0.6 * 24000) : int(0.6 * 24000) + round(SPEECH_S * 24000)]
    with tempfile.TemporaryDirectory() as work:
        server = Server(env, Path(work), args.root)
        t0 = time.monotonic()
        try:
            await server.ready()
            cold = round(time.monotonic() - t0, 1)
            ws_url = f"ws://127.0.0.1:{server.port}/ws"
            rt_url = f"ws://127.0.0.1:{server.port}/v1/realtime"
            rss = {"start": server.rss_mb()}
            warm = await talk(ws_url, audio, quiet_s=QUIET_S)
            await asyncio.sleep(2)
            rss["warm"] = server.rss_mb()
            samples: list[dict] = [{"cycles": 0, "path": "warm", "rss_mb": rss["warm"]}]
            print(f"[{name}] ready in {cold} s; RSS {rss['start']} MB, after the warm-up {rss['warm']} MB", flush=True)
            opened: dict = {}
            failed: list[str] = []
            for path, cycle in (
                ("/ws", lambda: ws_cycle(ws_url, speech)),
                ("/v1/realtime", lambda: realtime_cycle(rt_url, speech_24k)),
            ):
                done_before = len(samples) and samples[-1]["cycles"]

                def sample(count: int, path=path, base=done_before) -> None:
                    if count % args.every == 0:
                        samples.append({"cycles": base + count, "path": path, "rss_mb": server.rss_mb()})
                        print(f"[{name}] {path} {count}: RSS {samples[-1]['rss_mb']} MB", flush=True)

                t1 = time.monotonic()
                opened[path] = await churn(cycle, args.cycles, args.concurrency, sample, failed)
                opened[path + " s"] = round(time.monotonic() - t1, 1)
                await asyncio.sleep(2)  # the last closes finish
                rss[path] = server.rss_mb()
            quiet = await talk(ws_url, audio, quiet_s=QUIET_S)
            background = asyncio.create_task(churn(lambda: ws_cycle(ws_url, speech), None, 2))
            try:
                busy = await talk(ws_url, audio, quiet_s=QUIET_S)
            finally:
                background.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await background
            await asyncio.sleep(2)
            rss["end"] = server.rss_mb()
        finally:
            server.stop()
    warm_mb = rss["warm"]
    return {
        "strategy": name,
        "env": env,
        "server": str(args.root),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=args.root, capture_output=True, text=True
        ).stdout.strip(),
        "cold_start_s": cold,
        "rss_mb": rss,
        "growth_ws_pct": round(100 * (rss["/ws"] - warm_mb) / warm_mb, 1),
        "growth_all_pct": round(100 * (rss["/v1/realtime"] - warm_mb) / warm_mb, 1),
        "samples": samples,
        "open_ms": {
            path: {"p50": round(percentile(v, 0.5), 1), "p95": round(percentile(v, 0.95), 1)}
            for path, v in opened.items()
            if isinstance(v, list)
        },
        "cycles_wall_s": {path[:-2]: v for path, v in opened.items() if not isinstance(v, list)},
        "failed_cycles": failed,
        "v2v_s": {"warm_up": v2v(warm), "alone": v2v(quiet), "with_sessions_churning": v2v(busy)},
        "answered": {
            "warm_up": bool(warm.of("turn_end")),
            "alone": bool(quiet.of("turn_end")),
            "with_sessions_churning": bool(busy.of("turn_end")),
        },
    }


def probe() -> dict:
    """In this process: the strategy (VOICE_HEAP, as the server sets it), then each engine pass's median time."""
    from asr.echo import EchoCanceller
    from asr.vad import SileroVAD, load_session
    from asr.whisper import WhisperRecognizer
    from shell import heap, models
    from shell.engines import EngineConfig
    from transport.files import load_audio
    from tts.piper_tts import PiperTTS

    cfg = EngineConfig()
    final = WhisperRecognizer(models.asr_model_path(cfg.asr_model), cfg.device, pad_s=cfg.asr_window_pad_s)
    partial = WhisperRecognizer(
        models.asr_model_path(cfg.partial_model), cfg.device, cpu_threads=1, pad_s=cfg.asr_window_pad_s
    )
    tts = PiperTTS(models.voice_path(cfg.voices.default), cfg.output_rate)
    vad_model = load_session(models.vad_model_path())
    audio = load_audio(recording())
    heap.tune()
    trim = "trim" in heap.strategy()

    def vad() -> None:
        v = SileroVAD(vad_model)
        for i in range(0, 32000, 512):
            v(audio[i : i + 512])

    def aec() -> None:
        EchoCanceller().process(audio[:16000], np.zeros(16000, np.float32))

    passes = {
        "asr_final": lambda: final.recognize(audio),
        "asr_partial": lambda: partial.transcribe(audio[:32000]),
        "tts": lambda: list(tts.synthesize("It is noon now and the sun is high in the sky today.")),
        "vad_2s": vad,
        "aec_1s": aec,
    }
    out: dict = {"heap": heap.strategy()}  # what heap.strategy() says: "none" under the env-* ones
    for name, run in passes.items():
        run()  # the first pass sizes the engine's buffers
        times = []
        for _ in range(PROBE_PASSES):
            if trim:
                heap.trim()
            t0 = time.perf_counter()
            run()
            times.append((time.perf_counter() - t0) * 1000)
        out[name] = round(float(np.median(times)), 1)
    return out


def run_probe(env: dict[str, str]) -> dict:
    """:func:`probe` in a fresh process with the strategy's environment (this checkout's code, whatever --root)."""
    full_env = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
    for key in ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        if key not in env:
            full_env.pop(key, None)
    proc = subprocess.run(
        [sys.executable, "-m", "voice.bench", "session_memory", "--probe"],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the probe failed: {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(results: list[dict], n: int) -> str:
    rows = [
        f"RSS of the server (MB): after the warm-up conversation, after {n} sessions on /ws, after {n} more on "
        "/v1/realtime, and the growth over the warm-up; a session's opening (hello to ready, p50/p95 ms); "
        "voice-to-voice at the client (s), alone and while sessions open and close.",
        "",
        "| server | strategy | warm-up | +/ws | +/v1/realtime | growth /ws | growth all | open /ws | open realtime "
        "| v2v alone | v2v churning |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rss, o, v = r["rss_mb"], r["open_ms"], r["v2v_s"]
        cells = [
            r.get("commit", "this"), r["strategy"], rss["warm"], rss["/ws"], rss["/v1/realtime"],
            f"{r['growth_ws_pct']:+}%", f"{r['growth_all_pct']:+}%",
            f"{o['/ws']['p50']}/{o['/ws']['p95']}", f"{o['/v1/realtime']['p50']}/{o['/v1/realtime']['p95']}",
            v["alone"], v["with_sessions_churning"],
        ]  # fmt: skip
        rows.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(rows)


def probe_table(probes: list[dict]) -> str:
    kinds = ["asr_final", "asr_partial", "tts", "vad_2s", "aec_1s"]
    rows = [
        "Engine passes in a fresh process with the strategy (ms; median over the rounds of each round's median); "
        "with trim, malloc_trim(0) before each pass.",
        "",
        "| server | strategy | rounds | " + " | ".join(kinds) + " |",
        "|---|---|---|" + "---|" * len(kinds),
    ]
    keys = sorted(
        {(p["commit"], p["strategy"]) for p in probes}, key=lambda k: [p["strategy"] for p in probes].index(k[1])
    )
    for commit, name in keys:
        mine = [p for p in probes if p["strategy"] == name and p["commit"] == commit]
        cells = [f"{percentile([p[k] for p in mine], 0.5):.0f}" for k in kinds]
        rows.append(f"| {commit} | {name} | {len(mine)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


async def _main(argv: list[str] | None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-session-memory")
    ap.add_argument("--cycles", type=int, default=1000, help="sessions on each path (default 1000)")
    ap.add_argument("--every", type=int, default=100, help="sample RSS every N cycles")
    ap.add_argument("--concurrency", type=int, default=4, help="sessions open at once while cycling")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help=f"of {', '.join(STRATEGIES)}")
    ap.add_argument(
        "--root", type=Path, default=ROOT, help="the checkout whose server is measured (another: before and after)"
    )
    ap.add_argument("--append", action="store_true", help="add these runs to DIR/session_memory.json's")
    ap.add_argument("--rounds", type=int, default=4, help="rounds of engine-pass probes (0: none)")
    ap.add_argument("--no-server", action="store_true", help="only the engine-pass probes")
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)  # (one probe, in a subprocess)
    args = ap.parse_args(argv)
    if args.probe:
        print(json.dumps(probe()))
        return
    names = args.strategies.split(",")
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        ap.error(f"unknown strategies: {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)

    from transport.files import load_audio

    audio = load_audio(recording())
    path = args.out / "session_memory.json"
    before = json.loads(path.read_text()) if args.append and path.exists() else {}
    results, probes = before.get("runs", []), before.get("probes", [])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)

    def save() -> None:
        report = {"recording": RECORDING, "cycles": args.cycles, "concurrency": args.concurrency, "runs": results,
                  "probes": probes}  # fmt: skip
        path.write_text(json.dumps(report, indent=2) + "\n")

    for name in [] if args.no_server else names:
        results.append(await measure(name, STRATEGIES[name], args, audio))
        save()
    for i in range(args.rounds):
        for name in names if i % 2 == 0 else names[::-1]:
            got = await asyncio.to_thread(run_probe, STRATEGIES[name])
            probes.append({"round": i, "strategy": name, "commit": commit.stdout.strip(), **got})
            print(f"[probe {i}] {name}: {got}", flush=True)
            save()

    if results:
        print(table(results, args.cycles))
    if probes:
        print("\n" + probe_table(probes))
    print(f"\nwrote {args.out}/session_memory.json")


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))
