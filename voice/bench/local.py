"""`python -m voice.run` at a desk, measured on PulseAudio virtual devices.

    python -m voice.bench local [--out DIR]        (default: out/bench-local)

Starts a private PulseAudio server (a null sink as the speaker, a remap
source as the microphone), runs `python -m voice.run` on it, plays recordings
into the microphone and records the speaker (and the microphone feed, kept for
a look; the two monitors do not line up to better than ~0.2 s). Reported:

- barge-in at the speaker: the interruption's speech onset in the microphone
  to the last sound out of the speaker, for interruptions 1.0 and 2.0 s into
  the reply (the onset: when paplay started plus the recording's first voiced
  frame, on the wall clock of the run's log lines); split into onset -> the
  session's pause (capture and VAD) and pause -> speaker silent (the output
  path, from the speaker's monitor), and the pause -> the words check that cut
  it (and whether the pause was resumed in between, which would leave the
  speaker playing until the cut);
- whether the assistant's own voice, looped back into the microphone at -20,
  -12, -6 and 0 dB (40 ms later), paused or cut its reply, with what the words
  check heard;
- the stream's xruns and restarts (from the run's log).

Each run's log, events and recordings stay in --runs (out/bench-local/runs).
Prints Markdown tables and writes DIR/local.json.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import soundfile as sf

from core.events import (
    AsrFinal,
    BargeIn,
    InterruptionCheck,
    PlaybackPaused,
    PlaybackResumed,
    PlaybackStart,
    TurnEnd,
)
from voice.app.logs import read_records
from voice.bench.common import ROOT, parser
from voice.bench.pulse import loop_back, start_pulse

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1"}

RATE = 16000


def events(err: Path) -> list[dict]:
    """The run's events as its log has them (each with "ts", its line's wall-clock time)."""
    return read_records(err.read_text())


def envelope_db(audio: np.ndarray, rate: int, hop_s: float = 0.01) -> np.ndarray:
    hop = round(hop_s * rate)
    frames = audio[: len(audio) // hop * hop].reshape(-1, hop)
    return 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)


def run_once(env: dict[str, str], d: Path, question: np.ndarray, interruption: np.ndarray | None, after_s: float,
             echo_db: float | None) -> dict:  # fmt: skip
    module = loop_back(env, echo_db, latency_ms=40) if echo_db is not None else None
    err, out_file = d / "run.err", d / "run.out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "voice.run", "--db", str(d / "c.db"), "--log-json"],
        cwd=ROOT, env=env, stdout=open(out_file, "w"), stderr=open(err, "w"),  # noqa: SIM115
    )  # fmt: skip
    try:
        while "listening" not in out_file.read_text():
            assert proc.poll() is None, err.read_text()[-2000:]
            time.sleep(0.5)
        time.sleep(1.0)
        recorders = [
            subprocess.Popen(
                [
                    "parec",
                    f"--device={dev}",
                    f"--rate={RATE}",
                    "--channels=1",
                    "--format=s16le",
                    "--file-format=wav",
                    str(d / f"{name}.wav"),
                ],
                env=env,
            )
            for dev, name in (("micfeed.monitor", "mic"), ("spk.monitor", "speaker"))
        ]
        time.sleep(0.5)
        sf.write(d / "q.wav", question, RATE, subtype="PCM_16")
        subprocess.run(["paplay", "--device=micfeed", str(d / "q.wav")], env=env, check=True)
        deadline = time.monotonic() + 60
        while not any(e["type"] == PlaybackStart.type for e in events(err)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if interruption is not None:
            time.sleep(after_s)
            sf.write(d / "i.wav", interruption, RATE, subtype="PCM_16")
            said_at = time.time()  # wall clock, as the run's log lines ("ts")
            subprocess.run(["paplay", "--device=micfeed", str(d / "i.wav")], env=env, check=True)
        deadline = time.monotonic() + 60
        while not any(e["type"] == TurnEnd.type for e in events(err)) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        for r in recorders:
            r.terminate()
            r.wait(10)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
        if module:
            subprocess.run(["pactl", "unload-module", module], env=env)
    evs = events(err)
    log = err.read_text()
    result: dict = {
        "barge_in": any(e["type"] == BargeIn.type and e.get("reason") == "words" for e in evs),
        "paused": sum(e["type"] == PlaybackPaused.type for e in evs),
        "resumed": sum(e["type"] == PlaybackResumed.type for e in evs),
        "underruns": log.count("underrun"),
        # What Whisper made of speech heard over the reply (the words check, or the final transcript).
        "heard": [
            e["text"]
            for e in evs
            if e["type"] in (InterruptionCheck.type, AsrFinal.type) and e["t"] > _first(evs, PlaybackStart.type, 1e9)
        ],
    }
    if interruption is not None:
        spk, _ = sf.read(d / "speaker.wav", dtype="float32")
        voiced = np.flatnonzero(envelope_db(interruption, RATE) > -40)
        onset = said_at + (voiced[0] / 100 if len(voiced) else 0.0)
        result |= _barge_in_timeline(onset, envelope_db(spk, RATE), evs)
    else:  # the echo's level in the microphone, relative to the speaker (checks the loopback's volume)
        mic, _ = sf.read(d / "mic.wav", dtype="float32")
        spk, _ = sf.read(d / "speaker.wav", dtype="float32")
        n = min(len(mic), len(spk)) // 160 * 160
        mic_e, spk_e = (np.mean(x[:n].reshape(-1, 160) ** 2, axis=1) for x in (mic, spk))
        reply = spk_e > 1e-4  # frames the speaker plays (> -40 dB); the question was before them
        if reply.any():
            result["echo_measured_db"] = round(float(10 * np.log10(mic_e[reply].sum() / spk_e[reply].sum())), 1)
    return result


def _barge_in_timeline(onset: float, spk_db: np.ndarray, evs: list[dict]) -> dict:
    """The interruption's onset -> the session's pause -> the speaker silent.

    ``onset``: wall-clock time of the interruption's first voiced sound, from when
    paplay was started (its connection, ~20 ms, counts as capture latency here);
    the pause's wall-clock time is its log line's. The speaker recording (10 ms
    frames) is lined up with the session's clock by the reply's first sound and
    its ``playback_start`` event, both on the output path.
    """
    speaking = np.flatnonzero(spk_db > -40)
    start = next((e for e in evs if e["type"] == PlaybackStart.type), None)
    pause = next((e for e in evs if e["type"] == PlaybackPaused.type and _wall(e) >= onset - 0.1), None)
    if not len(speaking) or start is None or pause is None:
        return {}
    out = {"onset_to_pause_ms": round((_wall(pause) - onset) * 1000)}
    at = round((pause["t"] - start["t"]) * 100) + speaking[0]  # the pause, in speaker frames
    # The last loud speaker frame before 800 ms of silence (longer than the gaps between sentences).
    stop = at
    for i in np.flatnonzero(spk_db[at:] > -40) + at:
        if i - stop > 80:
            break
        stop = i
    out["pause_to_speaker_silent_ms"] = round((stop + 1 - at) * 10)
    out["onset_to_speaker_silent_ms"] = out["onset_to_pause_ms"] + out["pause_to_speaker_silent_ms"]
    cut = next((e["t"] for e in evs if e["type"] == BargeIn.type), None)
    if cut is not None:
        out["pause_to_cut_ms"] = round((cut - pause["t"]) * 1000)
        out["resumed_before_cut"] = sum(e["type"] == PlaybackResumed.type and pause["t"] <= e["t"] <= cut for e in evs)
    return out


def _first(evs: list[dict], kind: str, default: float) -> float:
    return next((e["t"] for e in evs if e["type"] == kind), default)


def _wall(event: dict) -> float:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def main(argv: list[str] | None = None) -> None:
    import argparse

    from transport.files import load_audio
    from voice.bench.common import recordings

    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-local")
    ap.add_argument("--reps", type=int, default=2, help="runs of each case")
    ap.add_argument("--runs", type=Path, default=ROOT / "out" / "bench-local" / "runs", help="each run's files")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rec = {r.name: r for r in recordings()}
    question = load_audio(next(r for n, r in rec.items() if "aew_a0003" in n).path)
    interruption = load_audio(next(r for n, r in rec.items() if "LJ001-0005" in n).path)[: RATE * 3]
    runs = args.runs
    shutil.rmtree(runs, ignore_errors=True)
    pulse_dir = runs / "pulse"
    pulse_dir.mkdir(parents=True)

    def run(name: str, **kw) -> dict:
        d = runs / name
        d.mkdir()
        return {"run": name, **run_once(env, d, question, **kw)}

    pulse, env = start_pulse(pulse_dir)
    try:
        barge = [
            {"after_s": a, **run(f"barge-{a}-{i}", interruption=interruption, after_s=a, echo_db=None)}
            for a in (1.0, 2.0)
            for i in range(args.reps)
        ]
        echo = [
            {"echo_db": db, **run(f"echo{db:+.0f}-{i}", interruption=None, after_s=0, echo_db=db)}
            for db in (-20.0, -12.0, -6.0, 0.0)
            for i in range(args.reps)
        ]
    finally:
        pulse.terminate()
    report = {"barge_in": barge, "own_voice": echo}
    (args.out / "local.json").write_text(json.dumps(report, indent=2) + "\n")
    print(
        "| interrupt after (s) | cut | onset -> pause (ms) | pause -> speaker silent (ms)"
        " | onset -> speaker silent (ms) | pause -> cut (ms) | resumed | underruns |\n|---|---|---|---|---|---|---|---|"
    )
    for b in barge:
        cells = [b.get(k) for k in ("onset_to_pause_ms", "pause_to_speaker_silent_ms", "onset_to_speaker_silent_ms",
                                    "pause_to_cut_ms", "resumed_before_cut")]  # fmt: skip
        print(f"| {b['after_s']} | {b['barge_in']} | " + " | ".join(str(c) for c in cells) + f" | {b['underruns']} |")
    print("\n| own voice back in the mic (dB) | measured (dB) | paused | resumed | cut | heard over the reply |")
    print("|---|---|---|---|---|---|")
    for e in echo:
        heard = "; ".join(repr(text) for text in e["heard"]) or "-"
        cells = (e["echo_db"], e.get("echo_measured_db"), e["paused"], e["resumed"], e["barge_in"], heard)
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print(f"\nwrote {args.out}/local.json (each run in {runs})")
