"""Replay a recording through the whole pipeline (``python -m voice.run --replay IN``).

Writes ``reply.wav`` (the assistant's audio on the input's timeline),
``events.jsonl`` (every pipeline event, flushed as it happens) and
``transcript.json`` in ``--out``, and prints the conversation and a per-turn
latency breakdown. ``--fast`` runs on virtual time: exact, repeatable timings.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TextIO

from core.events import Event
from shell.clock import MonotonicClock, VirtualClock
from shell.config import SessionConfig
from shell.engines import EngineConfig
from shell.tools import Tools
from voice.app.latency import format_table, turn_latencies
from voice.app.runtime import Runtime


class EventLog(Protocol):
    """The replay's events.jsonl: called with each event as it happens, keeps them, closed at the end."""

    events: list[Event]

    def __call__(self, event: Event) -> None: ...

    def close(self) -> None: ...


async def run_replay(
    args: argparse.Namespace,
    audio,
    engine_cfg: EngineConfig,
    session_cfg: SessionConfig,
    tools: Tools | None = None,
    *,
    open_log: Callable[[Path, TextIO], EventLog],
) -> int:
    """Replay ``audio`` through one session, and say what was said and how fast.

    ``open_log(path, echo)``: the event log (the command line's writes events.jsonl and echoes the
    conversation on ``echo``), opened once the engines are loaded.
    """
    from transport.echo_path import EchoPath
    from transport.files import write_wav
    from transport.replay import replay

    # Kept in the store only when asked (--db, --session); always in out/.
    stored = args.db is not None or args.session is not None
    prompt = session_cfg.system_prompt
    async with Runtime(args, engine_cfg, store=stored, resume=stored, system_prompt=prompt, tools=tools) as rt:
        assert rt.engines is not None
        loads = ", ".join(f"{k} {v:.1f} s" for k, v in rt.engines.load_times.items())
        print(f"ready in {rt.cold_s:.1f} s ({loads})", file=sys.stderr, flush=True)
        args.out.mkdir(parents=True, exist_ok=True)
        log = open_log(args.out / "events.jsonl", sys.stdout)
        clock = VirtualClock() if args.fast else MonotonicClock()
        session = rt.session("replay", clock, session_cfg, [log], lockstep=args.fast)
        try:
            echo = None if args.echo_db is None else EchoPath(args.echo_db, args.echo_delay_ms)
            result = await replay(session, audio, settle=args.fast, echo=echo, record=args.record is not None)
        finally:
            await session.aclose()
            log.close()
        if result.recording is not None:
            await rt.keep_recording(result.recording, "replay")
        output_rate = rt.engines.output_rate
    write_wav(args.out / "reply.wav", result.reply, output_rate)
    transcript = session.history.to_json()
    (args.out / "transcript.json").write_text(json.dumps(transcript, indent=2, ensure_ascii=False) + "\n")
    turns = turn_latencies(log.events)
    print()
    print("transcript:")
    for turn in transcript:
        tool = turn.get("tool")
        said = f"{tool['name']}({tool['arguments']}) -> {tool['status']}: {turn['text']}" if tool else turn["text"]
        print(f"  {turn['role']:>9}: {said}")
    print()
    print(f"latency ({'virtual time' if args.fast else 'real time'}; cold start {rt.cold_s:.1f} s, not included):")
    print(format_table(turns))
    print(f"\nwrote {args.out}/reply.wav, events.jsonl, transcript.json")
    rt.saved("go on with --session {id}…; python -m voice.history show")
    return 1 if session.errors else 0
