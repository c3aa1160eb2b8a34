"""Whisper's final pass: the full 30 s window against the short window.

    python -m voice.bench asr [--out DIR] [--repeats N]        (default: out/bench-asr, 3)

For every shared recording (each on its own, as one utterance), times
:meth:`asr.whisper.WhisperRecognizer.recognize` with ``pad_s=None`` (every
call encodes Whisper's padded 30 s window, as faster-whisper does) and with
the default short window (the audio plus 3 s of silence), for Whisper base
(the final pass) and tiny.en (the partials), and scores the words of each
(WER against the manifest's transcripts). Both run in the same process, one
after the other per recording, so their ratio is robust to the machine's
load. Prints a Markdown table and writes DIR/bench_asr.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from asr.whisper import WhisperRecognizer
from shell import models
from transport.files import load_audio
from voice.bench.common import ROOT, SHARED, parser
from voice.bench.scoring import word_error_rate


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-asr")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    manifest = SHARED / "manifest.tsv"
    if not manifest.exists():
        manifest = ROOT / "tests" / "fixtures" / "manifest.tsv"
    refs = {}
    for line in manifest.read_text().splitlines()[1:]:
        cols = line.split("\t")
        refs[manifest.parent / cols[0]] = cols[5]
    recs = [(p, t) for p, t in refs.items() if p.exists() and "noise" not in p.parts]
    rows = []
    for model, threads in (("base", 2), ("tiny.en", 1)):
        full = WhisperRecognizer(models.asr_model_path(model), "cpu", cpu_threads=threads, pad_s=None)
        short = WhisperRecognizer(models.asr_model_path(model), "cpu", cpu_threads=threads)
        for path, ref in recs:
            audio = load_audio(path)
            row = {"model": model, "recording": path.name, "duration_s": round(len(audio) / 16000, 2)}
            for name, rec in (("full_window", full), ("short_window", short)):
                rec.recognize(audio)  # warm
                times = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    text = rec.recognize(audio).text
                    times.append(time.perf_counter() - t0)
                row[f"{name}_s"] = round(min(times), 4)
                row[f"{name}_wer"] = round(word_error_rate(ref, text), 3)
            row["speedup"] = round(row["full_window_s"] / row["short_window_s"], 2)
            rows.append(row)
            print(row, file=sys.stderr, flush=True)
    summary = {}
    for model in ("base", "tiny.en"):
        rs = [r for r in rows if r["model"] == model]
        summary[model] = {
            "full_window_mean_s": round(sum(r["full_window_s"] for r in rs) / len(rs), 3),
            "short_window_mean_s": round(sum(r["short_window_s"] for r in rs) / len(rs), 3),
            "speedup_mean": round(sum(r["speedup"] for r in rs) / len(rs), 2),
            "full_window_mean_wer": round(sum(r["full_window_wer"] for r in rs) / len(rs), 3),
            "short_window_mean_wer": round(sum(r["short_window_wer"] for r in rs) / len(rs), 3),
        }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_asr.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=2) + "\n")
    print("| model | recording | audio | 30 s window | short window | speedup | WER 30 s | WER short |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['recording']} | {r['duration_s']:.1f} s | {r['full_window_s'] * 1000:.0f} ms | "
            f"{r['short_window_s'] * 1000:.0f} ms | {r['speedup']:.1f}x | {r['full_window_wer']:.2f} | "
            f"{r['short_window_wer']:.2f} |"
        )
    for model, s in summary.items():
        print(
            f"\n{model}: mean {s['full_window_mean_s'] * 1000:.0f} ms -> {s['short_window_mean_s'] * 1000:.0f} ms "
            f"({s['speedup_mean']:.1f}x), mean WER {s['full_window_mean_wer']:.3f} -> {s['short_window_mean_wer']:.3f}"
        )
    print(f"\nwrote {args.out / 'bench_asr.json'}")
