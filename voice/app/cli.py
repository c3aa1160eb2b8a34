"""``python -m voice.run``: the voice assistant's entry point.

Replay a recording through the whole pipeline::

    python -m voice.run --replay question.wav --out out/ [--fast]

writes ``out/reply.wav`` (the assistant's audio on the input's timeline),
``out/events.jsonl`` (every pipeline event, flushed as it happens) and
``out/transcript.json``, and prints the conversation and a per-turn latency
breakdown. ``--fast`` runs on virtual time: exact, repeatable timings.
``--metrics-port`` serves Prometheus metrics while it runs; ``--log-json``
logs every event as a JSON line on stderr.

Here: the checks every run makes before a minute of loading (each a line and
exit code 2), the choice of mode, and how a replay's conversation is printed
(:class:`EventLog`). The options are :mod:`voice.app.options`,
what every mode starts from :mod:`voice.app.runtime`, and the modes
:mod:`voice.app.modes` (replay, the desk, the server).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TextIO

from core.events import (
    AsrFinal,
    Backchannel,
    BargeIn,
    Error,
    Event,
    PlaybackResumed,
    ToolCallEnd,
    ToolCallStart,
    Truncate,
    TtsChunk,
)
from shell.engines import LoadInterrupted
from shell.reaper import start_reaper
from transport.files import AudioInputError, load_audio
from voice.app.modes.desk import run_local
from voice.app.modes.replay import run_replay
from voice.app.modes.server import run_serve
from voice.app.options import build_parser
from voice.app.runtime import (
    EXIT_USAGE,
    Runtime,
    UsageError,
    end_of_turn_config,
    fail,
    open_store,
    run_setup,
    set_up_logging,
)


class EventLog:
    """events.jsonl: one JSON object per line (:meth:`Event.to_json`), flushed as each event happens."""

    def __init__(self, path: Path, echo: TextIO | None = None) -> None:
        self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.events: list[Event] = []
        self._echo = echo

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        self._file.write(json.dumps(event.to_json(), ensure_ascii=False) + "\n")
        self._file.flush()
        if self._echo is None:
            return
        match event:
            case AsrFinal() if event.text:
                print(f"[{event.t:7.2f}] you:       {event.text}", file=self._echo, flush=True)
            case TtsChunk():
                print(f"[{event.t:7.2f}] assistant: {event.text}", file=self._echo, flush=True)
            case BargeIn() | PlaybackResumed():
                print(f"[{event.t:7.2f}] -- {event.type} {event.reason}", file=self._echo, flush=True)
            case Backchannel():
                print(f"[{event.t:7.2f}] -- {event.type} {event.text}", file=self._echo, flush=True)
            case Truncate():
                print(f"[{event.t:7.2f}] -- heard: {event.text!r}", file=self._echo, flush=True)
            case ToolCallStart():
                on = f" on {event.server}" if event.server else ""  # an MCP server's
                print(f"[{event.t:7.2f}] -- tool {event.name}({event.arguments}){on}", file=self._echo, flush=True)
            case ToolCallEnd():
                line = (
                    f"[{event.t:7.2f}] -- tool {event.name}: {event.status} ({event.duration_s:.2f} s): {event.result}"
                )
                print(line, file=self._echo, flush=True)
            case Error():
                print(f"[{event.t:7.2f}] error in {event.where}: {event.message}", file=self._echo)

    def close(self) -> None:
        self._file.close()


__all__ = [  # what callers import from here (tests, scripts): the entry point and what it is made of
    "EXIT_USAGE",
    "EventLog",
    "Runtime",
    "UsageError",
    "build_parser",
    "end_of_turn_config",
    "fail",
    "main",
    "open_store",
]


def main(argv: list[str] | None = None) -> int:
    # First: whatever this process starts (vLLM's engine processes, MCP servers) ends with it,
    # however it ends, kill -9 included (shell/reaper.py).
    start_reaper()
    args = build_parser().parse_args(argv)
    set_up_logging(args)
    if args.list_devices:
        from transport.sound import AudioDeviceError, list_devices

        try:
            print(list_devices())
        except AudioDeviceError as e:
            return fail(str(e))
        return 0
    audio = None
    if args.replay is not None:
        try:
            audio = load_audio(args.replay)
        except AudioInputError as e:
            return fail(str(e))
    try:
        setup = run_setup(args)
    except UsageError as e:
        return fail(str(e))
    engine_cfg, session_cfg, tools = setup.engine, setup.session, setup.tools
    try:
        if args.serve:
            return asyncio.run(run_serve(args, engine_cfg, session_cfg, tools, setup.agents))
        if audio is None:
            return asyncio.run(run_local(args, engine_cfg, session_cfg, tools))
        return asyncio.run(run_replay(args, audio, engine_cfg, session_cfg, tools, open_log=EventLog))
    except UsageError as e:
        return fail(str(e))
    except KeyboardInterrupt as e:
        if isinstance(e, LoadInterrupted):  # the engine processes are stopped
            print("voice.run: interrupted while loading the engines", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
