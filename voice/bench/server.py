"""The WebSocket server measured from its clients, on the real engines, in real time.

    python -m voice.bench server [--out DIR] [--sessions 1,2,4]     (default: out/bench-server)

One process: the engines are loaded once (cold start reported apart), the
server listens on loopback, and `transport.client.talk` clients speak the
shared recordings to it in real time, each playing the reply as a speaker
would and reporting what it played. Reported:

- voice-to-voice at the client (end of the person's speech to the first reply
  sample out of the client's speaker) over /ws, against the same recording
  replayed in-process on the same engines, one after the other: the ratio is
  what the network path costs;
- the same with 1, 2, 4 clients at once (different recordings);
- barge-in at the client: the interruption's speech onset to the pause
  arriving at the client, and how far the truncation is from what the
  client had played (ms).

Prints Markdown tables and writes DIR/server.json.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import numpy as np

from voice.app.latency import percentile
from voice.bench.common import ROOT, parser

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR", "TQDM_DISABLE": "1"}

RECORDINGS = ["aew_a0003", "axb_a0004", "LJ001-0002", "LJ001-0005"]


def speech_onset(audio: np.ndarray, rate: int = 16000, floor_db: float = -35.0) -> float:
    frames = audio[: len(audio) // 160 * 160].reshape(-1, 160)
    db = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)
    loud = np.flatnonzero(db > floor_db)
    return float(loud[0]) * 0.01 if len(loud) else 0.0


def first_sound_s(audio: np.ndarray, rate: int, threshold: float = 1e-4) -> float | None:
    loud = np.flatnonzero(np.abs(audio) > threshold)
    return float(loud[0]) / rate if len(loud) else None


def v2v(speech_ends: list[float], reply: np.ndarray, rate: int) -> float | None:
    """End of the first utterance to the first reply sample out of the speaker (same rule both ways)."""
    start = first_sound_s(reply, rate)
    if not speech_ends or start is None:
        return None
    return round(start - speech_ends[0], 3)


def client_v2v(result) -> float | None:
    return v2v([e["end"] for e in result.of("speech_end")], result.reply, result.output_rate)


async def _main(argv: list[str] | None) -> None:
    import argparse

    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-server")
    ap.add_argument("--sessions", default="1,2,4")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    from core.events import Event, SpeechEnd
    from shell.clock import MonotonicClock
    from shell.engines import EngineConfig, load_engines
    from shell.session import Session
    from transport.client import talk
    from transport.files import load_audio
    from transport.replay import replay
    from transport.ws_server import ServerConfig, VoiceServer
    from voice.bench.common import recordings

    recs = {n: next(r for r in recordings() if n in r.name) for n in RECORDINGS}
    audio = {n: load_audio(r.path) for n, r in recs.items()}
    t0 = time.monotonic()
    engines = await asyncio.to_thread(load_engines, EngineConfig())
    cold = round(time.monotonic() - t0, 1)
    server = VoiceServer(engines, ServerConfig(port=0))
    await server.start()
    url = f"ws://127.0.0.1:{server.port}/ws"
    await talk(url, audio["axb_a0004"])  # warm-up: the first turn after start is not typical

    # 1. Over the network vs in-process, alternating, one session at a time.
    pairs = []
    for name in RECORDINGS:
        events: list[Event] = []
        session = Session(engines, MonotonicClock(), on_event=events.append)
        try:
            played = await replay(session, audio[name], settle=False)
        finally:
            await session.aclose()
        local = v2v([e.end for e in events if isinstance(e, SpeechEnd)], played.reply, engines.output_rate)
        remote = client_v2v(await talk(url, audio[name]))
        pairs.append({"recording": name, "in_process_s": local, "websocket_s": remote})
    ratios = [p["websocket_s"] / p["in_process_s"] for p in pairs if p["in_process_s"] and p["websocket_s"]]

    # 2. Sessions at once.
    sweep = []
    for n in [int(x) for x in args.sessions.split(",")]:
        names = [RECORDINGS[i % len(RECORDINGS)] for i in range(n)]
        results = await asyncio.gather(*(talk(url, audio[m]) for m in names))
        times = [client_v2v(r) for r in results]
        sweep.append({
            "sessions": n,
            "v2v_p50_s": percentile(times, 0.5),
            "v2v_max_s": max((v for v in times if v is not None), default=None),
            "answered": sum(1 for r in results if r.of("turn_end")),
        })  # fmt: skip

    # 3. Barge-in at the client (a client that honours pause and reports what it played).
    interruption = audio["LJ001-0005"][: 16000 * 3]
    onset = speech_onset(interruption)
    barge = []
    for name in ("aew_a0003", "axb_a0004", "LJ001-0002"):
        for after in (1.0, 2.0):
            r = await talk(url, audio[name], interrupt=(interruption, after), max_tail_s=40)
            paused = [e for e in r.of("playback_paused") if r.interrupted_at_s and e["client_t"] >= r.interrupted_at_s]
            trunc = r.of("truncate")
            pause_ms = round((paused[0]["client_t"] - r.interrupted_at_s - onset) * 1000) if paused else None
            barge.append({
                "recording": name,
                "after_s": after,
                "barge_in": bool(r.of("barge_in")),
                "pause_at_client_ms": pause_ms,
                "truncation_vs_played_ms": (
                    round(trunc[0]["audio_end_ms"] - r.played_at_stop * 1000 / r.output_rate)
                    if trunc and r.played_at_stop is not None else None
                ),
            })  # fmt: skip
    await server.close()
    await engines.aclose()

    report = {
        "cold_start_s": cold,
        "network_vs_in_process": pairs,
        "ratio_p50": percentile(ratios, 0.5),
        "sessions": sweep,
        "barge_in_at_client": barge,
        "pause_at_client_ms_p50": percentile([b["pause_at_client_ms"] for b in barge], 0.5),
        "pause_at_client_ms_max": max((b["pause_at_client_ms"] or 0 for b in barge), default=None),
    }
    (args.out / "server.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"cold start {cold} s\n")
    print("| recording | in-process v2v (s) | over /ws, at the client (s) |\n|---|---|---|")
    for p in pairs:
        print(f"| {p['recording']} | {p['in_process_s']} | {p['websocket_s']} |")
    print(f"\nratio /ws over in-process, p50: {report['ratio_p50']}\n")
    print("| sessions | v2v p50 (s) | v2v max (s) | answered |\n|---|---|---|---|")
    for s in sweep:
        print(f"| {s['sessions']} | {s['v2v_p50_s']} | {s['v2v_max_s']} | {s['answered']}/{s['sessions']} |")
    print("\n| recording | interrupt after (s) | barge-in | pause at client (ms) | truncation - played (ms) |")
    print("|---|---|---|---|---|")
    for b in barge:
        print(f"| {b['recording']} | {b['after_s']} | {b['barge_in']} | {b['pause_at_client_ms']} | "
              f"{b['truncation_vs_played_ms']} |")  # fmt: skip
    print(f"\nwrote {args.out}/server.json")


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))
