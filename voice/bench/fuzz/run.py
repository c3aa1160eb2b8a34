"""The server under attack: malformed messages, abusive connections and crafted HTTP, with a real turn held meanwhile.

    python -m voice.bench fuzz [--quick] [--out DIR] [--seed N]
        (default: docs/bench/fuzz.json; --quick: out/bench-fuzz)

Starts a real server (``python -m voice.run --serve``, its own process, a
token, a store in a fresh folder, its log in a file), holds a warm-up
conversation, then attacks it over loopback on both dialects (``/ws`` and
``/v1/realtime``), everything made from one seed (``voice/bench/fuzz/``):

1. at least 10,000 malformed messages (``--quick``: 1,000) by category, each
   followed by a probe the server must answer, so every answer (error code,
   close) is counted against the message that caused it; while they run, one
   real client (``transport.client.talk``, in a process of its own) says a
   recording and its transcript is scored; then 1,000 connect/close cycles
   (``--quick``: 100), both dialects, closed at each step of a session;
2. 50 stalled (slowloris) handshakes, crafted HTTP requests on every route,
   TCP resets mid-message, and clients that never read while the server sends;
3. the session cap: connections up to ``--max-sessions`` and beyond it.

Reported (a Markdown table and DIR/fuzz.json): messages sent and how each
category was answered; error codes per dialect; close codes by phase; HTTP
statuses against what docs/protocol.md says; tracebacks and ERROR lines in
the server's log (the target is none); the real turn's WER and reply against
the warm-up's; the server's memory (VmRSS) after the warm-up and at the end;
rows left in the store. A connection the server closes is counted and
reopened; nothing the server does stops the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from voice.bench.common import ROOT, parser
from voice.bench.fuzz.abuse import crafted_http, non_readers, resets, session_cap, slowloris, wait_idle
from voice.bench.fuzz.clients import ServerGone, Tally, Target, real_session
from voice.bench.fuzz.corpus import corpus
from voice.bench.fuzz.messages import CATEGORIES, DIALECTS, REALTIME, WS
from voice.bench.fuzz.messages_attack import MessageFuzzer, cycles
from voice.bench.fuzz.server import Server, store_counts
from voice.bench.fuzz.server_log import log_summary

ENV = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR", "TQDM_DISABLE": "1"}


# -- the run -------------------------------------------------------------------------------


async def rss_sampler(server: Server, peaks: dict[str, float]) -> None:
    while True:
        own, family = server.rss_mb_with_engines()
        peaks["own"] = max(peaks.get("own", 0), own or 0)
        peaks["family"] = max(peaks.get("family", 0), family or 0)
        await asyncio.sleep(1.0)


async def attack(args: argparse.Namespace, server: Server, report: dict[str, Any]) -> Tally:
    """Phases 1 to 3, filling ``report`` as they go (what was measured stays measured if the server dies)."""
    from voice.bench.common import recordings

    tally = Tally()
    target = Target(server, tally)
    recording = next(r for r in recordings() if args.recording in r.name)
    print("warm-up conversation ...", file=sys.stderr, flush=True)
    report["warm_up"] = await real_session(target, recording, args.work / "warm-up")
    own, family = server.rss_mb_with_engines()
    report["rss_mb"] = {"after_warm_up": own, "after_warm_up_with_children": family}
    report["store_before"] = store_counts(server.db)
    report["log_offset"] = len(server.log_text())
    checkpoints: list[dict[str, Any]] = []
    report["rss_checkpoints"] = checkpoints

    async def checkpoint(after: str) -> None:
        """The server's memory once its sessions have closed, beside how many sessions it has stored so far."""
        await wait_idle(target, 15)
        own, family = server.rss_mb_with_engines()
        stored = None
        with contextlib.suppress(sqlite3.Error):
            stored = store_counts(server.db)["sessions"]
        checkpoints.append({"after": after, "rss_mb": own, "with_children_mb": family, "sessions_stored": stored})

    await checkpoint("the warm-up")
    peaks: dict[str, float] = {}
    sampler = asyncio.create_task(rss_sampler(server, peaks))
    try:
        items = corpus(args.seed, args.messages)
        by_dialect = {d: [i for i in items if i.dialect == d] for d in DIALECTS}
        print(
            f"phase 1: {sum(i.messages for i in items)} messages, a real turn meanwhile ...",
            file=sys.stderr,
            flush=True,
        )
        t0 = time.monotonic()

        async def the_real_turn() -> dict[str, Any]:
            await asyncio.sleep(3)  # the attacks are under way
            return await real_session(target, recording, args.work / "real")

        fuzzers = [MessageFuzzer(target, d).run(by_dialect[d]) for d in DIALECTS]
        report["real_session"], *_ = await asyncio.gather(the_real_turn(), *fuzzers)
        report["phase_1_s"] = round(time.monotonic() - t0, 1)
        await checkpoint("the malformed messages")
        # Apart, so that what the sessions cost shows on its own in the server's memory.
        print(f"phase 1b: {args.cycles} connect/close cycles ...", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        report["cycles"] = await cycles(target, args.cycles, args.seed)
        report["cycles_s"] = round(time.monotonic() - t0, 1)
        await checkpoint("the connect/close cycles")

        print("phase 2: slowloris, crafted HTTP, resets, non-readers ...", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        report["http"] = await crafted_http(target)  # alone: a 101 that could be a 503 at the cap is not
        slow, rst, readers = await asyncio.gather(
            slowloris(target, 50, args.slowloris_s),
            resets(target, args.resets),
            non_readers(target, messages_ws=40_000, updates_rt=20, wait_s=args.non_reader_s),
        )
        report["phase_2_s"] = round(time.monotonic() - t0, 1)
        report["slowloris"], report["resets"], report["non_readers"] = slow, rst, readers
        await checkpoint("slowloris, crafted HTTP, resets, non-readers")

        print("phase 3: the session cap ...", file=sys.stderr, flush=True)
        report["session_cap"] = await session_cap(target, args.max_sessions)
        await checkpoint("the session cap")
    except ServerGone as e:
        report["server_gone"] = str(e)
    finally:
        sampler.cancel()
        report["sessions_open_at_end"] = await wait_idle(target, 15)
        own, family = server.rss_mb_with_engines()
        report["rss_mb"] |= {
            "end": own,
            "end_with_children": family,
            "peak": peaks.get("own"),
            "peak_with_children": peaks.get("family"),
        }
        if own and report["rss_mb"]["after_warm_up"]:
            report["rss_mb"]["end_over_warm_up"] = round(own / report["rss_mb"]["after_warm_up"], 3)
        report["health_at_end"] = server.health()
        with contextlib.suppress(sqlite3.Error):
            report["store_after"] = store_counts(server.db)
    return tally


def summarise(tally: Tally, report: dict[str, Any]) -> None:
    cats = CATEGORIES
    report["messages"] = {
        "total": sum(tally.sent.values()),
        "probes": tally.probes,
        "connections": dict(tally.connections),
        "handshakes_refused_on_reconnect": {str(k): v for k, v in tally.refused.items()},
        "by_category": {c: {d: tally.sent[(c, d)] for d in DIALECTS if tally.sent[(c, d)]} for c in cats},
        "answers": {
            c: {d: dict(tally.answers[(c, d)].most_common()) for d in DIALECTS if tally.sent[(c, d)]} for c in cats
        },
        "examples": [
            {"category": c, "dialect": d, "outcome": o, "messages": notes}
            for (c, d, o), notes in sorted(tally.examples.items())
        ],
    }
    accepted: dict[str, dict[str, list[str]]] = {}
    for (category, dialect), notes in sorted(tally.accepted.items()):
        for note in notes:  # "session.update session.audio.output.voice=0": by message and field
            where, _, value = note.partition("=")
            accepted.setdefault(f"{dialect} {where}", {}).setdefault(category, []).append(value)
    report["accepted_though_malformed"] = accepted
    report["error_codes"] = {d: dict(tally.codes[d].most_common()) for d in DIALECTS}
    report["close_codes"] = {
        f"{phase} {d}": {str(k): v for k, v in sorted(c.items(), key=str)}
        for (phase, d), c in sorted(tally.closes.items())
    }


def print_report(r: dict[str, Any]) -> None:
    m = r.get("messages", {})
    print(
        f"server: ready in {r['server_start_s']} s; seed {r['seed']}; {r['mode']} mode; "
        f"phase 1 {r.get('phase_1_s')} s, cycles {r.get('cycles_s')} s, phase 2 {r.get('phase_2_s')} s\n"
    )
    print(
        f"malformed messages sent: {m.get('total')} ({m.get('probes')} probes besides; "
        f"connections opened: {m.get('connections')})\n"
    )
    print("| category | /ws | /v1/realtime | answered with (/ws; /v1/realtime) |\n|---|---|---|---|")
    for c, per in m.get("by_category", {}).items():
        answers = m["answers"].get(c, {})
        said = "; ".join(
            ", ".join(f"{k} {v}" for k, v in list(answers.get(d, {}).items())[:6]) or "-" for d in DIALECTS
        )
        print(f"| {c} | {per.get(WS, 0)} | {per.get(REALTIME, 0)} | {said} |")
    print("\n| error code | /ws | /v1/realtime |\n|---|---|---|")
    codes = r.get("error_codes", {})
    for code in sorted(set(codes.get(WS, {})) | set(codes.get(REALTIME, {}))):
        print(f"| {code} | {codes.get(WS, {}).get(code, 0)} | {codes.get(REALTIME, {}).get(code, 0)} |")
    print("\n| connections closed by the server: phase, dialect | close codes |\n|---|---|")
    for where, c in r.get("close_codes", {}).items():
        print(f"| {where} | {', '.join(f'{k}: {v}' for k, v in c.items())} |")
    bad = [e for e in m.get("examples", []) if not e["outcome"].startswith("event:")]
    if bad:
        print("\n| closes and hangs: category, dialect | outcome | e.g. |\n|---|---|---|")
        for e in bad:
            print(f"| {e['category']}, {e['dialect']} | {e['outcome']} | {'; '.join(e['messages'][:3])} |")
    if accepted := r.get("accepted_though_malformed"):
        n = sum(len(v) for by in accepted.values() for v in by.values())
        print(f"\n{n} messages wrong in a field answered with no error: field | values accepted\n|---|---|")
        for where, by in accepted.items():
            print(f"| {where} | {'; '.join(', '.join(v) for v in by.values())} |")
    if cyc := r.get("cycles"):
        print("\n| connect/close cycle | n | outcomes | p50 / max ms |\n|---|---|---|---|")
        for k, v in cyc.items():
            print(
                f"| {k} | {v['n']} | {', '.join(f'{a} x{b}' for a, b in v['outcomes'].items())} | "
                f"{v['p50_ms']} / {v['max_ms']} |"
            )
    if http := r.get("http"):
        print(
            f"\ncrafted HTTP requests: {http['requests']}; statuses: "
            + ", ".join(f"{k}: {v}" for k, v in http["statuses"].items())
        )
        off = [x for x in http["results"] if not x["as_documented"]]
        print(f"not as documented: {len(off)}")
        if off:
            print("| request | route | status | documented |\n|---|---|---|---|")
            for x in off:
                print(f"| {x['case']} | {x['route']} | {x['status'] or x['note']} | {x['expected']} |")
    if slow := r.get("slowloris"):
        print(
            f"\nslowloris: {slow['handshakes']} stalled handshakes: {slow['answers']}; closed after "
            f"p50 {slow['closed_after_s_p50']} s, max {slow['closed_after_s_max']} s; meanwhile "
            f"{slow['served_meanwhile']}"
        )
    if rst := r.get("resets"):
        print(
            f"TCP resets: {sum(rst['resets'].values())} ({rst['resets']}); /health after: {rst['health_after']}"
            + (f"; could not attack: {rst['could_not_attack']}" if rst["could_not_attack"] else "")
        )
    for nr in r.get("non_readers", []):
        print(f"never reads ({nr['dialect']}): sent {nr.get('sent')} in {nr.get('sending_s')} s, {nr['outcome']}")
    if readers := r.get("non_readers"):
        held = readers[0].get("sessions_open_at_the_end_of_the_wait")
        print(f"sessions the server counted open at the end of that wait: {held}")
    if cap := r.get("session_cap"):
        print(
            f"session cap {cap['max_sessions']}: held {cap['held']}, beyond it {cap['beyond_the_cap']}, "
            f"held ones answering {cap['held_sessions_answering']}, race for one slot {cap['race_for_one_slot']}, "
            f"open after closing all {cap['open_after_closing_all']}, then {cap['a_session_after']}"
        )
    log = r.get("log", {})
    print(
        f"\nserver log during the attacks: {log.get('tracebacks')} tracebacks, {log.get('error_lines')} ERROR lines, "
        f"{log.get('warning_lines')} WARNING lines"
    )
    for line, n in log.get("errors", []):
        print(f"  {n} x {line[:150]}")
    for line, n in log.get("exceptions", []):
        print(f"  raised {n} x {line[:150]}")
    for name in ("warm_up", "real_session"):
        s = r.get(name) or {}
        print(
            f"\n{name.replace('_', ' ')}: WER {s.get('wer')}; endpoint to final transcript "
            f"{s.get('endpoint_to_final_s')} s, voice-to-voice {s.get('voice_to_voice_s')} s; errors {s.get('errors')}"
            f"\n  heard: {s.get('transcript')!r}\n  reply: {s.get('reply')!r}"
        )
        if not s.get("ok"):
            print(f"  NOT A WHOLE TURN: {s.get('output', '')[-500:]}")
    rss = r.get("rss_mb", {})
    print(
        f"\nserver RSS: {rss.get('after_warm_up')} MB after the warm-up, {rss.get('end')} MB at the end "
        f"(x{rss.get('end_over_warm_up')}), peak {rss.get('peak')} MB; with its children "
        f"{rss.get('after_warm_up_with_children')} -> {rss.get('end_with_children')} MB"
    )
    for c in r.get("rss_checkpoints", []):
        print(
            f"  after {c['after']}: {c['rss_mb']} MB ({c['with_children_mb']} MB with its children), "
            f"{c['sessions_stored']} sessions stored so far"
        )
    before, after = r.get("store_before", {}), r.get("store_after", {})
    if before and after:
        print(
            f"store: +{after['sessions'] - before['sessions']} sessions "
            f"(+{after['sessions_without_turns'] - before['sessions_without_turns']} without turns, "
            f"+{after['sessions_with_turns'] - before['sessions_with_turns']} with), "
            f"+{after['turns'] - before['turns']} turns, {after['bytes'] - before['bytes']:+} bytes"
        )
    print(
        f"sessions open at the end: {r.get('sessions_open_at_end')}; /health at the end: {r.get('health_at_end')}; "
        f"stop: {r.get('server_exit')}"
    )
    if r.get("server_gone"):
        print(f"THE SERVER STOPPED ANSWERING: {r['server_gone']}")


async def _main(argv: list[str] | None) -> None:
    ap = parser(__name__, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="where fuzz.json goes (default: docs/bench; --quick: out/bench-fuzz)")
    ap.add_argument(
        "--work",
        type=Path,
        default=ROOT / "out" / "bench-fuzz" / "work",
        help="the server's store and log, the clients' recordings (emptied first)",
    )
    ap.add_argument("--quick", action="store_true", help="1,000 messages, 100 cycles: a trial run")
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--messages", type=int, help="malformed messages (default 10,000; --quick 1,000)")
    ap.add_argument("--cycles", type=int, help="connect/close cycles (default 1,000; --quick 100)")
    ap.add_argument("--max-sessions", type=int, default=8, help="the server's cap (its --max-sessions)")
    ap.add_argument("--recording", default="aew_a0003", help="what the real client says (a shared recording)")
    args = ap.parse_args(argv)
    args.messages = args.messages or (1000 if args.quick else 10_000)
    args.cycles = args.cycles if args.cycles is not None else (100 if args.quick else 1000)
    args.out = args.out or (ROOT / "out" / "bench-fuzz" if args.quick else ROOT / "docs" / "bench")
    args.resets = 2 if args.quick else 10  # per kind, 5 kinds
    args.slowloris_s = 15.0 if args.quick else 30.0
    args.non_reader_s = 25.0  # the server's 10 s slow-client limit, its 1 s drain and its 10 s close timeout
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    args.out.mkdir(parents=True, exist_ok=True)

    server = Server(args.work, args.max_sessions)
    print("starting the server ...", file=sys.stderr, flush=True)
    started = await asyncio.to_thread(server.serve)
    report: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "seed": args.seed,
        "server_start_s": round(started, 1),
        "max_sessions": args.max_sessions,
    }
    t0 = time.monotonic()
    try:
        tally = await attack(args, server, report)
    finally:
        report["server_exit"] = await asyncio.to_thread(server.stop_timed)
    report["attacks_s"] = round(time.monotonic() - t0, 1)
    summarise(tally, report)
    text = server.log_text()
    report["log"] = log_summary(text[report.pop("log_offset", 0) :])
    report["log"]["tracebacks_whole_run"] = log_summary(text)["tracebacks"]
    (args.out / "fuzz.json").write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    print_report(report)
    print(f"\nwrote {args.out}/fuzz.json; the server's log is {server.log}")


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))
