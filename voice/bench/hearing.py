"""Hearing under load: how soon a phone caller's interruption pauses the reply, in real time.

    python -m voice.bench hearing [--out DIR] [--sessions 1,4] [--rounds 2] [--after 1.2]

One server (the embedded default engines, in this process). At each level, n callers dial in
to ``/telephony/twilio`` at once (their starts 0.3 s apart), as Twilio's Media Streams does
(8 kHz mu-law, 20 ms frames in real time, ``voice/bench/twilio_caller.py``): each asks a
question (a CMU ARCTIC sentence from ../shared/fixtures/speech, not in this repository) and,
``--after`` seconds into the reply, says an LJ Speech sentence over it. From each session's
events, on its own timeline (sample 0 of the call is time 0, so the times are where a person
would be, whatever the session's lag):

- **heard after**: the VAD's report of the interruption (``speech_start.t``) after its onset
  (``speech_start.onset``, placed on the audio): the hearing's delay, its confirmation
  (~100 ms by design) included; anything beyond that is the session behind real time;
- **paused after**: the reply's ``playback_paused`` after the onset (virtual-time replays of
  the same input: 100-120 ms);
- **cut after**: the ``barge_in`` after the onset, and whether there was one at all;
- **behind**: how late the session's 20 ms audio ticks ran (its pump's lateness), worst.

Each level runs once per way, taking turns at going first: ``now`` (shell/scheduler.py: the
engines' queues run the most urgent work first, interruption checks ahead of all but hearing,
stale previews shed; the checks over Whisper's short window) and ``before`` (issue 32's
starting point: every queue in arrival order, the checks over the full 30 s window). Prints a table and writes
DIR/hearing.json. The engines' cold start is apart.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from core.call import CallConfig
from core.events import BargeIn, PlaybackPaused, SpeechStart
from shell.engines import EngineConfig, load_engines
from transport.files import load_audio
from transport.ws_server import ServerConfig, VoiceServer
from voice.app.latency import percentile
from voice.bench.common import ROOT, SHARED_SPEECH, parser
from voice.bench.twilio_caller import Listen, Say, SayOver, call, to_8k

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR"}

QUESTIONS = ("aew_a0001", "aew_a0003", "axb_a0004", "axb_a0006")
INTERRUPTIONS = ("LJ001-0005", "LJ001-0007", "LJ001-0001")
WAYS = ("now", "before")
CHECK_WINDOW = {"now": "short", "before": "full"}


def _speech(name: str):
    path = next(SHARED_SPEECH.glob(f"*{name}*.wav"))
    return to_8k(load_audio(path))


def measure(events: list) -> dict:
    """One call's figures from its session's events: the first speech that began over the reply."""
    paused = [e for e in events if isinstance(e, PlaybackPaused)]
    if not paused:
        return {"interrupted": False}
    first_pause = paused[0].t
    # The interruption: the first speech whose VAD report came after the reply had begun to play.
    starts = [e for e in events if isinstance(e, SpeechStart) and e.t >= first_pause - 1.0]
    if not starts:
        return {"interrupted": False}
    onset = starts[0].onset
    pause = next((e.t for e in paused if e.t >= onset - 0.05), None)
    cut = next((e.t for e in events if isinstance(e, BargeIn) and e.t >= onset - 0.05), None)
    return {
        "interrupted": cut is not None,
        "onset_s": round(onset, 3),
        "heard_after_s": round(starts[0].t - onset, 3),
        "paused_after_s": None if pause is None else round(pause - onset, 3),
        "cut_after_s": None if cut is None else round(cut - onset, 3),
    }


async def level(server: VoiceServer, n: int, k: int, after_s: float) -> list[dict]:
    """n callers at once; their sessions' figures."""
    questions = [_speech(QUESTIONS[(k + i) % len(QUESTIONS)]) for i in range(n)]
    interruptions = [_speech(INTERRUPTIONS[(k + i) % len(INTERRUPTIONS)])[: 8000 * 3] for i in range(n)]
    before = set(server.closed)

    async def caller(i: int) -> None:
        await asyncio.sleep(0.3 * i)
        steps = [Say(questions[i]), SayOver(interruptions[i], after_s), Listen(12.0)]
        await call(server.port, steps=steps)

    await asyncio.gather(*(caller(i) for i in range(n)))
    for _ in range(100):  # the sessions' records, once their connections have ended
        records = [r for sid, r in server.closed.items() if sid not in before]
        if len(records) >= n:
            break
        await asyncio.sleep(0.1)
    return [measure(r.events) | {"behind_max_s": r.lateness_max_s, "behind_p99_s": r.lateness_p99_s} for r in records]


def summarize(rows: list[dict]) -> dict:
    out: dict = {"calls": len(rows), "barge_ins": sum(r["interrupted"] for r in rows)}
    for key in ("heard_after_s", "paused_after_s", "cut_after_s", "behind_max_s"):
        values = [r[key] for r in rows if r.get(key) is not None]
        out[key] = {"n": len(values), "p50": percentile(values, 0.5), "p95": percentile(values, 0.95)}
    return out


async def _main(argv: list[str] | None) -> None:
    ap = parser(__name__, description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--sessions", default="1,4", help="callers at once, per level")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--after", type=float, default=1.2, help="seconds of reply played before the interruption")
    args = ap.parse_args(argv)
    levels = [int(x) for x in args.sessions.split(",")]
    t0 = time.monotonic()
    engines = await asyncio.to_thread(load_engines, EngineConfig())
    cold_start_s = round(time.monotonic() - t0, 1)
    server = VoiceServer(engines, ServerConfig(port=0, call=CallConfig(greeting=None, idle=None)))
    await server.start()
    rows: list[dict] = []
    try:
        await level(server, 1, 0, args.after)  # warm-up, not counted
        for k in range(args.rounds):
            for n in levels:
                ways = WAYS if (k + n) % 2 == 0 else WAYS[::-1]
                for way in ways:
                    engines.schedule_by_urgency(way == "now")
                    window = CHECK_WINDOW[way]
                    session = replace(server.config.session, interruption_check_window=window)
                    server.config = replace(server.config, session=session)
                    for r in await level(server, n, k, args.after):
                        rows.append({"way": way, "sessions": n, "round": k, **r})
                        print(rows[-1], file=sys.stderr, flush=True)
                    await asyncio.sleep(1.0)
    finally:
        engines.schedule_by_urgency(True)
        await server.close()
        await engines.aclose()
    summary = {
        f"{way}_{n}": summarize([r for r in rows if r["way"] == way and r["sessions"] == n])
        for n in levels
        for way in WAYS
    }
    result = {"summary": summary, "rows": rows, "after_s": args.after, "cold_start_s": cold_start_s}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hearing.json").write_text(json.dumps(result, indent=2) + "\n")

    def ms(d: dict) -> str:
        return "-" if d["p50"] is None else f"{d['p50'] * 1000:.0f} / {d['p95'] * 1000:.0f} ms"

    print(
        "| callers | way | barge-ins | heard after p50/p95 | paused after p50/p95 | cut after p50/p95 "
        "| behind (worst) p50/p95 |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in levels:
        for way in WAYS:
            s = summary[f"{way}_{n}"]
            print(
                f"| {n} | {way} | {s['barge_ins']} of {s['calls']} | {ms(s['heard_after_s'])} | "
                f"{ms(s['paused_after_s'])} | {ms(s['cut_after_s'])} | {ms(s['behind_max_s'])} |"
            )
    print(f"cold start (engines): {cold_start_s} s\nwrote {args.out}/hearing.json")


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))
