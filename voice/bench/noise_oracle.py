"""What Whisper alone hears of the noise bench's sentences in its rooms: ``python -m voice.bench noise_oracle``.

The noise bench's WER (``voice/bench/noise.py``) mixes recognition with turn-taking: a sentence
cut in two, a barge-in missed or the room's words in a turn all raise it. This is the ceiling
the pipeline is measured against: each of the person's sentences of ``--room-first``, cut exactly
(the recording alone, at the bench's peak level), under the same room at the same level (SNR over
the person's speech, as the bench mixes it), at ``--offsets`` places in the room's recording,
transcribed by the pipeline's final model (Whisper base, greedy, its short window). No VAD, no
endpoint, no clock: what is left is what Whisper cannot hear under that room. Prints a table and
writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from core.audio import ASR_RATE
from transport.files import load_audio
from voice.bench.noise import PERSON_PEAK_DB, ROOMS_FIRST, SNRS_FIRST_DB, VARIANTS
from voice.bench.scoring import word_error_rate
from voice.scenario.person import at_peak, sound_span


def mixes(room: Path, snr_db: float, offsets: int, seed: int = 0):
    """(sentence, its audio under the room) for every sentence of the bench, ``offsets`` times each."""
    noise = load_audio(room).astype(np.float64)
    rng = np.random.default_rng(seed)
    for variant in VARIANTS:
        clips = [at_peak(load_audio(said.path), PERSON_PEAK_DB) for said in variant]
        spans = [sound_span(c) for c in clips]
        speech = np.concatenate(
            [c[round(a * ASR_RATE) : round(b * ASR_RATE)] for c, (a, b) in zip(clips, spans, strict=True)]
        )
        scale = np.sqrt(np.mean(speech.astype(np.float64) ** 2)) / np.sqrt(np.mean(noise**2)) / 10 ** (snr_db / 20)
        for said, clip in zip(variant, clips, strict=True):
            for _ in range(offsets):
                under = np.resize(np.roll(noise, -int(rng.integers(0, len(noise)))), len(clip)) * scale
                yield said, (clip + under).astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    from asr.whisper import WhisperRecognizer
    from shell import models

    ap = argparse.ArgumentParser(prog="python -m voice.bench noise_oracle", description=__doc__.split("\n\n")[0])
    ap.add_argument("--offsets", type=int, default=3, help="places in the room's recording per sentence")
    ap.add_argument("--out", default="docs/bench/noise_oracle.json")
    args = ap.parse_args(argv)
    asr = WhisperRecognizer(models.asr_model_path("base"), "cpu", pad_s=3.0)
    quiet = [
        word_error_rate(s.text, asr.transcribe(at_peak(load_audio(s.path), PERSON_PEAK_DB)))
        for v in VARIANTS
        for s in v
    ]
    rows = [{"room": "quiet", "snr_db": None, "wer": round(statistics.mean(quiet), 3), "sentences": len(quiet)}]
    print("| room | Whisper base alone, WER (mean) | over the quiet room |")
    print("|---|---:|---:|")
    print(f"| quiet | {rows[0]['wer']:.3f} | - |", flush=True)
    for name, path in ROOMS_FIRST.items():
        for snr in SNRS_FIRST_DB:
            wers = [word_error_rate(s.text, asr.transcribe(audio)) for s, audio in mixes(path, snr, args.offsets)]
            wer = round(statistics.mean(wers), 3)
            rows.append({"room": name, "snr_db": snr, "wer": wer, "sentences": len(wers)})
            print(f"| {name} {snr:g} dB | {wer:.3f} | {wer - rows[0]['wer']:+.3f} |", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"offsets": args.offsets, "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
