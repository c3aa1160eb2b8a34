"""Voice-to-voice over each transport, against /ws, for the same recordings in one run.

    python -m voice.bench transports [--out DIR] [--rounds 1]        (default: docs/bench)

One server (the embedded default engines, in this process) and, for each single-utterance
shared recording, three clients in turn, each saying it in real time on loopback:

- ``/ws``: our protocol, 16 kHz PCM16 (``transport/client.py``);
- ``twilio``: Twilio Media Streams at ``/telephony/twilio``, 8 kHz mu-law (``tests/twilio_caller.py``);
- ``webrtc``: aiortc, Opus both ways, ``POST /webrtc/offer`` (``tests/webrtc_client.py``).

Voice-to-voice is measured where a person would be: from the end of the recording's speech
(its last 20 ms frame over -40 dBFS, sent in real time) to the first reply audio that reached
the client (WebRTC: out of aiortc's jitter buffer). The order of the transports turns with
each recording. The call's greeting and idle prompts are off, so that the phone call's first
reply is the answer. The ratio of each transport's median to /ws's is over the recordings
that every transport answered.

Prints a Markdown table and writes DIR/transports.json. The engines' cold start is apart.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np
import soxr

from core.call import CallConfig
from shell.engines import EngineConfig, load_engines
from transport.client import talk
from transport.files import load_audio
from transport.ws_server import ServerConfig, VoiceServer
from voice.app.latency import percentile
from voice.bench.common import ROOT, SHARED, Recording, parser, recordings
from voice.bench.twilio_caller import call
from voice.bench.webrtc_client import webrtc_call

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR"}

TRANSPORTS = ("ws", "twilio", "webrtc")


def shared_recordings() -> list[Recording]:
    """The shared fixtures' speech (11 recordings) where they are, else the ones the repository carries."""
    manifest = SHARED / "manifest.tsv"
    if not manifest.exists():
        return recordings()
    rows = [line.split("\t") for line in manifest.read_text().splitlines()[1:]]
    return [Recording(manifest.parent / r[0], r[5], float(r[1])) for r in rows if r[0].startswith("speech/")]


def speech_end_s(audio: np.ndarray, rate: int = 16000) -> float:
    """Where the last 20 ms frame louder than -40 dBFS ends: the end of the speech."""
    frame = rate // 50
    frames = audio[: len(audio) // frame * frame].reshape(-1, frame)
    loud = np.flatnonzero(np.sqrt((frames**2).mean(axis=1)) > 0.01)
    return float((loud[-1] + 1) * frame / rate) if len(loud) else len(audio) / rate


async def over(transport: str, port: int, audio: np.ndarray) -> float | None:
    """Seconds from the first microphone frame sent to the reply's first audio at the client."""
    if transport == "ws":
        result = await talk(f"ws://127.0.0.1:{port}/ws", audio, max_tail_s=30)
        loud = np.flatnonzero(np.abs(result.reply) > 1e-4)
        return float(loud[0]) / result.output_rate if len(loud) else None
    if transport == "twilio":
        timing: dict[str, float] = {}
        await call(port, soxr.resample(audio, 16000, 8000).astype(np.float32), tail_s=30.0, timing=timing)
        if "first_media" not in timing:
            return None
        return timing["first_media"] - timing["first_sent"]
    run = await webrtc_call(f"http://127.0.0.1:{port}", audio, timeout_s=60)
    if run.first_voice_at is None or run.started_at is None:
        return None
    return run.first_voice_at - run.started_at


def dist(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "p50": None, "p95": None}
    return {"n": len(values), "p50": percentile(values, 0.5), "p95": percentile(values, 0.95)}


async def _main(argv: list[str] | None) -> None:
    ap = parser(__name__, description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--rounds", type=int, default=1, help="times each recording is said over each transport")
    args = ap.parse_args(argv)
    recs = [r for r in shared_recordings() if "jfk" not in r.path.name]  # one utterance each (JFK pauses: 4 turns)
    t0 = time.monotonic()
    engines = await asyncio.to_thread(load_engines, EngineConfig())
    cold_start_s = round(time.monotonic() - t0, 1)
    server = VoiceServer(engines, ServerConfig(port=0, call=CallConfig(greeting=None, idle=None)))
    await server.start()
    rows = []
    try:
        await talk(f"ws://127.0.0.1:{server.port}/ws", load_audio(recs[0].path), max_tail_s=30)  # warm-up, not counted
        for k in range(args.rounds):
            for i, rec in enumerate(recs):
                audio = load_audio(rec.path)
                end = speech_end_s(audio)
                row: dict = {"recording": rec.path.name, "round": k, "speech_end_s": round(end, 3)}
                order = TRANSPORTS[(i + k) % 3 :] + TRANSPORTS[: (i + k) % 3]
                for transport in order:
                    first = await over(transport, server.port, audio)
                    row[transport] = None if first is None else round(first - end, 3)
                    await asyncio.sleep(0.5)
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
    finally:
        await server.close()
        await engines.aclose()
    paired = [r for r in rows if all(r[t] is not None for t in TRANSPORTS)]
    summary: dict = {
        "recordings": len(recs),
        "rounds": args.rounds,
        "paired": len(paired),
        "cold_start_s": cold_start_s,
    }
    for t in TRANSPORTS:
        summary[t] = dist([r[t] for r in paired])
        summary[f"{t}_answered"] = sum(r[t] is not None for r in rows)
    ws50 = summary["ws"]["p50"]
    for t in TRANSPORTS[1:]:
        p50 = summary[t]["p50"]
        summary[f"{t}_vs_ws_p50"] = round(p50 / ws50, 3) if p50 and ws50 else None
        ratios = [r[t] / r["ws"] for r in paired if r["ws"] > 0]
        summary[f"{t}_vs_ws_paired_median"] = round(float(np.median(ratios)), 3) if ratios else None
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "transports.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=2) + "\n")
    print("| recording | /ws v2v | Twilio (8 kHz mu-law) v2v | WebRTC (Opus) v2v |\n|---|---|---|---|")
    for r in rows:
        cells = [f"{r[t] * 1000:.0f} ms" if r[t] is not None else "-" for t in TRANSPORTS]
        print(f"| {r['recording']} | " + " | ".join(cells) + " |")
    cells = [f"{summary[t]['p50'] * 1000:.0f} ms" if summary[t]["p50"] is not None else "-" for t in TRANSPORTS]
    print(f"| p50 of {len(paired)} | " + " | ".join(cells) + " |")
    print(
        f"\nratio to /ws (p50): Twilio x{summary['twilio_vs_ws_p50']}, WebRTC x{summary['webrtc_vs_ws_p50']}; "
        f"paired medians x{summary['twilio_vs_ws_paired_median']}, x{summary['webrtc_vs_ws_paired_median']}"
    )
    print(f"cold start (engines): {cold_start_s} s\nwrote {args.out}/transports.json")


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))
