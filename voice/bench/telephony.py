"""What the phone costs the words: Whisper's final pass on the shared recordings as they arrive
at 16 kHz PCM (our protocol) and as they arrive over a phone line through Twilio (downsampled to
8 kHz, mu-law encoded and decoded with transport/g711.py, upsampled to 16 kHz again, as the
server does), in one run.

    python -m voice.bench telephony [--out DIR] [--model base]       (default: docs/bench, base)

Prints a Markdown table and writes DIR/telephony.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import soxr

from asr.whisper import WhisperRecognizer
from shell import models
from transport import g711
from transport.files import load_audio
from voice.bench.common import ROOT, SHARED, parser
from voice.bench.scoring import word_error_rate


def over_the_phone(audio_16k, law: g711.Law = "ulaw"):
    at_8k = soxr.resample(audio_16k, 16000, 8000).astype("float32")
    heard = g711.decode(g711.encode(at_8k, law), law)
    return soxr.resample(heard, 8000, 16000).astype("float32")


def main(argv: list[str] | None = None) -> None:
    ap = parser(__name__, description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--model", default="base")
    args = ap.parse_args(argv)
    manifest = SHARED / "manifest.tsv"
    if not manifest.exists():
        manifest = ROOT / "tests" / "fixtures" / "manifest.tsv"
    recs = []
    for line in manifest.read_text().splitlines()[1:]:
        cols = line.split("\t")
        path = manifest.parent / cols[0]
        if path.exists() and "noise" not in path.parts:
            recs.append((path, cols[5]))
    asr = WhisperRecognizer(models.asr_model_path(args.model), "cpu", cpu_threads=2)
    rows = []
    for path, ref in recs:
        audio = load_audio(path)
        row = {"recording": path.name, "duration_s": round(len(audio) / 16000, 2)}
        for name, heard in (
            ("pcm16k", audio),
            ("mulaw8k", over_the_phone(audio)),
            ("alaw8k", over_the_phone(audio, "alaw")),
        ):
            row[f"{name}_wer"] = round(word_error_rate(ref, asr.recognize(heard).text), 3)
        rows.append(row)
        print(row, file=sys.stderr, flush=True)

    def mean(key: str) -> float:
        return round(sum(r[key] for r in rows) / len(rows), 3)

    summary = {
        "model": args.model,
        "recordings": len(rows),
        **{k: mean(k) for k in ("pcm16k_wer", "mulaw8k_wer", "alaw8k_wer")},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "telephony.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=2) + "\n")
    print("| recording | audio | WER 16 kHz PCM | WER 8 kHz mu-law | WER 8 kHz A-law |\n|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['recording']} | {r['duration_s']:.1f} s | {r['pcm16k_wer']:.3f} | {r['mulaw8k_wer']:.3f} | "
            f"{r['alaw8k_wer']:.3f} |"
        )
    print(
        f"| mean of {len(rows)} | | {summary['pcm16k_wer']:.3f} | {summary['mulaw8k_wer']:.3f} | "
        f"{summary['alaw8k_wer']:.3f} |"
    )
    print(f"\nwrote {args.out}/telephony.json")
