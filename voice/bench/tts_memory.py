"""What piper keeps of the memory its longest sentence needed, with our arena and with piper's own.

    python -m voice.bench tts_memory [--out DIR] [--rounds 2]

For each way of running the voice, in a fresh process (RSS is the process's)
with the server's heap settings (shell/heap.py):
``arena`` is tts/piper_tts.py as the pipeline runs it (one shared CPU arena,
a 64 MiB first region kept, what a call grew given back after it);
``piper`` is ``PiperVoice.load`` and ``phoneme_ids_to_audio`` as piper ships
them (ONNX Runtime's default arena, which keeps its peak). Each speaks the
same 71 sentences: short ones, then ever longer ones up to ~12 s of speech,
then short ones again, as a conversation does. RSS (VmRSS) after each.

Prints a Markdown table and writes DIR/tts_memory.json: RSS after loading,
after the first sentence, its peak, at the end, what the end keeps over the
first sentence, and the time to speak them all and the 40 short ones (the ratio to
``piper``'s, in the same run; the modes alternate over ROUNDS rounds).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from voice.bench.common import ROOT, parser, rss_mb

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1"}

MODES = ("arena", "piper")


def sentences() -> list[str]:
    """71 sentences from the fixtures' transcripts: 20 short, 31 growing from 4 to 34 words (~12 s), 20 short."""
    rows = (ROOT / "tests" / "fixtures" / "manifest.tsv").read_text().splitlines()[1:]
    transcripts = [r.split("\t")[5] for r in rows if r.split("\t")[5]]
    short = sorted(transcripts, key=len)[:4]
    words = " ".join(t.rstrip(".").replace(",", "") for t in transcripts).split()
    growing = [" ".join(words[: 4 + k]) + "." for k in range(31)]
    return [*(short * 5), *growing, *(short * 5)]


def probe(mode: str) -> dict:
    """In this process: load the voice the ``mode`` way, speak every sentence, RSS after each."""
    from shell import heap, models

    heap.tune()  # the server's heap (mmap-4m), in both modes: what the arena frees can go back
    path = models.voice_path("joe")
    base = rss_mb()
    if mode == "arena":
        from tts.piper_tts import PiperTTS

        tts = PiperTTS(path, 24000, use_cuda=False)

        def speak(text: str) -> int:
            return sum(len(p.audio) for p in tts.synthesize(text, exact=True))
    else:
        from piper import PiperVoice
        from piper.config import SynthesisConfig

        voice = PiperVoice.load(path)
        config = SynthesisConfig(noise_w_scale=0.0, noise_scale=0.0)

        def speak(text: str) -> int:
            return sum(
                len(voice.phoneme_ids_to_audio(voice.phonemes_to_ids(s), config)) for s in voice.phonemize(text) if s
            )

    loaded = rss_mb()
    rss, took, seconds = [], [], 0.0
    for text in sentences():
        t = time.perf_counter()
        samples = speak(text)
        took.append(round(time.perf_counter() - t, 4))
        rss.append(round(rss_mb(), 1))
        seconds = max(seconds, samples / (24000 if mode == "arena" else 22050))
    return {"mode": mode, "before_load_mb": round(base, 1), "loaded_mb": round(loaded, 1), "rss_mb": rss,
            "longest_sentence_s": round(seconds, 2), "took_s": round(sum(took), 2),
            "short_took_s": round(sum(took[:20] + took[-20:]), 2), "sentence_took_s": took}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--probe", choices=MODES, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.probe:
        print(json.dumps(probe(args.probe)))
        return
    runs: list[dict] = []
    for r in range(args.rounds):
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            out = subprocess.run(
                [sys.executable, "-m", "voice.bench", "tts_memory", "--probe", mode], capture_output=True, text=True
            )
            if out.returncode:
                sys.exit(out.stderr[-3000:])
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    summary = {}
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        first = min(r["rss_mb"][0] for r in mine)
        end = max(r["rss_mb"][-1] for r in mine)
        summary[mode] = {
            "loaded_mb": min(r["loaded_mb"] for r in mine),
            "after_first_sentence_mb": first,
            "peak_mb": max(max(r["rss_mb"]) for r in mine),
            "end_mb": end,
            "kept_over_first_mb": round(end - first, 1),
            "took_s": sorted(r["took_s"] for r in mine)[len(mine) // 2],
            "short_took_s": sorted(r["short_took_s"] for r in mine)[len(mine) // 2],
        }
    for mode in MODES:
        summary[mode]["time_vs_piper"] = round(summary[mode]["took_s"] / summary["piper"]["took_s"], 3)
        summary[mode]["short_time_vs_piper"] = round(
            summary[mode]["short_took_s"] / summary["piper"]["short_took_s"], 3
        )
    n = len(sentences())
    print(f"\n{n} sentences, the longest {runs[0]['longest_sentence_s']} s of speech; {args.rounds} rounds\n")
    print("| mode | loaded MB | after 1st MB | peak MB | end MB | kept over 1st MB | time s (vs piper) "
          "| 40 short ones s (vs piper) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for mode, s in summary.items():
        print(f"| {mode} | {s['loaded_mb']} | {s['after_first_sentence_mb']} | {s['peak_mb']} | {s['end_mb']} "
              f"| {s['kept_over_first_mb']} | {s['took_s']} (x{s['time_vs_piper']}) "
              f"| {s['short_took_s']} (x{s['short_time_vs_piper']}) |")  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "tts_memory.json"
    path.write_text(json.dumps({"sentences": n, "summary": summary, "runs": runs}, indent=1) + "\n")
    print(f"\nsaved {path}")
