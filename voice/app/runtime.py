"""What every mode of ``python -m voice.run`` starts from: the configurations its options make, the logging,
and the :class:`Runtime` (the store, the metrics, the engines, the session), shut down the same way by each mode."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import faulthandler
import logging
import os
import signal
import sys
import time

from asr.whisper import known_language
from core.barge_in import BargeInPolicy
from core.call import CallConfig, IdlePolicy
from core.end_of_turn import EndOfTurnConfig
from core.endpointing import EndpointConfig
from core.language import LanguageConfig, is_auto
from core.near_speech import NearSpeechConfig
from core.reply_length import ReplyLength
from core.room import RoomConfig
from core.voices import VoiceSpecError, parse_voices
from llm.base import GenerationConfig
from shell import models
from shell.clock import Clock
from shell.config import SessionConfig
from shell.engines import EngineConfig, Engines, start_engines
from shell.mcp import McpServers, McpServerSpec, McpSpecError, McpStartError, parse_mcp
from shell.models import MissingModelError
from shell.recording import Recording
from shell.session import Session
from shell.tools import ToolDefinitionError, Tools, load_tools
from transport.server_types import ServedAgent
from voice.agent import AgentFile, AgentFileError, load_agent
from voice.app.agents import AgentOptionError, agent_options
from voice.app.conversations import Conversations, Opened, SessionError
from voice.app.logs import EventSink, event_logger, fan_out, use_json_logs
from voice.app.metrics import PipelineMetrics, serve
from voice.app.options import configure

EXIT_USAGE = 2


class UsageError(Exception):
    """A problem the person can fix: said in one line, exit code 2."""


def _warn(message: str) -> None:
    print(f"voice.run: {message}", file=sys.stderr, flush=True)


def fail(message: str) -> int:
    _warn(message)
    return EXIT_USAGE


def set_up_logging(args: argparse.Namespace) -> None:
    """The run's logs: --log-json's JSON lines or plain warnings (--verbose: the engines' chatter too)."""
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


def end_of_turn_config(args: argparse.Namespace) -> EndOfTurnConfig | None:
    """The end-of-turn decisions the flags ask for (None: silence alone). Raises ValueError."""
    if args.turn_detector == "silence":
        return None
    return configure(args, EndOfTurnConfig)


def engine_config(args: argparse.Namespace, llm_model: str, smart_turn: bool) -> EngineConfig:
    """The engines the options ask for, with ``llm_model`` (chosen with the tools) and Smart Turn or not."""
    urls = args.llm_url or []
    return configure(
        args,
        EngineConfig,
        smart_turn=smart_turn,
        llm_model=llm_model,
        llm_url=urls[0] if urls else None,
        llm_urls=tuple(urls[1:]),
        generation=configure(args, GenerationConfig),
        # The voice of a language the run is held to is loaded at start; others on their first reply.
        languages=("en",) if args.language == "en" or is_auto(args.language) else (args.language,),
    )


def session_config(args: argparse.Namespace, end_of_turn: EndOfTurnConfig | None) -> SessionConfig:
    """How each conversation is held: turn-taking, barge-in, the early final, tools and the prompt."""
    given = {"early_final_s": None} if args.no_early_final else {}
    config = configure(
        args,
        SessionConfig,
        endpoint=configure(args, EndpointConfig),
        language=configure(args, LanguageConfig),
        end_of_turn=end_of_turn,
        barge_in=configure(args, BargeInPolicy),
        near_speech=configure(args, NearSpeechConfig),
        room=configure(args, RoomConfig),
        reply_length=configure(args, ReplyLength),
        **given,
    )
    if args.system_prompt is not None:
        config = dataclasses.replace(config, system_prompt=args.system_prompt)
    return config


@dataclasses.dataclass(frozen=True)
class RunSetup:
    """What a run's options ask for: the engines, how each conversation is held, the tools."""

    engine: EngineConfig
    session: SessionConfig
    tools: Tools | None
    # Every --agent by name, the first (the default: ``session.flow`` with ``tools``) too.
    agents: dict[str, ServedAgent] = dataclasses.field(default_factory=dict)


def run_setup(args: argparse.Namespace) -> RunSetup:
    """The configurations ``args`` make, checked before anything slow is loaded (the tools file is
    imported, the model files looked for). Raises UsageError, saying which option is wrong."""
    if args.early_final_ms <= 0:
        raise UsageError("--early-final-ms must be positive (--no-early-final: none)")
    if not known_language(args.language):
        known = "a code such as en, es, ja; or auto"
        raise UsageError(f"--language {args.language}: not a language Whisper knows ({known})")
    try:
        parse_voices(args.voice or [])
    except VoiceSpecError as e:
        raise UsageError(f"--voice {e}") from None
    try:
        end_of_turn = end_of_turn_config(args)
    except ValueError as e:
        raise UsageError(f"--turn-*: {e}") from None
    tools: Tools | None = None
    if args.tools:
        try:
            tools = load_tools(args.tools)
        except ToolDefinitionError as e:
            raise UsageError(f"--tools: {e}") from None
    try:
        options = agent_options(args.agent or [])
    except AgentOptionError as e:
        raise UsageError(f"--agent: {e}") from None
    if len(options) > 1 and not getattr(args, "serve", False):
        raise UsageError("--agent: several agents are for a server (--serve), where each session chooses one by name")
    mcp = bool(mcp_specs(args))
    agents = [(o.name, agent_of(o.path, tools, mcp)) for o in options]
    given = list(tools or ())  # --tools: offered beside every agent's own
    flow = None
    if agents:
        flow = agents[0][1].flow
        tools = tools if tools is not None else Tools()
        for t in agents[0][1].tools:
            tools.add(t)  # names taken twice were refused by agent_of
    if mcp and tools is None:
        tools = Tools()  # filled by the MCP servers once they are started (Runtime)
    served = {name: ServedAgent(a.flow, tools) for name, a in agents[:1]}
    for name, a in agents[1:]:  # the MCP servers' tools, which fill the default's, are offered to each
        assert tools is not None
        served[name] = ServedAgent(a.flow, Tools.following(tools, [*given, *a.tools]))
    llm_model = args.llm_model or models.DEFAULT_LLM
    calls = tools is not None or (flow is not None and len(flow.steps) > 1)
    if calls and not args.llm_url and not (args.tool_parser or models.TOOL_PARSERS.get(llm_model)):
        raise UsageError(
            f"--tools, --agent: the model {llm_model} cannot call tools or move between steps"
            " (qwen2.5-coder-0.5b can; --tool-parser for a folder)"
        )
    engine_cfg = engine_config(args, llm_model, smart_turn=end_of_turn is not None)
    try:
        engine_cfg.check_models()
    except MissingModelError as e:
        raise UsageError(str(e)) from None
    return RunSetup(engine_cfg, dataclasses.replace(session_config(args, end_of_turn), flow=flow), tools, served)


def agent_of(path: str, tools: Tools | None, mcp: bool) -> AgentFile:
    """The agent file ``--agent`` names, read and checked with the tools the other options give
    (with ``mcp``, its steps may name tools the servers will list: those are not checked);
    raises UsageError with its one line."""
    try:
        agent = load_agent(path, other_tools=None if mcp else [t.name for t in tools or ()])
    except AgentFileError as e:
        raise UsageError(f"--agent {e}") from None
    taken = sorted({t.name for t in agent.tools} & {t.name for t in tools or ()})
    if taken:
        raise UsageError(f"--agent {path}: its tools {', '.join(taken)} are given by --tools too")
    return agent


def mcp_specs(args: argparse.Namespace) -> list[McpServerSpec]:
    """The MCP servers ``--mcp`` names; raises UsageError saying what is wrong with one."""
    specs = []
    for text in getattr(args, "mcp", None) or []:
        try:
            specs += parse_mcp(text)
        except McpSpecError as e:
            raise UsageError(f"--mcp {e}") from None
    return specs


def call_config(args: argparse.Namespace) -> CallConfig:
    """How phone calls are held, from the --call-* options."""
    idle = None
    if args.call_idle_s > 0:
        idle = IdlePolicy(args.call_idle_s, args.call_reprompt, args.call_goodbye, max(args.call_reprompts, 0))
    return CallConfig(greeting=args.call_greeting.strip() or None, idle=idle)


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
        self.mcp: McpServers | None = None

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
        specs = mcp_specs(args)
        if specs:  # before the engines: a server that cannot start is said in a second, not a minute
            assert self.tools is not None, "run_setup gives --mcp a Tools"
            self.mcp = McpServers(specs, self.tools)
            try:
                await self.mcp.start()
            except McpStartError as e:
                self.mcp = None
                await self.aclose()
                raise UsageError(str(e)) from None
            for line in self.mcp.summary():
                print(line, file=sys.stderr, flush=True)
        t0 = time.monotonic()
        print("loading engines ...", file=sys.stderr, flush=True)
        try:  # Ctrl+C here stops the engine processes still starting (LoadInterrupted)
            self.engines = await start_engines(self.engine_cfg)
        except BaseException:
            await self.aclose()
            raise
        self.cold_s = time.monotonic() - t0
        for note in self.engines.voices.notes(list(self.engine_cfg.languages)):
            _warn(note)  # said once: the language's voice is not native, and how to add one
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self.mcp is not None:
            await self.mcp.close()
            self.mcp = None
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

    async def keep_recording(self, recording: Recording, mode: str) -> None:
        """Write ``recording`` into ``--record``'s folder, named by the stored conversation (else ``mode``),
        and keep its name with the conversation (before the store closes); say where."""
        path = await asyncio.to_thread(recording.save, self.args.record, self.session_id or mode)
        recorder = self.opened.recorder if self.opened is not None else None
        if recorder is not None:
            await asyncio.to_thread(recorder.flush)
            await asyncio.to_thread(recorder.keep_recording, str(path.resolve()))
        print(f"recorded {path} (the person left, the assistant right)", file=sys.stderr)

    def saved(self, hint: str) -> None:
        """Say where the conversation is kept; it is stored with its first turn, so not when nothing was said."""
        recorder = self.opened.recorder if self.opened is not None else None
        if recorder is None or self.session_id is None:
            return
        if recorder.stored:
            print(f"saved as {self.session_id} ({hint.format(id=self.session_id[:8])})", file=sys.stderr)
        elif not recorder.pending:
            print("nothing was said: no conversation saved", file=sys.stderr)


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
