"""Smart Turn v3.2 on this CPU: the cost of a call, and what it says as a pause grows.

    python -m voice.bench smart_turn [--out DIR] [--calls N] [--threads 1 2] [--models float32 int8]
                       (default: out/bench-turn, 50, 1 2, both)

Models: ``float32``, what the pipeline runs (made at set-up from the int8
model, asr.smart_turn.float32_model), and ``int8``, the model as it ships in
Pipecat's wheel, run by onnxruntime's int8 kernels (whose answers depend on
the CPU: VNNI or not).

Cost: :meth:`asr.smart_turn.SmartTurn.probability` on the last 2, 4 and 8 s
of the JFK recording, ``--calls`` times each after one warm-up, for each
model and onnxruntime thread count, the configurations interleaved; the
features alone (numpy, part of each call) are timed beside it. p50 and p90
in milliseconds.

Silence: the probability that the turn is finished for speech followed by
0.1 to 2 s of silence (the recording's own last 0.2 s of room tone, repeated),
for 4 recordings ending where their sentence ends and 9 cuts mid-sentence
(word boundaries from faster-whisper's word timestamps, Whisper base): how
many of each read as finished (>= 0.5) at each silence, which is what the
end-of-turn decisions (``core/end_of_turn.py``) can expect of a re-check.

Prints Markdown tables and writes DIR/bench_turn.json.
"""

from __future__ import annotations

from voice.bench.common import ROOT, parser

# isort: split

import argparse
import datetime
import json
import os
import time
from pathlib import Path

import numpy as np
import onnxruntime

from asr.smart_turn import SmartTurn, load_session, log_mel
from core.audio import ASR_RATE
from shell import models
from transport.files import load_audio

FIXTURES = ROOT / "tests" / "fixtures"
SILENCES = (0.1, 0.2, 0.3, 0.5, 0.8, 1.1, 1.5, 2.0)
# recording: (where its last word ends, [mid-sentence cuts]), seconds
SPEECH = {
    "cmu_arctic_us_axb_a0005": (1.22, [0.46, 0.72]),  # "Will we | ever | forget it."
    "jfk_inaugural_1961": (10.36, [1.18, 1.58, 9.32]),  # "And so my | fellow | Americans, ... you can | do ..."
    "ljspeech_LJ001-0005": (7.80, [2.20, 5.06]),  # "... letters in | the ... be considered, | as ..."
    "cmu_arctic_us_aew_a0003": (3.26, [1.50, 2.88]),  # "... that | evening the two men shook | hands."
}


def percentiles(times: list[float]) -> tuple[float, float]:
    ms = np.array(times) * 1000
    return round(float(np.percentile(ms, 50)), 1), round(float(np.percentile(ms, 90)), 1)


MODELS = {"float32": lambda: models.smart_turn_model_path(), "int8": lambda: models.smart_turn_model_path(int8=True)}


def cost(paths: dict[str, Path], calls: int, threads: list[int]) -> list[dict]:
    """Every configuration once per round, ``calls`` rounds: a change in the machine's load
    (2 cores shared with other work here) falls on all of them alike."""
    jfk = load_audio(FIXTURES / "jfk_inaugural_1961.wav")
    engines = {(m, n): SmartTurn(load_session(path, threads=n)) for m, path in paths.items() for n in threads}
    configs = [(m, n, seconds, jfk[-seconds * ASR_RATE :]) for m, n in engines for seconds in (2, 4, 8)]
    call: dict[tuple[str, int, int], list[float]] = {(m, n, s): [] for m, n, s, _ in configs}
    features: dict[tuple[str, int, int], list[float]] = {(m, n, s): [] for m, n, s, _ in configs}
    for m, n, _, audio in configs:
        engines[m, n].probability(audio)  # warm
    for _ in range(calls):
        for m, n, seconds, audio in configs:
            t0 = time.perf_counter()
            engines[m, n].probability(audio)
            t1 = time.perf_counter()
            log_mel(audio)
            call[m, n, seconds].append(t1 - t0)
            features[m, n, seconds].append(time.perf_counter() - t1)
    rows = []
    for m, n, seconds, _ in configs:
        (c50, c90), (f50, f90) = percentiles(call[m, n, seconds]), percentiles(features[m, n, seconds])
        row = {"model": m, "audio_s": seconds, "threads": n, "call_p50_ms": c50, "call_p90_ms": c90}
        rows.append(row | {"features_p50_ms": f50, "features_p90_ms": f90, "calls": calls})
    return rows


def with_silence(audio: np.ndarray, end_s: float, silence_s: float) -> np.ndarray:
    room = audio[-ASR_RATE // 5 :]
    n = round(silence_s * ASR_RATE)
    return np.concatenate([audio[: round(end_s * ASR_RATE)], np.tile(room, n // len(room) + 1)[:n]])


def silence(st: SmartTurn) -> list[dict]:
    rows = []
    for name, (last, cuts) in SPEECH.items():
        audio = load_audio(FIXTURES / f"{name}.wav")
        for end, finished in [(last, True)] + [(c, False) for c in cuts]:
            p = {str(s): round(st.probability(with_silence(audio, end, s)), 3) for s in SILENCES}
            rows.append({"recording": name, "end_s": end, "finished": finished, "probability": p})
    return rows


def vnni() -> bool | None:
    """Whether this x86 CPU has VNNI (onnxruntime's int8 kernels are exact with it); None: not known here."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    return "avx512_vnni" in flags or "avx_vnni" in flags


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-turn")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    args = ap.parse_args(argv)
    paths = {m: MODELS[m]() for m in args.models}
    rows = cost(paths, args.calls, args.threads)
    sweeps = {m: silence(SmartTurn(path)) for m, path in paths.items()}
    summary: dict[str, dict] = {}
    for m, sweep in sweeps.items():
        for s in SILENCES:
            done = [r["probability"][str(s)] >= 0.5 for r in sweep if r["finished"]]
            cut = [r["probability"][str(s)] >= 0.5 for r in sweep if not r["finished"]]
            summary.setdefault(m, {})[str(s)] = {
                "finished_read_finished": f"{sum(done)}/{len(done)}",
                "cuts_read_finished": f"{sum(cut)}/{len(cut)}",
            }
    machine = {
        "date": datetime.date.today().isoformat(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
        "vnni": vnni(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    out = {"machine": machine, "cost": rows, "silence_summary": summary, "silence": sweeps}
    (args.out / "bench_turn.json").write_text(json.dumps(out, indent=2) + "\n")
    print(
        f"Smart Turn v3.2, one call ({args.calls} calls each; {os.cpu_count()} CPUs, load {machine['load_average']})\n"
    )
    print("| model | audio | threads | call p50 | call p90 | features p50 | features p90 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['audio_s']} s | {r['threads']} | {r['call_p50_ms']:.1f} ms | "
            f"{r['call_p90_ms']:.1f} ms | {r['features_p50_ms']:.1f} ms | {r['features_p90_ms']:.1f} ms |"
        )
    print(f"\nRead as finished (p >= 0.5) after this much silence (CPU with VNNI: {machine['vnni']})\n")
    print("| model | sentences | " + " | ".join(f"{s} s" for s in SILENCES) + " |")
    print("|---|---|" + "---|" * len(SILENCES))
    for m in summary:
        for key, what in (("finished_read_finished", "finished"), ("cuts_read_finished", "cut mid-sentence")):
            print(f"| {m} | {what} | " + " | ".join(summary[m][str(s)][key] for s in SILENCES) + " |")
    print(f"\nwrote {args.out / 'bench_turn.json'}")
