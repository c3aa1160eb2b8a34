"""``python -m voice.run``: the voice assistant's entry point.

Replay a recording through the whole pipeline::

    python -m voice.run --replay question.wav --out out/ [--fast]

writes ``out/reply.wav`` (the assistant's audio on the input's timeline),
``out/events.jsonl`` (every pipeline event, flushed as it happens) and
``out/transcript.json``, and prints the conversation and a per-turn latency
breakdown. ``--fast`` runs on virtual time: exact, repeatable timings.
``--metrics-port`` serves Prometheus metrics while it runs; ``--log-json``
logs every event as a JSON line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import faulthandler
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import TextIO

from llm.base import GenerationConfig
from transport.files import AudioInputError, load_audio
from voice.app.conversations import Conversations, Opened, SessionError
from voice.app.latency import format_table, turn_latencies
from voice.app.logs import EventSink, event_logger, fan_out, use_json_logs
from voice.app.metrics import PipelineMetrics, serve
from voice.core.call import CallConfig, IdlePolicy
from voice.core.end_of_turn import EndOfTurnConfig
from voice.core.endpointing import EndpointConfig
from voice.core.events import (
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
from voice.core.turns import BargeInPolicy
from voice.shell import models
from voice.shell.clock import Clock, MonotonicClock, VirtualClock
from voice.shell.engines import EngineConfig, Engines, LoadInterrupted, start_engines
from voice.shell.models import MissingModelError
from voice.shell.pump import Pump
from voice.shell.session import Session, SessionConfig
from voice.tools import ToolDefinitionError, Tools, load_tools

EXIT_USAGE = 2


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
                print(f"[{event.t:7.2f}] -- tool {event.name}({event.arguments})", file=self._echo, flush=True)
            case ToolCallEnd():
                line = (
                    f"[{event.t:7.2f}] -- tool {event.name}: {event.status} ({event.duration_s:.2f} s): {event.result}"
                )
                print(line, file=self._echo, flush=True)
            case Error():
                print(f"[{event.t:7.2f}] error in {event.where}: {event.message}", file=self._echo)

    def close(self) -> None:
        self._file.close()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m voice.run", description="Real-time voice assistant.")
    p.add_argument("--replay", metavar="IN", type=Path, help="audio file to use as the microphone")
    p.add_argument("--out", metavar="DIR", type=Path, default=Path("out"), help="where replay writes (default: out)")
    p.add_argument("--fast", action="store_true", help="replay on virtual time (exact, repeatable timings)")
    p.add_argument("--system-prompt", help="system prompt for the LLM")
    p.add_argument("--asr-model", default="base", help="final-pass Whisper model: base, tiny.en or a folder")
    p.add_argument("--partial-model", default="tiny.en", help="Whisper model for partials, or 'none'")
    p.add_argument("--voice", default="joe", help="piper voice: joe or a path to an .onnx voice")
    p.add_argument(
        "--llm-model",
        default=None,
        help="embedded LLM: smollm2-135m (the default), qwen2.5-coder-0.5b (the default with --tools) or a folder",
    )
    p.add_argument(
        "--tools",
        action="append",
        metavar="FILE.py|builtin",
        help="tools the assistant may call: 'builtin' (time, timer, calculator, hanging up) or a Python file"
        " whose __all__ names its tool functions; repeat for more",
    )
    p.add_argument("--tool-parser", help="vLLM's tool parser for a model given as a folder (e.g. llama3_json)")
    p.add_argument(
        "--max-tool-rounds",
        type=int,
        default=SessionConfig.max_tool_rounds,
        help="times one reply may ask the model with tools before it must answer in words (default: %(default)s)",
    )
    p.add_argument(
        "--llm-url",
        action="append",
        help="OpenAI-compatible server (such as vLLM's) instead of the embedded engine; repeat for replicas",
    )
    p.add_argument(
        "--no-llm-affinity",
        dest="llm_affinity",
        action="store_false",
        help="with several --llm-url: send each reply to the least-loaded server, not to the one that caches "
        "the conversation",
    )
    p.add_argument("--llm-compile", action="store_true", help="torch.compile the embedded LLM (slow start)")
    p.add_argument(
        "--llm-dtype",
        choices=("auto", "float32", "bfloat16", "float16"),
        default="auto",
        help="the embedded LLM's weights (auto: float16 on CUDA, float32 on x86 CPUs without AVX-512, else bfloat16)",
    )
    p.add_argument("--max-tokens", type=int, default=GenerationConfig.max_tokens)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="for ASR")
    p.add_argument(
        "--asr-full-window", action="store_true", help="encode Whisper's whole 30 s window (slower; see README)"
    )
    p.add_argument("--no-early-final", action="store_true", help="start the final ASR pass only at the endpoint")
    p.add_argument(
        "--early-final-ms",
        type=int,
        default=round((SessionConfig.early_final_s or 0) * 1000),
        help="silence after which the early final ASR pass starts (and the speculative reply on it)",
    )
    p.add_argument(
        "--no-speculate",
        action="store_true",
        help="start the reply at the endpoint, not on the early final before it (unheard until the endpoint)",
    )
    p.add_argument("--output-rate", type=int, default=24000, help="reply audio sample rate")
    p.add_argument("--vad-threshold", type=float, default=EndpointConfig.threshold)
    p.add_argument(
        "--min-speech-ms",
        type=int,
        default=round(EndpointConfig.min_speech_s * 1000),
        help="speech needed to start a turn, or to judge speech over the reply (barge-in minimum)",
    )
    p.add_argument(
        "--hangover-ms",
        type=int,
        default=round(EndpointConfig.hangover_s * 1000),
        help="silence that ends the turn with --turn-detector silence",
    )
    p.add_argument("--preroll-ms", type=int, default=round(EndpointConfig.preroll_s * 1000))
    p.add_argument("--echo-db", type=float, help="replay: add the reply back into the microphone at this level")
    p.add_argument("--echo-delay-ms", type=float, default=30.0, help="replay: delay of that echo path")
    p.add_argument("--no-aec", action="store_true", help="do not cancel the assistant's echo from the microphone")
    p.add_argument(
        "--barge-in-commit-ms",
        type=int,
        default=round(BargeInPolicy.commit_s * 1000),
        help="speech over the reply this long is a barge-in without waiting for its words",
    )
    p.add_argument(
        "--pause-ms",
        type=int,
        default=round(EndpointConfig.onset_s * 1000),
        help="voiced sound over the reply this long pauses it at once (resumed if it is not speech)",
    )
    turns = p.add_argument_group("end of turn")
    turns.add_argument(
        "--turn-detector",
        choices=["smart-turn", "silence"],
        default="smart-turn",
        help="what ends the person's turn: Smart Turn after a short silence, or silence alone (--hangover-ms)",
    )
    turns.add_argument(
        "--turn-threshold",
        type=float,
        default=EndOfTurnConfig.threshold,
        help="Smart Turn's probability that the turn is finished at or above which it ends",
    )
    turns.add_argument(
        "--turn-first-check-ms",
        type=int,
        default=round(EndOfTurnConfig.first_check_s * 1000),
        help="silence before Smart Turn is first asked",
    )
    turns.add_argument(
        "--turn-recheck-ms",
        type=int,
        default=round((EndOfTurnConfig.recheck_s or 0) * 1000),
        help="further silence before it is asked again (0: once a pause)",
    )
    turns.add_argument(
        "--turn-max-wait-ms",
        type=int,
        default=round(EndOfTurnConfig.max_wait_s * 1000),
        help="silence that ends the turn whatever Smart Turn says",
    )
    turns.add_argument(
        "--turn-min-sentence-end",
        type=float,
        default=EndOfTurnConfig.min_sentence_end,
        help="the LLM's P(the sentence ends here) for the early final below which the words hold the turn open "
        "(0: the words are not read)",
    )
    turns.add_argument(
        "--turn-sure-threshold",
        type=float,
        default=EndOfTurnConfig.sure_threshold,
        help="Smart Turn's probability below which its 'finished' ends the turn only if the LLM also reads the "
        "words as a finished sentence (0: never asked)",
    )
    local = p.add_argument_group("microphone and speaker (the default mode)")
    local.add_argument("--list-devices", action="store_true", help="list the audio devices and exit")
    local.add_argument("--input-device", help="microphone: a number or a name from --list-devices")
    local.add_argument("--output-device", help="speaker: a number or a name from --list-devices")
    local.add_argument("--device-rate", type=int, help="sample rate to open the devices at (default: theirs)")
    stored = p.add_argument_group("conversations")
    stored.add_argument(
        "--db",
        help="where conversations are kept: an SQLite file, or postgresql://user@host:port/dbname to share them "
        "between workers (default: $VOICE_DB or ~/.local/share/voice/conversations.db)",
    )
    stored.add_argument("--session", help="resume this stored conversation (python -m voice.history list)")
    serve_opts = p.add_argument_group("server (--serve)")
    serve_opts.add_argument("--serve", action="store_true", help="serve WebSocket clients and the browser page")
    serve_opts.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    serve_opts.add_argument("--port", type=int, default=8765)
    serve_opts.add_argument("--token", default=os.environ.get("VOICE_TOKEN"), help="clients must send it (VOICE_TOKEN)")
    serve_opts.add_argument(
        "--allow-origin", action="append", default=[], help="a browser origin allowed besides the server's own"
    )
    serve_opts.add_argument("--max-sessions", type=int, default=8, help="sessions at once (/health says when full)")
    serve_opts.add_argument(
        "--drain-timeout",
        type=float,
        default=25.0,
        help="on SIGTERM take no new session and give the live ones this many seconds to end (default 25)",
    )
    serve_opts.add_argument(
        "--public-url", help="behind a front door (deploy/): the http(s)://host[:port] clients use to reach it"
    )
    serve_opts.add_argument("--idle-timeout", type=float, default=300.0, help="seconds without a message")
    serve_opts.add_argument(
        "--ice-server",
        action="append",
        default=[],
        help="WebRTC: a STUN/TURN URL for clients beyond the LAN, e.g. stun:stun.example.org:3478 (repeatable)",
    )
    calls = p.add_argument_group("phone calls (--serve, /telephony/twilio)")
    calls.add_argument(
        "--call-greeting",
        default=CallConfig.greeting,
        help="said as the call connects, before the caller speaks ('' for none)",
    )
    calls.add_argument(
        "--call-idle-s",
        type=float,
        default=IdlePolicy.after_s,
        help=f"quiet seconds before the caller is asked if they are there (0: never; default {IdlePolicy.after_s:g})",
    )
    calls.add_argument("--call-reprompt", default=IdlePolicy.prompt, help="what they are asked")
    calls.add_argument(
        "--call-reprompts", type=int, default=IdlePolicy.prompts, help="times asked before the goodbye (default 1)"
    )
    calls.add_argument("--call-goodbye", default=IdlePolicy.goodbye, help="said before hanging up on a quiet line")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics")
    p.add_argument("--log-json", action="store_true", help="log every event as a JSON line on stderr")
    p.add_argument("--verbose", action="store_true", help="the engines' own logs too")
    return p


class UsageError(Exception):
    """A problem the person can fix: said in one line, exit code 2."""


def _warn(message: str) -> None:
    print(f"voice.run: {message}", file=sys.stderr, flush=True)


def fail(message: str) -> int:
    _warn(message)
    return EXIT_USAGE


class Runtime:
    """What every mode starts with, and shuts down the same way: the store, the metrics, the engines.

    ``store``: open the conversation store (``--db``); ``resume``: open the
    conversation this run goes on with (a new one, or ``--session``'s) before
    the engines load, so that a wrong id is said before a minute of loading.
    """

    def __init__(
        self,
        args: argparse.Namespace,
        engine_cfg: EngineConfig,
        store: bool,
        resume: bool,
        system_prompt: str | None = None,
        tools: Tools | None = None,
    ) -> None:
        self.args = args
        self.system_prompt = system_prompt
        self.tools = tools
        self.engine_cfg = engine_cfg
        self._want_store = store
        self._want_conversation = resume
        self.store = None
        self.conversations: Conversations | None = None
        self.opened: Opened | None = None
        self.metrics: PipelineMetrics | None = None
        self.engines: Engines | None = None
        self.cold_s = 0.0

    async def __aenter__(self) -> Runtime:
        args = self.args
        if self._want_store:
            self.store = open_store(args)
        if self.store is not None:
            self.conversations = Conversations(self.store)
        if self._want_conversation and self.conversations is not None:
            try:
                self.opened = self.conversations.open(args.session, self.system_prompt, strict=True)
            except SessionError as e:
                await self.aclose()
                raise UsageError(f"{e} (python -m voice.history list shows the stored ones)") from e
            if self.opened.store_error is not None:
                _warn(f"{self.opened.store_error}; this conversation is kept in memory only")
        if args.metrics_port is not None:
            self.metrics = PipelineMetrics()
            serve(self.metrics, args.metrics_port)
            print(f"metrics at http://127.0.0.1:{args.metrics_port}/metrics", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        print("loading engines ...", file=sys.stderr, flush=True)
        try:  # Ctrl+C here stops the engine processes still starting (LoadInterrupted)
            self.engines = await start_engines(self.engine_cfg)
        except BaseException:
            await self.aclose()
            raise
        self.cold_s = time.monotonic() - t0
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self.engines is not None:
            await self.engines.aclose()
            self.engines = None
        if self.store is not None:
            self.store.close()
            self.store = None

    @property
    def session_id(self) -> str | None:
        return self.opened.session_id if self.opened is not None else None

    def session(
        self, mode: str, clock: Clock, config: SessionConfig, sinks: list[EventSink], lockstep: bool = False
    ) -> Session:
        """The run's one session, with the observers every mode has (metrics, --log-json) after ``sinks``;
        they know it by its stored id, else by the ``mode``."""
        assert self.engines is not None
        name = self.session_id or mode
        sinks = list(sinks)
        if self.metrics is not None:
            sinks.append(self.metrics.sink(name))
        if self.args.log_json:
            sinks.append(event_logger(name))
        history = self.opened.history if self.opened is not None else None
        return Session(self.engines, clock, config, fan_out(*sinks), history, lockstep=lockstep, tools=self.tools)

    def saved(self, hint: str) -> None:
        """Say where the conversation is kept; it is stored with its first turn, so not when nothing was said."""
        recorder = self.opened.recorder if self.opened is not None else None
        if recorder is None or self.session_id is None:
            return
        if recorder.stored:
            print(f"saved as {self.session_id} ({hint.format(id=self.session_id[:8])})", file=sys.stderr)
        elif not recorder.pending:
            print("nothing was said: no conversation saved", file=sys.stderr)


def stop_on_signals() -> asyncio.Event:
    """Set on Ctrl+C or SIGTERM: the mode winds down and the runtime closes."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def run_replay(
    args: argparse.Namespace, audio, engine_cfg: EngineConfig, session_cfg: SessionConfig, tools: Tools | None = None
) -> int:
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
        log = EventLog(args.out / "events.jsonl", echo=sys.stdout)
        clock = VirtualClock() if args.fast else MonotonicClock()
        session = rt.session("replay", clock, session_cfg, [log], lockstep=args.fast)
        try:
            echo = None if args.echo_db is None else EchoPath(args.echo_db, args.echo_delay_ms)
            result = await replay(session, audio, settle=args.fast, echo=echo)
        finally:
            await session.aclose()
            log.close()
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


def call_config(args: argparse.Namespace) -> CallConfig:
    """How phone calls are held, from the --call-* options."""
    idle = None
    if args.call_idle_s > 0:
        idle = IdlePolicy(args.call_idle_s, args.call_reprompt, args.call_goodbye, max(args.call_reprompts, 0))
    return CallConfig(greeting=args.call_greeting.strip() or None, idle=idle)


async def run_serve(
    args: argparse.Namespace, engine_cfg: EngineConfig, session_cfg: SessionConfig, tools: Tools | None = None
) -> int:
    from transport.protocol import Limits
    from transport.ws_server import ServerConfig, VoiceServer

    config = ServerConfig(
        host=args.host,
        port=args.port,
        token=args.token or None,
        allow_origins=tuple(args.allow_origin),
        max_sessions=args.max_sessions,
        public_url=args.public_url,
        limits=Limits(idle_timeout_s=args.idle_timeout),
        session=session_cfg,
        tools=tools,
        call=call_config(args),
        ice_servers=tuple(args.ice_server),
    )
    try:
        config.check()
    except ValueError as e:
        return fail(str(e))
    async with Runtime(args, engine_cfg, store=True, resume=False) as rt:
        assert rt.engines is not None
        hook = None
        if args.log_json:

            def hook(session_id: str, event: Event) -> None:
                event_logger(session_id)(event)

        metrics = rt.metrics or PipelineMetrics()
        server = VoiceServer(rt.engines, config, metrics, on_event=hook, conversations=rt.conversations)
        try:
            await server.start()
        except OSError as e:
            return fail(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}")
        print(f"ready in {rt.cold_s:.1f} s", file=sys.stderr)
        print(f"serving http://{args.host}:{server.port}/ (page), ws://{args.host}:{server.port}/ws, "
              f"ws://{args.host}:{server.port}/v1/realtime", file=sys.stderr, flush=True)  # fmt: skip
        drain, stop = drain_on_sigterm()
        waits = [asyncio.ensure_future(drain.wait()), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if drain.is_set() and not stop.is_set():
                live = len(server.connections)
                print(f"draining: no new session; {live} live, {args.drain_timeout:g} s to end",
                      file=sys.stderr, flush=True)  # fmt: skip
                draining = asyncio.ensure_future(server.drain(args.drain_timeout))
                waits.append(draining)
                await asyncio.wait([draining, waits[1]], return_when=asyncio.FIRST_COMPLETED)
                left = len(server.connections)  # (what drain() returns, or the sessions a Ctrl+C cuts)
                print(f"drained: {live - left} sessions ended, {left} cut", file=sys.stderr, flush=True)
        finally:
            for waiting in waits:
                waiting.cancel()
            print("shutting down ...", file=sys.stderr, flush=True)
            await server.close()
    return 0


def drain_on_sigterm() -> tuple[asyncio.Event, asyncio.Event]:
    """(drain, stop): SIGTERM (an orchestrator, a deploy) asks to drain; Ctrl+C, or a second
    SIGTERM, to stop now."""
    drain, stop = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_term() -> None:
        (stop if drain.is_set() else drain).set()

    loop.add_signal_handler(signal.SIGTERM, on_term)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    return drain, stop


def _device(value: str | None) -> int | str | None:
    return int(value) if value is not None and value.isdigit() else value


def open_store(args: argparse.Namespace):
    """The conversation store, or None (with a one-line warning) when it cannot be used."""
    from voice.app.store import ConversationStore, StoreError, UnsupportedDatabase, default_db_path

    path = args.db or default_db_path()
    try:
        store = ConversationStore.open(path)
    except UnsupportedDatabase as e:
        raise UsageError(str(e)) from e
    except StoreError as e:
        _warn(f"{e}; this conversation is kept in memory only")
        return None
    store.prune_soon()  # sessions with no turns, left by earlier versions (python -m voice.history prune)
    return store


async def run_local(
    args: argparse.Namespace, engine_cfg: EngineConfig, session_cfg: SessionConfig, tools: Tools | None = None
) -> int:
    from transport.local import SoundCardDevice
    from transport.sound import AudioDeviceError, DeviceChoice, SoundCard
    from voice.app.terminal import TerminalView

    devices = DeviceChoice(_device(args.input_device), _device(args.output_device), args.device_rate)
    try:  # the devices first: a missing microphone is said before a minute of loading
        card = SoundCard(devices, engine_cfg.output_rate)
    except AudioDeviceError as e:
        return fail(str(e))
    view = TerminalView()
    code = 0
    try:
        print(f"mic: {card.input_name} · speaker: {card.output_name} · {card.rate} Hz", file=sys.stderr)
        prompt = session_cfg.system_prompt
        async with Runtime(args, engine_cfg, store=True, resume=True, system_prompt=prompt, tools=tools) as rt:
            session = rt.session("local", MonotonicClock(), session_cfg, [view.event])
            if session.history.turns:
                view.message(f"(resuming: {len(session.history.turns)} turns so far)")
            device = SoundCardDevice(card, on_first_audio=lambda: view.message("listening — speak; Ctrl+C to end"))
            stop = stop_on_signals()

            async def meter() -> None:
                while not stop.is_set():
                    view.level(device.level_db)
                    view.render()
                    await asyncio.sleep(0.1)

            meter_task = asyncio.create_task(meter())
            try:
                await Pump(session, device).run(stop)
            except AudioDeviceError as e:
                view.close()
                print(f"voice.run: {e}", file=sys.stderr)
                code = 1
            finally:
                meter_task.cancel()
                card.close()
                await session.aclose()
    finally:
        card.close()
        view.close()
    rt.saved("python -m voice.history show {id}")
    return code


def end_of_turn_config(args: argparse.Namespace) -> EndOfTurnConfig | None:
    """The end-of-turn decisions the flags ask for (None: silence alone). Raises ValueError."""
    if args.turn_detector == "silence":
        return None
    return EndOfTurnConfig(
        first_check_s=args.turn_first_check_ms / 1000,
        recheck_s=args.turn_recheck_ms / 1000 if args.turn_recheck_ms > 0 else None,
        max_wait_s=args.turn_max_wait_ms / 1000,
        threshold=args.turn_threshold,
        min_sentence_end=args.turn_min_sentence_end or None,
        sure_threshold=args.turn_sure_threshold or None,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if hasattr(signal, "SIGUSR1"):  # `kill -USR1 <pid>`: where every thread is, on stderr (a run that hangs)
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    if not args.verbose:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        os.environ.setdefault("TQDM_DISABLE", "1")
    if args.log_json:
        use_json_logs()
        if not args.verbose:  # the pipeline's events and errors, not every library's chatter
            for name in ("vllm", "faster_whisper", "httpx"):
                logging.getLogger(name).setLevel(logging.WARNING)
    else:
        logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
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
    if args.early_final_ms <= 0:
        return fail("--early-final-ms must be positive (--no-early-final: none)")
    try:
        end_of_turn = end_of_turn_config(args)
    except ValueError as e:
        return fail(f"--turn-*: {e}")
    tools: Tools | None = None
    if args.tools:
        try:
            tools = load_tools(args.tools)
        except ToolDefinitionError as e:
            return fail(f"--tools: {e}")
    llm_model = args.llm_model or ("qwen2.5-coder-0.5b" if tools else "smollm2-135m")
    urls = args.llm_url or []
    if tools and not urls and not (args.tool_parser or models.TOOL_PARSERS.get(llm_model)):
        return fail(
            f"--tools: the model {llm_model} cannot call tools (qwen2.5-coder-0.5b can; --tool-parser for a folder)"
        )
    engine_cfg = EngineConfig(
        asr_model=args.asr_model,
        partial_model=None if args.partial_model == "none" else args.partial_model,
        smart_turn=end_of_turn is not None,
        voice=args.voice,
        llm_model=llm_model,
        tool_parser=args.tool_parser,
        llm_url=urls[0] if urls else None,
        llm_urls=tuple(urls[1:]),
        llm_affinity=args.llm_affinity,
        llm_compile=args.llm_compile,
        llm_dtype=None if args.llm_dtype == "auto" else args.llm_dtype,
        device=args.device,
        asr_window_pad_s=None if args.asr_full_window else EngineConfig.asr_window_pad_s,
        output_rate=args.output_rate,
        generation=GenerationConfig(max_tokens=args.max_tokens),
    )
    endpoint = EndpointConfig(
        threshold=args.vad_threshold,
        min_speech_s=args.min_speech_ms / 1000,
        hangover_s=args.hangover_ms / 1000,
        preroll_s=args.preroll_ms / 1000,
        onset_s=args.pause_ms / 1000,
    )
    session_cfg = SessionConfig(
        endpoint=endpoint,
        end_of_turn=end_of_turn,
        barge_in=BargeInPolicy(commit_s=args.barge_in_commit_ms / 1000),
        echo_cancel=not args.no_aec,
        early_final_s=None if args.no_early_final else args.early_final_ms / 1000,
        speculate=not args.no_speculate,
        max_tool_rounds=args.max_tool_rounds,
    )
    if args.system_prompt is not None:
        session_cfg = dataclasses.replace(session_cfg, system_prompt=args.system_prompt)
    try:
        engine_cfg.check_models()
    except MissingModelError as e:
        return fail(str(e))
    try:
        if args.serve:
            return asyncio.run(run_serve(args, engine_cfg, session_cfg, tools))
        if audio is None:
            return asyncio.run(run_local(args, engine_cfg, session_cfg, tools))
        return asyncio.run(run_replay(args, audio, engine_cfg, session_cfg, tools))
    except UsageError as e:
        return fail(str(e))
    except KeyboardInterrupt as e:
        if isinstance(e, LoadInterrupted):  # the engine processes are stopped
            print("voice.run: interrupted while loading the engines", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
