"""``python -m voice.run``'s options, each declared once: its flag, default, help, and where its value goes.

An option that sets a field of a configuration (:class:`Into`) takes its
default from that field, so the default is written in one place, the
configuration; a duration given in milliseconds (:func:`ms`) is kept in
seconds there, and its default shown in milliseconds. :func:`configure`
builds a configuration from the options that go into it. Options that the
modes read themselves (the server's address, the devices) carry no
:class:`Into`. The order of :data:`OPTIONS` is the order of ``--help``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from core.barge_in import BargeInPolicy
from core.call import CallConfig, IdlePolicy
from core.end_of_turn import EndOfTurnConfig
from core.endpointing import EndpointConfig
from core.language import LanguageConfig
from core.near_speech import NearSpeechConfig
from core.reply_length import ReplyLength
from core.room import RoomConfig
from core.voices import parse_voices
from llm.base import GenerationConfig
from shell.config import SessionConfig
from shell.engines import EngineConfig

PROG = "python -m voice.run"

# The groups of --help (None: the options of the run itself, listed first).
TURNS = "end of turn"
LOCAL = "microphone and speaker (the default mode)"
STORED = "conversations"
SERVE = "server (--serve)"
CALLS = "phone calls (--serve, /telephony/twilio)"
GROUPS = (TURNS, LOCAL, STORED, SERVE, CALLS)


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Into:
    """Where an option's value goes: ``config``'s field ``name``, as ``convert`` makes it."""

    config: type
    name: str
    convert: Callable[[Any], Any] = _same


@dataclass(frozen=True)
class Option:
    """One command-line option: ``add_argument``'s arguments, its group in ``--help``, and where it goes.

    ``env``: the default is this environment variable's value when the parser is built.
    """

    flag: str
    group: str | None = None
    into: Into | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)  # add_argument's: help, type, default, action, ...
    env: str | None = None

    def add_to(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
        kwargs = self.kwargs if self.env is None else {**self.kwargs, "default": os.environ.get(self.env)}
        parser.add_argument(self.flag, **kwargs)

    @property
    def dest(self) -> str:
        return self.kwargs.get("dest") or self.flag.removeprefix("--").replace("-", "_")


def opt(flag: str, group: str | None = None, *, env: str | None = None, **kwargs: Any) -> Option:
    """An option the modes read themselves."""
    return Option(flag, group, None, kwargs, env)


def value(
    flag: str, config: type, name: str, group: str | None = None, convert: Callable[[Any], Any] = _same, **kwargs: Any
) -> Option:
    """An option for ``config``'s field ``name``, whose default is that field's (``convert``: from the flag's value)."""
    return Option(flag, group, Into(config, name, convert), {**kwargs, "default": getattr(config, name)})


def switch(flag: str, config: type, name: str, convert: Callable[[bool], Any], **kwargs: Any) -> Option:
    """A flag (``store_true`` unless ``kwargs`` say otherwise) that sets ``config``'s field ``name``."""
    return Option(flag, None, Into(config, name, convert), {"action": "store_true", **kwargs})


def ms(
    flag: str, config: type, name: str, group: str | None = None, *, off_at_zero: bool = False, **kwargs: Any
) -> Option:
    """A duration in milliseconds on the command line, for ``config``'s field ``name`` in seconds.

    Its default is that field's, in milliseconds (0 for a field whose
    default is None); ``off_at_zero``: 0 or less sets the field to None.
    """

    def seconds(v: int) -> float | None:
        return None if off_at_zero and v <= 0 else v / 1000

    default = round((getattr(config, name) or 0) * 1000)
    return Option(flag, group, Into(config, name, seconds), {"type": int, "default": default, **kwargs})


def _unless(off: str) -> Callable[[Any], Any]:
    """The value as given, or None when it is ``off``."""
    return lambda v: None if v == off else v


def _or_none(v: float) -> float | None:
    return v or None  # 0: not used


def _not(v: bool) -> bool:
    return not v


OPTIONS: tuple[Option, ...] = (
    opt("--replay", metavar="IN", type=Path, help="audio file to use as the microphone"),
    opt("--out", metavar="DIR", type=Path, default=Path("out"), help="where replay writes (default: out)"),
    opt("--fast", action="store_true", help="replay on virtual time (exact, repeatable timings)"),
    opt(
        "--record",
        metavar="DIR",
        type=Path,
        help="write each conversation as a stereo WAV in DIR (the person left, the assistant as heard right);"
        " a stored conversation keeps its name (python -m voice.history export --audio)",
    ),
    opt("--system-prompt", help="system prompt for the LLM"),
    value("--asr-model", EngineConfig, "asr_model", help="final-pass Whisper model: base, tiny.en or a folder"),
    value(
        "--partial-model",
        EngineConfig,
        "partial_model",
        convert=_unless("none"),
        help="Whisper model for partials, or 'none'",
    ),
    Option(
        "--voice",
        None,
        Into(EngineConfig, "voices", lambda given: parse_voices(given or [])),
        {
            "action": "append",
            "metavar": "[CODE=]VOICE",
            "help": "the voice: joe, a Kokoro voice (jf_alpha, jm_kumo...) or a piper .onnx file; CODE=VOICE"
            " for one language (es=es_ES-davefx-medium.onnx); repeatable",
        },
    ),
    opt(
        "--llm-model",
        default=None,
        help="embedded LLM: qwen2.5-coder-0.5b (the default: it can call tools), smollm2-135m (fastest) or a folder",
    ),
    opt(
        "--agent",
        action="append",
        metavar="[NAME=]FILE",
        help="the agent: a YAML file of steps, or a Python file that defines agent = Agent(...)"
        " (docs/guide/agents.md); without it, one prompt and the tools given. With --serve, repeat it"
        " as NAME=FILE: each session chooses one by name, the first is the default",
    ),
    opt(
        "--tools",
        action="append",
        metavar="FILE.py|builtin",
        help="tools the assistant may call: 'builtin' (time, timer, calculator, hanging up) or a Python file"
        " whose __all__ names its tool functions; repeat for more",
    ),
    opt(
        "--mcp",
        action="append",
        metavar="COMMAND|URL|FILE.json",
        help="an MCP server whose tools the assistant may call: a command run over stdio ('python server.py'),"
        " a streamable HTTP URL, or an mcpServers JSON file; options before it: name= timeout= on_barge_in=cancel|keep"
        " header='Name: value' (docs/guide/mcp.md); repeat for more",
    ),
    value(
        "--tool-parser",
        EngineConfig,
        "tool_parser",
        help="vLLM's tool parser for a model given as a folder (e.g. llama3_json)",
    ),
    value(
        "--max-tool-rounds",
        SessionConfig,
        "max_tool_rounds",
        type=int,
        help="times one reply may ask the model with tools before it must answer in words (default: %(default)s)",
    ),
    opt(
        "--llm-url",
        action="append",
        help="OpenAI-compatible server (such as vLLM's) instead of the embedded engine; repeat for replicas",
    ),
    switch(
        "--no-llm-affinity",
        EngineConfig,
        "llm_affinity",
        _same,
        dest="llm_affinity",
        action="store_false",
        help="with several --llm-url: send each reply to the least-loaded server, not to the one that caches "
        "the conversation",
    ),
    switch("--llm-compile", EngineConfig, "llm_compile", _same, help="torch.compile the embedded LLM (slow start)"),
    Option(
        "--llm-dtype",
        into=Into(EngineConfig, "llm_dtype", _unless("auto")),
        kwargs={
            "choices": ("auto", "float32", "bfloat16", "float16"),
            "default": "auto",
            "help": "the embedded LLM's weights (auto: float16 on CUDA, float32 on x86 CPUs without AVX-512, "
            "else bfloat16)",
        },
    ),
    value("--max-tokens", GenerationConfig, "max_tokens", type=int),
    value("--device", EngineConfig, "device", choices=["auto", "cpu", "cuda"], help="for ASR"),
    switch(
        "--asr-full-window",
        EngineConfig,
        "asr_window_pad_s",
        lambda full: None if full else EngineConfig.asr_window_pad_s,
        help="encode Whisper's whole 30 s window (slower; see README)",
    ),
    opt("--no-early-final", action="store_true", help="start the final ASR pass only at the endpoint"),
    ms(  # checked > 0 (main); --no-early-final sets the field to None
        "--early-final-ms",
        SessionConfig,
        "early_final_s",
        help="silence after which the early final ASR pass starts (and the speculative reply on it)",
    ),
    switch(
        "--no-speculate",
        SessionConfig,
        "speculate",
        _not,
        help="start the reply at the endpoint, not on the early final before it (unheard until the endpoint)",
    ),
    value("--output-rate", EngineConfig, "output_rate", type=int, help="reply audio sample rate"),
    value(
        "--language",
        LanguageConfig,
        "language",
        help="the language spoken: a code (en, es, fr, de, ja, zh...) holds every utterance to it; auto detects"
        " each one's among those it can answer and speak, and the reply follows the last (Whisper base);"
        " auto:en,es,fr among those",
    ),
    value("--vad-threshold", EndpointConfig, "threshold", type=float),
    ms(
        "--min-speech-ms",
        EndpointConfig,
        "min_speech_s",
        help="speech needed to start a turn, or to judge speech over the reply (barge-in minimum)",
    ),
    ms("--hangover-ms", EndpointConfig, "hangover_s", help="silence that ends the turn with --turn-detector silence"),
    ms("--preroll-ms", EndpointConfig, "preroll_s"),
    opt("--echo-db", type=float, help="replay: add the reply back into the microphone at this level"),
    opt("--echo-delay-ms", type=float, default=30.0, help="replay: delay of that echo path"),
    switch(
        "--no-aec", SessionConfig, "echo_cancel", _not, help="do not cancel the assistant's echo from the microphone"
    ),
    switch(
        "--no-end-on-goodbye",
        SessionConfig,
        "end_on_goodbye",
        _not,
        help="a goodbye does not end the conversation (by default it does after its reply, on a phone call or "
        "with the end_conversation tool)",
    ),
    value(
        "--denoise",
        SessionConfig,
        "denoise",
        choices=["rnnoise", "off"],
        help="noise suppression of what the VAD hears, after the echo canceller (RNNoise)",
    ),
    value(
        "--far-speech-db",
        NearSpeechConfig,
        "below_person_db",
        convert=_or_none,
        type=float,
        help="speech this far under the person's own level is the room's (a TV, someone across it): not a turn,"
        " not a barge-in (0: all speech counts)",
    ),
    value(
        "--max-sentences",
        ReplyLength,
        "max_sentences",
        convert=_or_none,
        type=int,
        help="a reply says at most this many sentences unless the person asks for detail (0: all of it)",
    ),
    value(
        "--room-db",
        RoomConfig,
        "above_room_db",
        convert=_or_none,
        type=float,
        help="in a room that talks on (babble, music), speech must stand this far over its floor to be the person's"
        " (0: the room is not looked for)",
    ),
    switch(
        "--denoise-asr",
        SessionConfig,
        "denoise_asr",
        bool,
        help="with --denoise: Whisper and Smart Turn hear the cleaned audio too",
    ),
    ms(
        "--barge-in-commit-ms",
        BargeInPolicy,
        "commit_s",
        help="speech over the reply this long is a barge-in without waiting for its words",
    ),
    ms(
        "--pause-ms",
        EndpointConfig,
        "onset_s",
        help="voiced sound over the reply this long pauses it at once (resumed if it is not speech)",
    ),
    opt(  # silence: no EndOfTurnConfig at all (runtime.end_of_turn_config)
        "--turn-detector",
        TURNS,
        choices=["smart-turn", "silence"],
        default="smart-turn",
        help="what ends the person's turn: Smart Turn after a short silence, or silence alone (--hangover-ms)",
    ),
    value(
        "--turn-threshold",
        EndOfTurnConfig,
        "threshold",
        TURNS,
        type=float,
        help="Smart Turn's probability that the turn is finished at or above which it ends",
    ),
    ms(
        "--turn-first-check-ms",
        EndOfTurnConfig,
        "first_check_s",
        TURNS,
        help="silence before Smart Turn is first asked",
    ),
    ms(
        "--turn-recheck-ms",
        EndOfTurnConfig,
        "recheck_s",
        TURNS,
        off_at_zero=True,
        help="further silence before it is asked again (0: once a pause)",
    ),
    ms(
        "--turn-max-wait-ms",
        EndOfTurnConfig,
        "max_wait_s",
        TURNS,
        help="silence that ends the turn whatever Smart Turn says",
    ),
    ms(
        "--turn-finished-recheck-ms",
        EndOfTurnConfig,
        "finished_recheck_s",
        TURNS,
        off_at_zero=True,
        help="once the LLM has read the pause's words as finished enough (P(the sentence ends) at least 0.1, "
        "or one word), ask Smart Turn again after this much more silence, until the turn ends (0: never)",
    ),
    ms(
        "--turn-closing-wait-ms",
        EndOfTurnConfig,
        "closing_wait_s",
        TURNS,
        off_at_zero=True,
        help="silence after closing words alone ('Thank you,') before the turn ends: a goodbye may follow (0: none)",
    ),
    value(
        "--turn-min-sentence-end",
        EndOfTurnConfig,
        "min_sentence_end",
        TURNS,
        convert=_or_none,
        type=float,
        help="the LLM's P(the sentence ends here) for the early final below which the words hold the turn open "
        "(0: the words are not read)",
    ),
    value(
        "--turn-sure-threshold",
        EndOfTurnConfig,
        "sure_threshold",
        TURNS,
        convert=_or_none,
        type=float,
        help="Smart Turn's probability below which its 'finished' ends the turn only if the LLM also reads the "
        "words as a finished sentence (0: never asked)",
    ),
    opt("--list-devices", LOCAL, action="store_true", help="list the audio devices and exit"),
    opt("--input-device", LOCAL, help="microphone: a number or a name from --list-devices"),
    opt("--output-device", LOCAL, help="speaker: a number or a name from --list-devices"),
    opt("--device-rate", LOCAL, type=int, help="sample rate to open the devices at (default: theirs)"),
    opt(
        "--db",
        STORED,
        help="where conversations are kept: an SQLite file, or postgresql://user@host:port/dbname to share them "
        "between workers (default: $VOICE_DB or ~/.local/share/voice/conversations.db)",
    ),
    opt("--session", STORED, help="resume this stored conversation (python -m voice.history list)"),
    opt("--serve", SERVE, action="store_true", help="serve WebSocket clients and the browser page"),
    opt("--host", SERVE, default="127.0.0.1", help="address to bind (default: loopback only)"),
    opt("--port", SERVE, type=int, default=8765),
    opt("--token", SERVE, env="VOICE_TOKEN", help="clients must send it (VOICE_TOKEN)"),
    opt("--allow-origin", SERVE, action="append", default=[], help="a browser origin allowed besides the server's own"),
    opt("--max-sessions", SERVE, type=int, default=8, help="sessions at once (/health says when full)"),
    opt(
        "--drain-timeout",
        SERVE,
        type=float,
        default=25.0,
        help="on SIGTERM take no new session and give the live ones this many seconds to end (default 25)",
    ),
    opt("--public-url", SERVE, help="behind a front door (deploy/): the http(s)://host[:port] clients use to reach it"),
    opt("--idle-timeout", SERVE, type=float, default=300.0, help="seconds without a message"),
    opt(
        "--ice-server",
        SERVE,
        action="append",
        default=[],
        help="WebRTC: a STUN/TURN URL for clients beyond the LAN, e.g. stun:stun.example.org:3478 (repeatable)",
    ),
    # the phone calls' options make a CallConfig in runtime.call_config (0 s: no idle policy at all)
    opt(
        "--call-greeting",
        CALLS,
        default=CallConfig.greeting,
        help="said as the call connects, before the caller speaks ('' for none)",
    ),
    opt(
        "--call-idle-s",
        CALLS,
        type=float,
        default=IdlePolicy.after_s,
        help=f"quiet seconds before the caller is asked if they are there (0: never; default {IdlePolicy.after_s:g})",
    ),
    opt("--call-reprompt", CALLS, default=IdlePolicy.prompt, help="what they are asked"),
    opt(
        "--call-reprompts",
        CALLS,
        type=int,
        default=IdlePolicy.prompts,
        help="times asked before the goodbye (default 1)",
    ),
    opt("--call-goodbye", CALLS, default=IdlePolicy.goodbye, help="said before hanging up on a quiet line"),
    opt("--metrics-port", type=int, help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics"),
    opt("--log-json", action="store_true", help="log every event as a JSON line on stderr"),
    opt("--verbose", action="store_true", help="the engines' own logs too"),
)


def build_parser() -> argparse.ArgumentParser:
    """The parser of :data:`OPTIONS`, in their order, in their groups."""
    parser = argparse.ArgumentParser(prog=PROG, description="Real-time voice assistant.")
    groups: dict[str | None, argparse.ArgumentParser | argparse._ArgumentGroup] = {None: parser}
    for name in GROUPS:
        groups[name] = parser.add_argument_group(name)
    for option in OPTIONS:
        option.add_to(groups[option.group])
    return parser


Config = TypeVar("Config")


def configure(args: argparse.Namespace, config: type[Config], **given: Any) -> Config:
    """``config`` made of the options that go into it; ``given``: its other fields (they win)."""
    fields = {o.into.name: o.into.convert(getattr(args, o.dest)) for o in OPTIONS if o.into and o.into.config is config}
    return config(**{**fields, **given})
