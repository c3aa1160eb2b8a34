"""Hearing under load: how soon an interruption pauses and cuts the reply, on every transport, in real time.

    python -m voice.bench hearing [--out DIR] [--transports twilio,ws,webrtc] [--sessions 1,4]
                                  [--rounds 2] [--after 1.2] [--same-process]

One server (the embedded default engines, in this process). At each level, n clients of one
transport talk at once (their starts 0.3 s apart), in real time, from a process of their own
(``--same-process``: on the server's event loop, as before): phone callers on
``/telephony/twilio`` as Twilio's Media Streams makes them (8 kHz mu-law,
``voice/bench/twilio_caller.py``), our protocol on ``/ws`` (``transport/client.py``), and
WebRTC peers (aiortc, Opus, ``voice/bench/webrtc_client.py``). Each asks a question (a CMU
ARCTIC sentence from ../shared/fixtures/speech, not in this repository) and, ``--after``
seconds into the reply as its speaker played it, says an LJ Speech sentence over it. From each session's
events, on its own timeline (sample 0 of the call is time 0, so the times are where a person
would be, whatever the session's lag):

- **heard after**: the VAD's report of the interruption (``speech_start.t``) after its onset
  (``speech_start.onset``, placed on the audio): the hearing's delay, its confirmation
  (~100 ms by design) included; anything beyond that is the session behind real time;
- **paused after**: the reply's ``playback_paused`` after the onset (virtual-time replays of
  the same input: 100-120 ms);
- **cut after**: the ``barge_in`` after the onset, and whether there was one at all;
- **answered after**: the question's first reply audio sent (``playback_start``) after the end
  of its speech (``speech_end.end``): voice-to-voice as the server sees it;
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

from core.audio import ASR_RATE
from core.call import CallConfig
from core.events import BargeIn, PlaybackPaused, PlaybackStart, SpeechEnd, SpeechStart
from shell.engines import EngineConfig, load_engines
from transport.client import talk
from transport.files import load_audio
from transport.ws_server import ServerConfig, VoiceServer
from voice.app.latency import percentile
from voice.bench.common import ROOT, SHARED_SPEECH, parser
from voice.bench.twilio_caller import Listen, Say, SayOver, call, to_8k
from voice.bench.webrtc_client import webrtc_call

# Set by `python -m voice.bench` before this module is imported (what the engines read as they load).
ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR"}

QUESTIONS = ("aew_a0001", "aew_a0003", "axb_a0004", "axb_a0006")
INTERRUPTIONS = ("LJ001-0005", "LJ001-0007", "LJ001-0001")
TRANSPORTS = ("twilio", "ws", "webrtc")
WAYS = ("now", "before")
CHECK_WINDOW = {"now": "short", "before": "full"}


def _speech(name: str):
    """A shared recording at 16 kHz."""
    return load_audio(next(SHARED_SPEECH.glob(f"*{name}*.wav")))


async def say(transport: str, port: int, question, interruption, after_s: float) -> None:
    """One client: the question, then the interruption over the reply once ``after_s`` of it played."""
    if transport == "twilio":
        await call(port, steps=[Say(to_8k(question)), SayOver(to_8k(interruption), after_s), Listen(12.0)])
    elif transport == "ws":
        await talk(f"ws://127.0.0.1:{port}/ws", question, interrupt=(interruption, after_s), max_tail_s=30)
    else:
        await webrtc_call(f"http://127.0.0.1:{port}", question, interrupt=(interruption, after_s), turns=2)


def measure(events: list) -> dict:
    """One call's figures from its session's events: the question's answer, and the first speech
    that began over it."""
    end = next((e for e in events if isinstance(e, SpeechEnd)), None)
    playing = next((e for e in events if isinstance(e, PlaybackStart)), None)
    answered = {"answered_after_s": round(playing.t - end.end, 3) if end and playing else None}
    paused = [e for e in events if isinstance(e, PlaybackPaused)]
    if not paused:
        return {"interrupted": False} | answered
    first_pause = paused[0].t
    # The interruption: the first speech whose VAD report came after the reply had begun to play.
    starts = [e for e in events if isinstance(e, SpeechStart) and e.t >= first_pause - 1.0]
    if not starts:
        return {"interrupted": False} | answered
    onset = starts[0].onset
    pause = next((e.t for e in paused if e.t >= onset - 0.05), None)
    cut = next((e.t for e in events if isinstance(e, BargeIn) and e.t >= onset - 0.05), None)
    return {
        "interrupted": cut is not None,
        "onset_s": round(onset, 3),
        "heard_after_s": round(starts[0].t - onset, 3),
        "paused_after_s": None if pause is None else round(pause - onset, 3),
        "cut_after_s": None if cut is None else round(cut - onset, 3),
    } | answered


async def clients(transport: str, port: int, n: int, k: int, after_s: float) -> None:
    """n clients of ``transport`` at once, their starts 0.3 s apart, until each is done."""
    questions = [_speech(QUESTIONS[(k + i) % len(QUESTIONS)]) for i in range(n)]
    interruptions = [_speech(INTERRUPTIONS[(k + i) % len(INTERRUPTIONS)])[: ASR_RATE * 3] for i in range(n)]

    async def caller(i: int) -> None:
        await asyncio.sleep(0.3 * i)
        await say(transport, port, questions[i], interruptions[i], after_s)

    await asyncio.gather(*(caller(i) for i in range(n)))


# The clients in a process of their own: their audio, Opus and mu-law work is not the server's loop's.
CLIENTS = "import asyncio, sys; from voice.bench.hearing import clients; a = sys.argv[1:]; " + (
    "asyncio.run(clients(a[0], int(a[1]), int(a[2]), int(a[3]), float(a[4])))"
)


async def level(
    server: VoiceServer, transport: str, n: int, k: int, after_s: float, same_process: bool = False
) -> list[dict]:
    """n clients of ``transport`` at once; their sessions' figures."""
    before = set(server.closed)
    if same_process:
        await clients(transport, server.port, n, k, after_s)
    else:
        args = [transport, str(server.port), str(n), str(k), str(after_s)]
        process = await asyncio.create_subprocess_exec(sys.executable, "-c", CLIENTS, *args, cwd=ROOT)
        if await process.wait() != 0:
            raise RuntimeError(f"the {transport} clients failed (exit {process.returncode})")
    for _ in range(100):  # the sessions' records, once their connections have ended
        records = [r for sid, r in server.closed.items() if sid not in before]
        if len(records) >= n:
            break
        await asyncio.sleep(0.1)
    return [measure(r.events) | {"behind_max_s": r.lateness_max_s, "behind_p99_s": r.lateness_p99_s} for r in records]


def summarize(rows: list[dict]) -> dict:
    out: dict = {"calls": len(rows), "barge_ins": sum(r["interrupted"] for r in rows)}
    for key in ("answered_after_s", "heard_after_s", "paused_after_s", "cut_after_s", "behind_max_s"):
        values = [r[key] for r in rows if r.get(key) is not None]
        out[key] = {"n": len(values), "p50": percentile(values, 0.5), "p95": percentile(values, 0.95)}
    return out


async def _main(argv: list[str] | None) -> None:
    ap = parser(__name__, description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench")
    ap.add_argument("--transports", default=",".join(TRANSPORTS))
    ap.add_argument("--sessions", default="1,4", help="clients at once, per level")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--after", type=float, default=1.2, help="seconds of reply played before the interruption")
    ap.add_argument("--same-process", action="store_true", help="the clients on the server's event loop")
    args = ap.parse_args(argv)
    levels = [int(x) for x in args.sessions.split(",")]
    transports = args.transports.split(",")
    t0 = time.monotonic()
    engines = await asyncio.to_thread(load_engines, EngineConfig())
    cold_start_s = round(time.monotonic() - t0, 1)
    server = VoiceServer(engines, ServerConfig(port=0, call=CallConfig(greeting=None, idle=None)))
    await server.start()
    rows: list[dict] = []
    try:
        await level(server, "twilio", 1, 0, args.after)  # warm-up, not counted
        for k in range(args.rounds):
            for transport, n in [(t, n) for t in transports for n in levels]:
                ways = WAYS if (k + n) % 2 == 0 else WAYS[::-1]
                for way in ways:
                    engines.schedule_by_urgency(way == "now")
                    window = CHECK_WINDOW[way]
                    session = replace(server.config.session, interruption_check_window=window)
                    server.config = replace(server.config, session=session)
                    for r in await level(server, transport, n, k, args.after, args.same_process):
                        rows.append({"transport": transport, "way": way, "sessions": n, "round": k, **r})
                        print(rows[-1], file=sys.stderr, flush=True)
                    await asyncio.sleep(1.0)
    finally:
        engines.schedule_by_urgency(True)
        await server.close()
        await engines.aclose()
    groups = [(t, n, way) for t in transports for n in levels for way in WAYS]
    summary = {
        f"{t}_{n}_{way}": summarize([r for r in rows if (r["transport"], r["sessions"], r["way"]) == (t, n, way)])
        for t, n, way in groups
    }
    for n in levels:  # over every transport
        for way in WAYS:
            summary[f"all_{n}_{way}"] = summarize([r for r in rows if (r["sessions"], r["way"]) == (n, way)])
    result = {
        "summary": summary,
        "rows": rows,
        "after_s": args.after,
        "clients": "the server's process" if args.same_process else "a process of their own",
        "cold_start_s": cold_start_s,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hearing.json").write_text(json.dumps(result, indent=2) + "\n")

    def ms(d: dict) -> str:
        return "-" if d["p50"] is None else f"{d['p50'] * 1000:.0f} / {d['p95'] * 1000:.0f} ms"

    print(
        "| transport | clients | way | barge-ins | answered after p50/p95 | heard after p50/p95 "
        "| paused after p50/p95 | cut after p50/p95 | behind (worst) p50/p95 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for t, n, way in groups + [("all", n, way) for n in levels for way in WAYS]:
        s = summary[f"{t}_{n}_{way}"]
        print(
            f"| {t} | {n} | {way} | {s['barge_ins']} of {s['calls']} | {ms(s['answered_after_s'])} | "
            f"{ms(s['heard_after_s'])} | "
            f"{ms(s['paused_after_s'])} | {ms(s['cut_after_s'])} | {ms(s['behind_max_s'])} |"
        )
    print(f"cold start (engines): {cold_start_s} s\nwrote {args.out}/hearing.json")


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))
