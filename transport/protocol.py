"""Our WebSocket protocol (``/ws``), without I/O: frames in, actions out.

:class:`VoiceProtocol` turns what a client sends into :data:`Action` values
for the connection to carry out, and the pipeline's events and reply audio
into what the client is sent. It never reads a socket or a clock; the
connection (``transport/ws_server.py``) does, and the OpenAI Realtime dialect
(``transport/realtime/``) produces the same actions from its own events.
The wire format is documented in ``docs/protocol.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
import numpy as np

from asr.whisper import known_language
from core.events import (
    AsrFinal,
    AsrPartial,
    Backchannel,
    BargeIn,
    Collected,
    Error,
    Event,
    PlaybackPaused,
    PlaybackResumed,
    PlaybackStopped,
    ResponseStart,
    SpeculativeCommit,
    SpeculativeDiscard,
    SpeculativeStart,
    SpeechEnd,
    SpeechStart,
    StepEntered,
    ToolCallEnd,
    ToolCallStart,
    Transfer,
    Truncate,
    TtsChunk,
    TurnEnd,
)
from transport.wire import Invalid, quote, read_message

PROTOCOL_VERSION = 1
SAMPLE_RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)
# Messages a client may ask for in ``hello.extra_events``, besides the events it is always sent:
# the shape of the generic PCM-over-WebSocket protocol outside harnesses read (voicebench's).
EXTRA_EVENTS = ("transcript", "clear")


@dataclass(frozen=True)
class Limits:
    max_frame_bytes: int = 65536  # one binary audio frame (~2 s at 16 kHz)
    max_message_bytes: int = 1 << 20  # any message; larger ones close the connection (1009)
    max_ahead_s: float = 2.0  # input buffered ahead of real time; beyond it is dropped
    idle_timeout_s: float = 300.0
    slow_client_s: float = 10.0  # a client this far behind in reading is closed
    # What may wait to be written to a client (its outbox, in bytes); past it the client is closed
    # (1008) at once. A client that reads needs little: reply audio is paced to its playback
    # (at most max_lead_s ahead: 64 kB of base64 PCM16 at 24 kHz), and even without played
    # reports, over a stall of slow_client_s, that is 0.64 MB; add a message echoing one of the
    # client's own (max_message_bytes) and a resumed conversation's history (Realtime sends it
    # as one event per turn, ~0.2 MB an hour of talk): 4 MiB is twice that. A client that does
    # not read can make the server hold this (and the socket's buffers), not more.
    max_outbox_bytes: int = 4 << 20
    lead_s: float = 0.12  # default reply audio sent ahead of the played position
    min_lead_s: float = 0.04
    max_lead_s: float = 1.0


# -- actions: what the connection is asked to do -----------------------------


@dataclass(frozen=True)
class Configure:
    """Start the session (or, for a second call, change what may be changed)."""

    input_rate: int
    acks: bool
    lead_s: float
    echo_cancel: bool = True
    instructions: str | None = None  # a system prompt (Realtime's session.update)
    resume: str | None = None  # a stored conversation to go on with
    # Tools the client runs itself, as the chat API takes them (None: unchanged; (): none).
    tools: tuple[dict[str, Any], ...] | None = None
    # A phone call: the server's CallConfig applies (greeting, idle prompts), and ``meta``
    # (the caller, the call's ids) is kept with the stored conversation.
    call: bool = False
    meta: dict[str, Any] | None = None
    language: str | None = None  # the language spoken: a code, or "auto" (None: the server's --language)
    denoise: Literal["rnnoise", "off"] | None = None  # noise suppression (None: the server's --denoise)
    agent: str | None = None  # the agent by its --agent NAME (None: the server's first)


@dataclass(frozen=True)
class ToolOutput:
    """The client's result of its tool's call ``call_id`` (Realtime's function_call_output)."""

    call_id: str
    output: str


@dataclass(frozen=True)
class UserText:
    """A turn the client typed (Realtime's user message, then response.create)."""

    text: str


@dataclass(frozen=True)
class KeyPressed:
    """A key of the caller's phone keypad (Twilio's dtmf): gathered into one turn by the session."""

    key: str


@dataclass(frozen=True)
class AudioIn:
    samples: np.ndarray  # float32 mono at the configured input rate


@dataclass(frozen=True)
class PlayedReport:
    played: int
    dropped: int


@dataclass(frozen=True)
class CancelReply:
    pass


@dataclass(frozen=True)
class TruncateReply:
    response: int
    audio_end_ms: int


@dataclass(frozen=True)
class Send:
    message: str | bytes


@dataclass(frozen=True)
class Close:
    code: int
    reason: str


Action = (
    Configure | AudioIn | PlayedReport | CancelReply | TruncateReply | ToolOutput | UserText | KeyPressed | Send | Close
)


def error(code: str, message: str, fatal: bool = False, t: float | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "error", "code": code, "message": message, "fatal": fatal}
    if t is not None:
        event["t"] = t
    return event


def send_json(message: dict[str, Any]) -> Send:
    return Send(json.dumps(message, ensure_ascii=False, separators=(",", ":")))


def transcript(t: float, role: str, text: str, final: bool) -> Send:
    """A ``transcript`` message (``hello.extra_events``): ``role`` is ``user`` or ``agent``, as harnesses read it."""
    return send_json({"type": "transcript", "t": t, "role": role, "text": text, "final": final})


def pcm16_to_float(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def float_to_pcm16(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1.0, 32767 / 32768) * 32768.0).astype("<i2").tobytes()


# -- client messages: the schema every text frame is read with (transport/wire.py) --


Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]  # samples: 64-bit, as everywhere they are counted


class HelloMessage(msgspec.Struct, frozen=True):
    sample_rate: Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31)]  # then one of SAMPLE_RATES
    acks: bool = False
    echo_cancel: bool = True
    lead_ms: float | msgspec.UnsetType = msgspec.UNSET  # its range is the server's Limits
    session: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    language: Annotated[str, msgspec.Meta(min_length=2, max_length=4)] | None = None
    # Names from EXTRA_EVENTS; checked in the dialect, so that a wrong one is named with the right ones.
    extra_events: Annotated[tuple[Annotated[str, msgspec.Meta(max_length=64)], ...], msgspec.Meta(max_length=8)] = ()
    denoise: Literal["rnnoise", "off"] | None = None
    agent: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None  # by its --agent NAME


class PlayedMessage(msgspec.Struct, frozen=True):
    samples: Count
    dropped: Count = 0


class CancelMessage(msgspec.Struct, frozen=True):
    pass


# One key of a phone's keypad (core/keypad.py): what our ``key`` message and Twilio's ``dtmf`` hold.
Key = Annotated[str, msgspec.Meta(pattern="^[0-9*#A-D]$")]


class KeyMessage(msgspec.Struct, frozen=True):
    key: Key


CLIENT_MESSAGES: dict[str, type[msgspec.Struct]] = {
    "hello": HelloMessage,
    "played": PlayedMessage,
    "cancel": CancelMessage,
    "key": KeyMessage,
}


# What a client is told when a stage of its pipeline fails: the stage and what
# it means for the conversation, never the exception (that is in the server's log).
FAILURES: dict[str, str] = {
    "asr_partial": "a partial transcript failed; the final one follows",
    "asr_check": "checking speech over the reply failed; the final transcript decides",
    "asr_early_final": "the early transcript failed; the one at the endpoint follows",
    "asr_final": "the transcript of this utterance failed; it is not answered",
    "end_of_turn": "the end-of-turn check failed; the silence decides when the turn is over",
    "end_of_turn_text": "reading the words for the end of the turn failed; the sound of them decides",
    "llm": "the language model failed; the reply ends with what was said",
    "tts": "speech synthesis failed; the reply ends with what was said",
}


def failure_text(where: str) -> str:
    return f"{where}: {FAILURES.get(where, 'an internal error; the session goes on')}"


# The pipeline's events a client is sent, under their public names, with the
# fields it is told, in this order (docs/protocol.md); the others stay in the
# server's log. ``error`` is sent as an error message (VoiceProtocol.event).
PUBLIC_EVENTS: dict[type[Event], tuple[str, tuple[str, ...]]] = {
    SpeechStart: ("speech_start", ("utterance", "onset")),
    SpeechEnd: ("speech_end", ("utterance", "end")),
    AsrPartial: ("transcript_partial", ("text", "stable")),
    AsrFinal: ("transcript_final", ("utterance", "text", "language?")),
    # A reply started before the endpoint: never played unless committed (then response_start follows).
    SpeculativeStart: ("speculative_start", ("response", "utterance")),
    SpeculativeCommit: ("speculative_commit", ("response",)),
    SpeculativeDiscard: ("speculative_discard", ("response", "reason")),
    ResponseStart: ("response_start", ("response", "utterance", "text")),
    TtsChunk: ("assistant_text", ("response", "chunk", "text")),
    PlaybackPaused: ("playback_paused", ("response",)),
    PlaybackResumed: ("playback_resumed", ("response", "reason")),
    BargeIn: ("barge_in", ("response", "reason")),
    PlaybackStopped: ("playback_stopped", ("response",)),
    Truncate: ("truncate", ("response", "audio_end_ms", "text")),
    TurnEnd: ("turn_end", ("response", "text", "interrupted")),  # interrupted: false too
    Backchannel: ("backchannel", ("utterance", "text")),
    # A line per call on the page: the call as the model made it, then what came of it.
    # ``server``: the MCP server whose tool it is (absent for the session's own and the client's).
    ToolCallStart: ("tool_call", ("response", "call_id", "name", "arguments", "server?")),
    ToolCallEnd: ("tool_result", ("response", "call_id", "name", "status", "result", "duration_s", "server?")),
    # The agent's flow moved to another step (response 0: at the start); the call is to go to ``to``.
    StepEntered: ("step", ("step", "previous", "response", "via")),
    Collected: ("collected", ("response", "values", "dropped")),
    Transfer: ("transfer", ("to", "response")),
}


class VoiceProtocol:
    """One ``/ws`` connection's protocol state."""

    def __init__(self, session_id: str, output_rate: int, limits: Limits | None = None) -> None:
        self.session_id = session_id
        self.output_rate = output_rate
        self.limits = limits or Limits()
        self.configured: Configure | None = None
        self.extra_events: frozenset[str] = frozenset()  # what hello asked for besides the events
        self._said: dict[int, list[str]] = {}  # each reply's chunks so far (the agent's "transcript")

    # -- client -> server -------------------------------------------------

    def start(self) -> list[Action]:
        """Actions when the connection opens (ours waits for ``hello``)."""
        return []

    def receive_text(self, text: str) -> list[Action]:
        message = read_message(text, CLIENT_MESSAGES)
        if isinstance(message, Invalid):
            return [send_json(error(message.code, message.message))]
        if isinstance(message, HelloMessage):
            return self._hello(message)
        if self.configured is None:
            return [send_json(error("not_ready", "send 'hello' first"))]
        if isinstance(message, PlayedMessage):
            return [PlayedReport(message.samples, message.dropped)]
        if isinstance(message, KeyMessage):
            return [KeyPressed(message.key)]
        return [CancelReply()]

    def receive_binary(self, data: bytes) -> list[Action]:
        if self.configured is None:
            return [send_json(error("not_ready", "audio before 'hello' is dropped"))]
        if len(data) % 2:
            return [send_json(error("odd_length", f"a PCM16 frame has an even length, not {len(data)} bytes"))]
        if len(data) > self.limits.max_frame_bytes:
            return [
                send_json(
                    error("frame_too_large", f"{len(data)} bytes; frames are at most {self.limits.max_frame_bytes}")
                )
            ]
        if not data:
            return []
        return [AudioIn(pcm16_to_float(data))]

    def _hello(self, m: HelloMessage) -> list[Action]:
        if self.configured is not None:
            return [send_json(error("not_ready", "the session is already started; 'hello' comes once"))]
        if m.sample_rate not in SAMPLE_RATES:
            rates = ", ".join(map(str, SAMPLE_RATES))
            said = f"sample_rate {m.sample_rate} is not supported; use one of {rates}"
            return [send_json(error("unsupported_rate", said))]
        lo, hi = round(self.limits.min_lead_s * 1000), round(self.limits.max_lead_s * 1000)
        lead_ms = m.lead_ms if m.lead_ms is not msgspec.UNSET else round(self.limits.lead_s * 1000)
        if not lo <= lead_ms <= hi:
            return [send_json(error("invalid_message", f"'lead_ms' is a number from {lo} to {hi}"))]
        if m.language is not None and not known_language(m.language):
            said = f"'language' {m.language} is not one Whisper knows: a code such as en, es, ja, or auto"
            return [send_json(error("invalid_message", said))]
        unknown = [name for name in m.extra_events if name not in EXTRA_EVENTS]
        if unknown:
            said = f"'extra_events' names messages to add ({', '.join(EXTRA_EVENTS)}), not {quote(unknown[0])}"
            return [send_json(error("invalid_message", said))]
        self.extra_events = frozenset(m.extra_events)
        self.configured = Configure(
            m.sample_rate,
            m.acks,
            lead_ms / 1000,
            m.echo_cancel,
            resume=m.session,
            language=m.language,
            denoise=m.denoise,
            agent=m.agent,
        )
        return [self.configured]

    def ready(self, session_id: str, history: list[dict[str, Any]]) -> list[Send]:
        """The answer to ``hello`` once the session exists: its id and, when resumed, the conversation so far."""
        self.session_id = session_id
        c = self.configured
        assert c is not None
        ready = {
            "type": "ready",
            "protocol": PROTOCOL_VERSION,
            "session": session_id,
            "sample_rate": c.input_rate,
            "output_sample_rate": self.output_rate,
            "max_frame_bytes": self.limits.max_frame_bytes,
            "lead_ms": round(c.lead_s * 1000),
            "history": history,
        }
        return [send_json(ready)]

    # -- server -> client -------------------------------------------------

    def event(self, event: Event) -> list[Send]:
        """A pipeline event as the messages the client is sent (none for internal ones)."""
        if isinstance(event, Error):
            message = error("pipeline", failure_text(event.where), t=event.t)
            message["where"] = event.where
            return [send_json(message)]
        public = PUBLIC_EVENTS.get(type(event))
        if public is None:
            return []
        name, fields = public
        out: dict[str, Any] = {"type": name, "t": event.t}
        for f in fields:  # "name?": sent only when it has a value
            name = f.removesuffix("?")
            value = getattr(event, name)
            if name == f or value not in (None, ""):
                out[name] = value
        return [send_json(out), *self._extra(event)]

    def _extra(self, event: Event) -> list[Send]:
        """What ``event`` also makes for a client that asked for ``hello.extra_events``: transcripts as
        ``{"type": "transcript", "role": "user"|"agent", "text", "final"}`` (the agent's partial is its
        reply so far, its final what was heard of it) and ``clear`` when the buffer is to be flushed."""
        if "transcript" in self.extra_events:
            if isinstance(event, AsrPartial | AsrFinal):
                return [transcript(event.t, "user", event.text, final=isinstance(event, AsrFinal))]
            if isinstance(event, TtsChunk):
                said = self._said.setdefault(event.response, [])
                said.append(event.text.strip())
                return [transcript(event.t, "agent", " ".join(filter(None, said)), final=False)]
            if isinstance(event, TurnEnd):
                self._said.pop(event.response, None)
                return [transcript(event.t, "agent", event.text, final=True)]
        if "clear" in self.extra_events and isinstance(event, PlaybackStopped):
            return [send_json({"type": "clear", "t": event.t})]
        return []

    def error(self, code: str, message: str, fatal: bool = False, t: float | None = None) -> list[Send]:
        return [send_json(error(code, message, fatal, t))]

    def truncated(self, request: TruncateReply, text: str | None) -> list[Send]:
        return []  # our clients report played samples instead of truncating

    def audio(self, samples: np.ndarray, response: int | None) -> list[Send]:
        """Reply audio (float32 at the output rate) as binary frames."""
        return [Send(float_to_pcm16(samples))]
