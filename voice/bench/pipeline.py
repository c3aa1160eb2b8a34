"""Latency, against a sequential baseline, in real time, on the real engines.

    python -m voice.bench pipeline [--out DIR] [--quick] [RECORDING_OR_FOLDER ...]

One process, one set of engines (the cold start is timed on its own). Over
the recordings (default: every speech recording in ../shared/fixtures, else
tests/fixtures), each replayed in real time in a fresh session:

- streaming: the pipeline as shipped. Per turn: endpoint delay (end of speech
  to the endpoint decision), ASR final, LLM time to first token, first chunk
  ready, first reply sample out, voice-to-voice (end of speech to the first
  reply sample); p50/p95/p99. The first turn after start is reported apart.
- before: the pipeline before issue 15's turn-taking, same engines: silence
  (a 500 ms hangover) ends the turn instead of Smart Turn, no speculative
  reply, the ASR hears AEC3's output (``SessionConfig(end_of_turn=None,
  speculate=False, asr_audio="suppressed")``). Earlier figures of "before"
  (docs/bench/bench.json until issue 15) were the pipeline before issue 2's
  streaming speed-ups.
- baseline: the same engines as a sequential pipeline (voice.bench.sequential:
  whole-utterance ASR after the endpoint, the whole LLM reply, then TTS of the
  whole reply). Ours over the baseline, turn by turn, as a ratio.
  The three run one after the other on each recording, so load drift on a
  shared machine touches them alike.
- growth: one conversation of 20 turns (the single-utterance recordings said
  in turn, each once the previous reply is over; the last repeats the first,
  so only the history differs): time to first token and voice-to-voice at
  turn 1 and turn 20 (prefix caching should keep them flat).
- sessions: 1, 2, 4, ... sessions at once, each replaying a recording in real
  time (starts staggered over 2 s), until one falls behind: its audio loop
  runs more than 100 ms late, or a first reply takes more than twice the
  single-session voice-to-voice (p95). Memory per session from the process's
  RSS while they run.

Writes DIR/bench.json (every figure), DIR/waterfall.png (each turn's stages on
the audio timeline, ours against the baseline), DIR/distributions.png,
DIR/growth.png and DIR/sessions.png, and prints Markdown tables.
``--quick`` uses four recordings, a 6-turn conversation and up to 4 sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from voice.app.latency import STAGES, percentile
from voice.bench.common import ROOT, SHARED_SPEECH, parser, rss_mb

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR", "TQDM_DISABLE": "1"}

T_PROCESS = time.monotonic()  # the cold start counts from here

LATE_LIMIT_S = 0.1


def find_recordings(args: list[str]) -> list[Path]:
    if not args:
        shared = SHARED_SPEECH
        args = [str(shared if shared.is_dir() else ROOT / "tests" / "fixtures")]
    out: list[Path] = []
    for a in args:
        p = Path(a)
        out += sorted(p.glob("*.wav")) + sorted(p.glob("*.flac")) if p.is_dir() else [p]
    return [p for p in out if not p.name.startswith("noise")]


def dist(values: list[float]) -> dict[str, float | None]:
    return {
        "p50": percentile(values, 0.5),
        "p95": percentile(values, 0.95),
        "p99": percentile(values, 0.99),
        "max": percentile(values, 1.0),
    }


def ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f}"


async def streaming_run(engines, audio, config, settle=False) -> tuple[list[dict], Any]:
    from core.events import Event
    from shell.clock import MonotonicClock
    from shell.session import Session
    from transport.replay import replay
    from voice.app.latency import turn_latencies

    events: list[Event] = []
    session = Session(engines, MonotonicClock(), config, on_event=events.append)
    try:
        result = await replay(session, audio, settle=settle)
    finally:
        await session.aclose()
    return [t.to_json() for t in turn_latencies(events)], result


async def _main(argv: list[str] | None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recordings", nargs="*")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--turns", type=int, default=20, help="length of the growth conversation")
    ap.add_argument("--llm-compile", action="store_true", help="the embedded LLM compiled (see voice.bench compile)")
    args = ap.parse_args(argv)

    from core.events import Event
    from shell.clock import MonotonicClock
    from shell.config import SessionConfig
    from shell.engines import EngineConfig, load_engines
    from shell.session import Session
    from transport.files import load_audio
    from transport.replay import replay_turns
    from voice.app.latency import turn_latencies
    from voice.bench.sequential import sequential_turns, utterances
    from voice.bench.turns import BEFORE_ISSUE_15

    recs = find_recordings(args.recordings)
    if args.quick:
        recs = recs[:4]
        args.turns = min(args.turns, 6)
    audios = {p.name: load_audio(p) for p in recs}
    engine_cfg = EngineConfig(llm_compile=args.llm_compile)
    engines = await asyncio.to_thread(load_engines, engine_cfg)
    cold_start = time.monotonic() - T_PROCESS
    rss_engines = rss_mb()
    print(f"cold start {cold_start:.1f} s ({engines.load_times}), RSS {rss_engines:.0f} MB", file=sys.stderr)
    # "before": the pipeline before issue 15's turn-taking, on the same engines.
    before_engines = engines
    ours_cfg = SessionConfig()
    before_cfg = BEFORE_ISSUE_15

    # -- streaming, before, baseline: one after the other on each recording ----------
    ours, before, baseline = [], [], []
    for i, (name, audio) in enumerate(audios.items()):
        turns, _ = await streaming_run(engines, audio, ours_cfg)
        for j, t in enumerate(turns):
            ours.append({"recording": name, "turn": j + 1, "first_after_start": i == 0 and j == 0, **t})
        turns, _ = await streaming_run(before_engines, audio, before_cfg)
        before += [{"recording": name, "turn": j + 1, **t} for j, t in enumerate(turns)]
        seq = await sequential_turns(engines, audio, ours_cfg.system_prompt)
        baseline += [{"recording": name, "turn": j + 1, **t.to_json()} for j, t in enumerate(seq)]
        print(f"{name}: ours {len(turns)} turn(s), baseline {len(seq)}", file=sys.stderr, flush=True)

    def first_turns(rows: list[dict], warm_only: bool = True) -> dict[str, dict]:
        """Each recording's first turn (the comparison is made on those)."""
        return {r["recording"]: r for r in rows if r["turn"] == 1 and not (warm_only and r.get("first_after_start"))}

    ours_1, before_1, base_1 = first_turns(ours), first_turns(before), first_turns(baseline)
    # Recordings whose first turn was answered in all three (a turn cut before any audio has no voice-to-voice).
    paired = [
        n
        for n in ours_1
        if n in base_1 and n in before_1 and ours_1[n]["voice_to_voice_s"] and before_1[n]["voice_to_voice_s"]
    ]
    ratios = [round(ours_1[n]["voice_to_voice_s"] / base_1[n]["voice_to_voice_s"], 3) for n in paired]
    gains = [round(ours_1[n]["voice_to_voice_s"] / before_1[n]["voice_to_voice_s"], 3) for n in paired]
    warm = [r for r in ours if not r["first_after_start"]]
    first = next((r for r in ours if r["first_after_start"]), None)

    # -- growth: one long conversation ----------------------------------------------
    # Single-utterance recordings only: one with pauses (JFK) is several turns, whose replies queue.
    singles = [a for a in audios.values() if len(utterances(engines, a, ours_cfg.endpoint)) == 1]
    said = [singles[k % len(singles)] for k in range(args.turns)]
    said[-1] = said[0]  # the last turn asks what the first asked: the same prefill, a longer history
    events: list[Event] = []
    session = Session(engines, MonotonicClock(), ours_cfg, on_event=events.append)
    try:
        await replay_turns(session, said, settle=False)
    finally:
        await session.aclose()
    growth = [t.to_json() for t in turn_latencies(events)]
    # How much context the last turn carried (the history, then a next question).
    msgs = session.history.messages(ours_cfg.system_prompt)
    last_prompt_tokens = len(engines.llm.prompt_ids(msgs)) if hasattr(engines.llm, "prompt_ids") else None
    print(f"growth: {len(growth)} turns answered of {args.turns}", file=sys.stderr, flush=True)

    # -- sessions at once: now, and before (no partial shedding either) ----------------
    levels = (1, 2, 4) if args.quick else (1, 2, 4, 8, 16)
    names = [n for n in audios if n in paired] or list(audios)
    session_rows = await sweep(engines, ours_cfg, audios, names, levels)
    before_rows = await sweep(before_engines, before_cfg, audios, names, levels)
    realtime = [r for r in session_rows if r["real_time"]]
    max_sessions = max((r["sessions"] for r in realtime), default=0)
    top = max(session_rows, key=lambda r: r["sessions"])
    # Idle footprint: sessions created and fed a second of silence, engines shared.
    import gc

    import numpy as np

    gc.collect()
    idle_base = rss_mb()
    idle = [Session(engines, MonotonicClock(), ours_cfg) for _ in range(20)]
    for s in idle:
        for _ in range(50):
            s.push_audio(np.zeros(320, np.float32))
            s.take_audio(480)
    idle_per_session = round((rss_mb() - idle_base) / len(idle), 2)
    for s in idle:
        await s.aclose()
    await engines.aclose()

    # -- results -----------------------------------------------------------------------
    def col(rows, key):
        return [r[key] for r in rows if r.get(key) is not None]

    result = {
        "mode": "real time",
        "machine": f"{os.cpu_count()} CPUs, no GPU" if not _cuda() else f"{os.cpu_count()} CPUs + CUDA",
        "cold_start_s": round(cold_start, 2),
        "engine_load_s": engines.load_times,
        "rss_engines_mb": round(rss_engines, 1),
        "recordings": list(audios),
        "first_turn_after_start": first,
        "stages_warm": {stage: dist(col(warm, stage)) for stage in STAGES},
        "voice_to_voice_s": dist([ours_1[n]["voice_to_voice_s"] for n in paired]),
        "before_voice_to_voice_s": dist([before_1[n]["voice_to_voice_s"] for n in paired]),
        "baseline_voice_to_voice_s": dist([base_1[n]["voice_to_voice_s"] for n in paired]),
        "ratio_vs_baseline_p50": percentile(ratios, 0.5),
        "ratio_vs_baseline_per_turn": dict(zip(paired, ratios, strict=True)),
        "ratio_vs_before_p50": percentile(gains, 0.5),
        "stages_before": {stage: dist([before_1[n][stage] for n in paired]) for stage in STAGES},
        "stages_ours": {stage: dist([ours_1[n][stage] for n in paired]) for stage in STAGES},
        "ttft_turn1_s": growth[0]["llm_first_token_s"] if growth else None,
        "ttft_turn20_s": growth[19]["llm_first_token_s"] if len(growth) >= 20 else None,
        "voice_to_voice_turn1_s": growth[0]["voice_to_voice_s"] if growth else None,
        "voice_to_voice_turn20_s": growth[19]["voice_to_voice_s"] if len(growth) >= 20 else None,
        "growth_turns": growth,
        "growth_last_prompt_tokens": last_prompt_tokens,
        "max_realtime_sessions": max_sessions,
        "before_max_realtime_sessions": max((r["sessions"] for r in before_rows if r["real_time"]), default=0),
        "sessions_before": before_rows,
        "memory_per_session_mb": top["memory_per_session_mb"],
        "memory_per_idle_session_mb": idle_per_session,
        "sessions": session_rows,
        "turns_ours": ours,
        "turns_before": before,
        "turns_baseline": baseline,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    plots(args.out, paired, ours_1, base_1, before_1, growth, session_rows, before_rows)
    report(result, paired, ours_1, base_1, before_1, ratios)
    print(f"\nwrote {args.out}/bench.json, waterfall.png, distributions.png, growth.png, sessions.png")


async def sweep(engines, cfg, audios, names, levels) -> list[dict]:
    """1, 2, 4, ... sessions at once until one falls behind (see the module doc)."""
    rows: list[dict] = []
    single_p95 = None
    for n_sessions in levels:
        base_rss = rss_mb()
        peak = {"rss": base_rss}
        stop = asyncio.Event()

        async def sample(peak=peak, stop=stop) -> None:
            while not stop.is_set():
                peak["rss"] = max(peak["rss"], rss_mb())
                await asyncio.sleep(0.2)

        async def one(k: int, n_sessions=n_sessions) -> tuple[list[dict], Any]:
            await asyncio.sleep(2.0 * k / n_sessions)
            return await streaming_run(engines, audios[names[k % len(names)]], cfg)

        sampler = asyncio.create_task(sample())
        results = await asyncio.gather(*(one(k) for k in range(n_sessions)))
        stop.set()
        await sampler
        answered = [turns[0]["voice_to_voice_s"] for turns, _ in results if turns and turns[0]["voice_to_voice_s"]]
        late = max(r.lateness_max_s for _, r in results)
        if n_sessions == 1:
            single_p95 = percentile(answered, 0.95)
        keeps_up = (
            len(answered) == n_sessions
            and late < LATE_LIMIT_S
            and single_p95 is not None
            and max(answered) <= 2 * single_p95
        )
        rows.append({
            "sessions": n_sessions,
            "voice_to_voice_s": dist(answered),
            "answered": len(answered),
            "lateness_max_s": late,
            "rss_before_mb": round(base_rss, 1),
            "rss_peak_mb": round(peak["rss"], 1),
            "memory_per_session_mb": round((peak["rss"] - base_rss) / n_sessions, 1),
            "real_time": keeps_up,
        })  # fmt: skip
        print(f"sessions: {rows[-1]}", file=sys.stderr, flush=True)
        if not keeps_up:
            break
    return rows


def _cuda() -> bool:
    try:
        import ctranslate2

        return ctranslate2.get_cuda_device_count() > 0
    except Exception:
        return False


def report(result, paired, ours_1, base_1, before_1, ratios) -> None:
    r = result
    print(f"\nCold start (process start to engines ready): {r['cold_start_s']:.1f} s {r['engine_load_s']}")
    if r["first_turn_after_start"]:
        print(f"First turn after start: voice-to-voice {ms(r['first_turn_after_start']['voice_to_voice_s'])} ms")
    print(f"\nWarm turns ({len(paired)} recordings, first turn of each), ms:\n")
    print("| stage | ours p50 | ours p95 | ours p99 | before p50 | before p95 |\n|---|---|---|---|---|---|")
    for stage in STAGES:
        o, b = r["stages_ours"][stage], r["stages_before"][stage]
        print(f"| {stage[:-2]} | {ms(o['p50'])} | {ms(o['p95'])} | {ms(o['p99'])} | {ms(b['p50'])} | {ms(b['p95'])} |")
    v, bl = r["voice_to_voice_s"], r["baseline_voice_to_voice_s"]
    print(
        f"\nVoice-to-voice p50/p95: ours {ms(v['p50'])}/{ms(v['p95'])} ms, before "
        f"{ms(r['before_voice_to_voice_s']['p50'])}/{ms(r['before_voice_to_voice_s']['p95'])} ms, sequential "
        f"baseline {ms(bl['p50'])}/{ms(bl['p95'])} ms; ours/baseline per turn: p50 {r['ratio_vs_baseline_p50']}, "
        f"ours/before p50 {r['ratio_vs_before_p50']}."
    )
    print(
        "\n| recording | ours | before | baseline | ours/baseline | baseline: ASR, LLM, TTS |"
        "\n|---|---|---|---|---|---|"
    )
    for n, ratio in zip(paired, ratios, strict=True):
        o, bf, b = ours_1[n], before_1[n], base_1[n]
        print(
            f"| {n} | {ms(o['voice_to_voice_s'])} | {ms(bf['voice_to_voice_s'])} | {ms(b['voice_to_voice_s'])} | "
            f"{ratio:.2f} | {ms(b['asr_final_s'])}, {ms(b['llm_s'])}, {ms(b['tts_s'])} |"
        )
    print(
        f"\nGrowth ({len(r['growth_turns'])} turns): TTFT turn 1 {ms(r['ttft_turn1_s'])} ms, turn 20 "
        f"{ms(r['ttft_turn20_s'])} ms; voice-to-voice turn 1 {ms(r['voice_to_voice_turn1_s'])} ms, "
        f"turn 20 {ms(r['voice_to_voice_turn20_s'])} ms "
        f"(the conversation's prompt at the end: {r['growth_last_prompt_tokens']} tokens)."
    )
    print("\n| pipeline | sessions | v2v p50 | v2v max | loop late max | RSS peak | per session | real time |")
    print("|---|---|---|---|---|---|---|---|")
    for label, rows in (("now", r["sessions"]), ("before", r["sessions_before"])):
        for s in rows:
            print(
                f"| {label} | {s['sessions']} | {ms(s['voice_to_voice_s']['p50'])} | "
                f"{ms(s['voice_to_voice_s']['max'])} | {ms(s['lateness_max_s'])} | {s['rss_peak_mb']:.0f} MB | "
                f"{s['memory_per_session_mb']:.1f} MB | {'yes' if s['real_time'] else 'no'} |"
            )
    print(
        f"\nMax real-time sessions: {r['max_realtime_sessions']} (before: {r['before_max_realtime_sessions']}); "
        f"memory per session "
        f"{r['memory_per_session_mb']} MB while running ({r['memory_per_idle_session_mb']} MB idle)."
    )


def plots(out: Path, paired, ours_1, base_1, before_1, growth, session_rows, before_rows) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        "endpoint": "#9e9e9e",
        "ASR final": "#42a5f5",
        "LLM first token": "#ab47bc",
        "first chunk": "#ffa726",
        "first audio": "#66bb6a",
        "LLM whole reply": "#7b1fa2",
        "TTS whole reply": "#ef6c00",
    }
    fig, ax = plt.subplots(figsize=(11, 0.9 * len(paired) + 1.8))
    y = 0
    labels = []
    for n in paired:
        for who, row, parts in (
            ("ours", ours_1[n], [("endpoint", "endpoint_s"), ("ASR final", "asr_final_s"),
                                 ("LLM first token", "llm_first_token_s"), ("first chunk", "first_chunk_s"),
                                 ("first audio", "first_audio_s")]),
            ("before", before_1[n], [("endpoint", "endpoint_s"), ("ASR final", "asr_final_s"),
                                     ("LLM first token", "llm_first_token_s"), ("first chunk", "first_chunk_s"),
                                     ("first audio", "first_audio_s")]),
            ("baseline", base_1[n], [("endpoint", "endpoint_s"), ("ASR final", "asr_final_s"),
                                     ("LLM whole reply", "llm_s"), ("TTS whole reply", "tts_s")]),
        ):  # fmt: skip
            left = 0.0
            for label, key in parts:
                width = row.get(key) or 0.0
                ax.barh(y, width, left=left, color=colors[label], edgecolor="white", height=0.8)
                left += width
            ax.text(left + 0.03, y, f"{row['voice_to_voice_s']:.2f} s", va="center", fontsize=7)
            labels.append(f"{n.rsplit('.', 1)[0][-14:]} {who}")
            y += 1
        y += 0.5
    ticks = []
    k = 0
    for _ in paired:
        ticks += [k, k + 1, k + 2]
        k += 3.5
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds after the person stopped speaking")
    ax.set_title("Where the time goes: each turn's stages, from the end of speech to the first reply sample")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    ax.legend(handles, colors.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(out / "waterfall.png", dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    data = [
        [base_1[n]["voice_to_voice_s"] for n in paired],
        [before_1[n]["voice_to_voice_s"] for n in paired],
        [ours_1[n]["voice_to_voice_s"] for n in paired],
    ]
    axes[0].boxplot(data, tick_labels=["sequential\nbaseline", "streaming\nbefore", "streaming\nnow"])
    axes[0].set_ylabel("voice-to-voice (s)")
    axes[0].set_title("Voice-to-voice, same engines, same run")
    stage_data = [[ours_1[n][s] for n in paired if ours_1[n][s] is not None] for s in STAGES[:-1]]
    axes[1].boxplot(stage_data, tick_labels=[s[:-2].replace("_", "\n") for s in STAGES[:-1]])
    axes[1].set_ylabel("seconds")
    axes[1].set_title("Stages of the streaming pipeline now")
    fig.tight_layout()
    fig.savefig(out / "distributions.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 3.5))
    xs = list(range(1, len(growth) + 1))
    ax.plot(xs, [g["llm_first_token_s"] for g in growth], "o-", label="LLM first token")
    ax.plot(xs, [g["voice_to_voice_s"] for g in growth], "s-", label="voice-to-voice")
    ax.set_xlabel("turn of one conversation")
    ax.set_ylabel("seconds")
    ax.legend()
    ax.set_title("Latency as the conversation grows")
    fig.tight_layout()
    fig.savefig(out / "growth.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for label, rows, color in (("now", session_rows, "C0"), ("before", before_rows, "C3")):
        ns = [s["sessions"] for s in rows]
        ax.plot(ns, [s["voice_to_voice_s"]["p50"] for s in rows], "o-", color=color, label=f"{label}: p50")
        ax.plot(ns, [s["voice_to_voice_s"]["max"] for s in rows], "s--", color=color, label=f"{label}: max")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sessions at once")
    ax.set_ylabel("seconds")
    ax.legend()
    ax.set_title("Sessions sharing one set of engines")
    fig.tight_layout()
    fig.savefig(out / "sessions.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))
