"""The OpenAI Realtime dialect (``/v1/realtime``), without I/O.

Speaks enough of the Realtime API's events for its clients (the official
``openai`` SDK's ``client.realtime.connect``) to hold a spoken conversation
with barge-in: audio is base64 PCM16 at 24 kHz inside JSON events, turns are
found by our VAD (``server_vad`` semantics), and a client that stopped playing
says how much it played with ``conversation.item.truncate``. Client-side tools
as the API has them: ``session.update`` with ``tools``; a call is a
``function_call`` item of the response, which ends (``response.done``) while
the client runs it; its ``function_call_output`` item goes back to the model
and the reply goes on in a new response (``response.create`` is not needed,
and harmless). A user text message item is answered at ``response.create``. It produces the
same actions as :class:`transport.protocol.VoiceProtocol`; which events are
supported is listed in ``docs/protocol.md``.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
import numpy as np
import soxr

from transport import g711
from transport.protocol import (
    Action,
    AudioIn,
    CancelReply,
    Configure,
    Limits,
    Send,
    ToolOutput,
    TruncateReply,
    UserText,
    failure_text,
    float_to_pcm16,
    pcm16_to_float,
    send_json,
)
from transport.wire import MAX_QUOTE, Invalid, quote, read_message
from voice.core.events import (
    AsrFinal,
    AsrPartial,
    AwaitingTools,
    BargeIn,
    Error,
    Event,
    ResponseContinued,
    ResponseStart,
    SpeechEnd,
    SpeechStart,
    ToolCallStart,
    Truncate,
    TtsChunk,
    TurnEnd,
)

RATE = 24000  # the Realtime API's audio/pcm
FORMAT = {"type": "audio/pcm", "rate": RATE}
# G.711 at 8 kHz (a phone line's audio, as Twilio and SIP trunks send it): one byte a sample.
G711 = {"audio/pcmu": "ulaw", "audio/pcma": "alaw"}
MAX_INSTRUCTIONS = 4000  # characters: about 1,000 tokens of the embedded model's 2,048-token context

# -- client events: the schema every text frame is read with (transport/wire.py) --
# The documented fields of each event, with their types; fields not listed are
# ignored. Which values are supported is checked after, in the handlers.

Id = Annotated[str, msgspec.Meta(max_length=64)]
Name = Annotated[str, msgspec.Meta(max_length=200)]


class ClientEvent(msgspec.Struct, frozen=True, kw_only=True):
    event_id: Id | None = None


class AudioFormat(msgspec.Struct, frozen=True):
    type: Name
    rate: int | None = None


class TurnDetection(msgspec.Struct, frozen=True):
    type: Name
    create_response: bool = True
    interrupt_response: bool = True
    # Tuning, accepted and ignored: the server's VAD is tuned for this pipeline.
    threshold: float | None = None
    prefix_padding_ms: int | None = None
    silence_duration_ms: int | None = None
    idle_timeout_ms: int | None = None
    eagerness: Name | None = None


class Transcription(msgspec.Struct, frozen=True):  # accepted and ignored: Whisper transcribes
    model: Name | None = None
    language: Name | None = None
    prompt: Annotated[str, msgspec.Meta(max_length=MAX_INSTRUCTIONS)] | None = None


class NoiseReduction(msgspec.Struct, frozen=True):  # accepted and ignored
    type: Name


class InputAudio(msgspec.Struct, frozen=True):
    format: AudioFormat | None = None
    transcription: Transcription | None = None
    noise_reduction: NoiseReduction | None = None
    turn_detection: TurnDetection | msgspec.UnsetType | None = msgspec.UNSET  # null: manual turns


class OutputAudio(msgspec.Struct, frozen=True):
    format: AudioFormat | None = None
    voice: Name | None = None  # accepted and ignored: one piper voice
    speed: float | None = None  # accepted and ignored


class SessionAudio(msgspec.Struct, frozen=True):
    input: InputAudio | None = None
    output: OutputAudio | None = None


class SessionConfig(msgspec.Struct, frozen=True):
    type: Name | None = None
    model: Name | None = None
    instructions: Annotated[str, msgspec.Meta(max_length=MAX_INSTRUCTIONS)] | None = None
    output_modalities: Annotated[list[Name], msgspec.Meta(max_length=4)] | None = None
    audio: SessionAudio | None = None
    tools: Annotated[list[dict[str, Any]], msgspec.Meta(max_length=128)] | None = None
    tool_choice: Name | dict[str, Any] | None = None  # "auto" or "none"
    # Accepted and ignored.
    max_output_tokens: int | Name | None = None
    tracing: Name | dict[str, Any] | None = None
    truncation: Name | dict[str, Any] | None = None
    prompt: dict[str, Any] | None = None
    include: list[Name] | None = None


class SessionUpdate(ClientEvent, frozen=True):
    session: SessionConfig


class AudioAppend(ClientEvent, frozen=True):
    audio: bytes  # base64, decoded by the schema


class AudioCommit(ClientEvent, frozen=True):
    pass


class AudioClear(ClientEvent, frozen=True):
    pass


class ResponseCancel(ClientEvent, frozen=True):
    response_id: Id | None = None


class ResponseCreate(ClientEvent, frozen=True):
    response: dict[str, Any] | None = None  # accepted and ignored: replies start at each endpoint


class ItemTruncate(ClientEvent, frozen=True):
    item_id: Id
    audio_end_ms: Annotated[int, msgspec.Meta(ge=0, le=86_400_000)]  # a day: beyond any reply
    content_index: Annotated[int, msgspec.Meta(ge=0)] = 0


class ItemCreate(ClientEvent, frozen=True):  # a function_call_output, or a user's text message
    item: dict[str, Any] | None = None
    previous_item_id: Id | None = None


CLIENT_EVENTS: dict[str, type[ClientEvent]] = {
    "session.update": SessionUpdate,
    "input_audio_buffer.append": AudioAppend,
    "input_audio_buffer.commit": AudioCommit,
    "input_audio_buffer.clear": AudioClear,
    "response.cancel": ResponseCancel,
    "response.create": ResponseCreate,
    "conversation.item.truncate": ItemTruncate,
    "conversation.item.create": ItemCreate,
}


@dataclass
class _Reply:
    """One reply under the ids its client knows, and what the client was told of it."""

    id: str  # resp_...
    item_id: str  # item_a...
    transcript: str = ""  # the chunks' texts sent so far
    cancel_reason: str = "turn_detected"  # response.done's status_details, should it be cut
    by_truncate: bool = False  # cut by the client's own conversation.item.truncate
    calls: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # its function_call items
    done: bool = False  # response.done sent: it ended with calls, the reply goes on in another


def _format(kind: str) -> dict[str, Any]:
    return FORMAT if kind == "audio/pcm" else {"type": kind}


def _first_words(text: str) -> str:
    return text if len(text) <= MAX_QUOTE else text[:MAX_QUOTE] + "…"


class RealtimeProtocol:
    """One ``/v1/realtime`` connection's state: ids of items and responses."""

    def __init__(
        self,
        session_id: str,
        output_rate: int,
        limits: Limits | None = None,
        resume: str | None = None,
        semantic: bool = False,
    ) -> None:
        """``semantic``: the server ends turns with its end-of-turn model (Smart Turn and the
        words), which Realtime calls ``semantic_vad``; else by silence (``server_vad``)."""
        self.session_id = session_id
        self.semantic = semantic
        # ?session=ID in the URL: a stored conversation to go on with (an id is at most 64 characters).
        self._bad_resume = resume is not None and not 0 < len(resume) <= 64
        self.resume = None if self._bad_resume else resume
        self.limits = limits or Limits()
        self.instructions: str | None = None
        self._events = 0
        self.output_rate = output_rate
        self._to_24k = None if output_rate == RATE else soxr.ResampleStream(output_rate, RATE, 1, dtype="float32")
        self.input_format = self.output_format = "audio/pcm"  # or a G711 type (session.update)
        self._to_8k: g711.To8k | None = None  # for a G.711 output
        self._user_items: dict[int, str] = {}  # utterance -> item id
        self._responses: dict[int, _Reply] = {}  # response -> its ids and what was sent
        self._last_item: str | None = None
        self._stable = ""  # the partial transcript already sent as deltas
        self._cancelling = False
        self.tools: list[dict[str, Any]] = []  # the client's tools, as it gave them
        self.tool_choice = "auto"
        self._typed: list[str] = []  # user text items not answered yet (until response.create)
        self._items = 0

    # -- helpers -------------------------------------------------------------

    def _event(self, kind: str, **fields: Any) -> Send:
        self._events += 1
        body = {"type": kind, "event_id": f"event_{self._events}", **fields}
        return send_json(body)

    def error(
        self,
        code: str,
        message: str,
        fatal: bool = False,
        t: float | None = None,
        param: str | None = None,
        event_id: str | None = None,
    ) -> list[Send]:
        """An ``error`` event in OpenAI's shape; ``event_id``: the client event it answers."""
        kind = "server_error" if code in ("pipeline", "internal") else "invalid_request_error"
        body: dict[str, Any] = {"type": kind, "code": code, "message": message, "param": param}
        if event_id is not None:
            body["event_id"] = event_id
        return [self._event("error", error=body)]

    def _session(self) -> dict[str, Any]:
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": f"sess_{self.session_id}",
            "model": "voice-pipeline",
            "output_modalities": ["audio"],
            # Not echoed whole: a client's text is not sent back to it (issue 14); it knows what it sent.
            "instructions": _first_words(self.instructions or ""),
            "tools": self.tools,
            "tool_choice": self.tool_choice,
            "audio": {
                "input": {
                    "format": _format(self.input_format),
                    "transcription": {"model": "whisper"},
                    "turn_detection": self._turn_detection(),
                },
                "output": {"format": _format(self.output_format), "voice": "piper"},
            },
        }

    def _turn_detection(self) -> dict[str, Any]:
        """What the server does to end a turn, as Realtime names it."""
        kind = {"type": "semantic_vad", "eagerness": "auto"} if self.semantic else {"type": "server_vad"}
        return {**kind, "create_response": True, "interrupt_response": True}

    # -- client -> server ----------------------------------------------------

    def start(self) -> list[Action]:
        return [Configure(self._input_rate(), acks=False, lead_s=self.limits.lead_s, resume=self.resume)]

    def _input_rate(self) -> int:
        return g711.G711_RATE if self.input_format in G711 else RATE

    def ready(self, session_id: str, history: list[dict[str, Any]]) -> list[Send]:
        """``session.created``, then the stored conversation's items when it is resumed."""
        self.session_id = session_id
        out = [self._event("session.created", session=self._session())]
        previous = None
        for i, turn in enumerate(history):
            item_id = f"item_h{i + 1}_{session_id[:8]}"
            kind = "input_audio" if turn["role"] == "user" else "output_audio"
            item = {"id": item_id, "object": "realtime.item", "type": "message", "role": turn["role"],
                    "status": "incomplete" if turn.get("interrupted") else "completed",
                    "content": [{"type": kind, "transcript": turn["text"]}]}  # fmt: skip
            out.append(self._event("conversation.item.done", previous_item_id=previous, item=item))
            previous = item_id
        self._last_item = previous
        if self._bad_resume:
            said = "'session' in the URL is the id of a stored conversation: a new one is started"
            out += self.error("unknown_session", said, param="session")
        return out

    def receive_binary(self, data: bytes) -> list[Action]:
        return self.error("invalid_request", "the Realtime API sends JSON text frames, not binary ones")

    def receive_text(self, text: str) -> list[Action]:
        event = read_message(text, CLIENT_EVENTS)
        if isinstance(event, Invalid):
            return self.error(event.code, event.message, param=event.param, event_id=event.event_id)
        match event:
            case SessionUpdate():
                return self._session_update(event)
            case AudioAppend():
                if self.input_format in G711:
                    return [AudioIn(g711.decode(event.audio, G711[self.input_format]))] if event.audio else []
                if len(event.audio) % 2:
                    said = f"PCM16 audio has an even length, not {len(event.audio)} bytes"
                    return self._refuse(event, "odd_length", said, "audio")
                return [AudioIn(pcm16_to_float(event.audio))] if event.audio else []
            case AudioCommit():
                return [self._event("input_audio_buffer.committed", item_id=self._last_item, previous_item_id=None)]
            case AudioClear():
                return [self._event("input_audio_buffer.cleared")]
            case ResponseCancel():
                return [CancelReply()]
            case ResponseCreate():
                # Replies start on their own at each endpoint, and go on after function call outputs;
                # typed turns wait for this.
                typed, self._typed = self._typed, []
                return [UserText(" ".join(typed))] if typed else []
            case ItemTruncate():
                return self._truncate(event)
            case ItemCreate():
                return self._item_create(event)
        return self._refuse(event, "unsupported", "only spoken input is supported (input_audio_buffer.append)")

    def _item_create(self, m: ItemCreate) -> list[Action]:
        """A function call's output, or a text message of the user's: both go into the conversation."""
        item = m.item or {}
        kind = item.get("type")
        if kind == "function_call_output":
            call_id, output = item.get("call_id"), item.get("output")
            if not isinstance(call_id, str) or not isinstance(output, str):
                return self._refuse(
                    m, "invalid_value", "a function_call_output needs call_id and output strings", "item"
                )
            added = {"id": self._item_id(item), "object": "realtime.item", "type": "function_call_output",
                     "call_id": call_id, "output": output, "status": "completed"}  # fmt: skip
            return [ToolOutput(call_id, output), *self._added(added)]
        if kind == "message" and item.get("role") == "user":
            content = item.get("content")
            parts = content if isinstance(content, list) else []
            texts = [p.get("text") for p in parts if isinstance(p, dict) and p.get("type") == "input_text"]
            if not texts or not all(isinstance(t, str) for t in texts) or len(texts) != len(parts):
                said = "a user message item's content is input_text parts (audio is streamed)"
                return self._refuse(m, "unsupported", said, "item.content")
            text = " ".join(texts).strip()
            if not text:
                return self._refuse(m, "invalid_value", "the message has no text", "item.content")
            self._typed.append(text)
            added = {"id": self._item_id(item), "object": "realtime.item", "type": "message", "role": "user",
                     "status": "completed", "content": [{"type": "input_text", "text": text}]}  # fmt: skip
            return self._added(added)
        said = "conversation.item.create takes a function_call_output or a user message"
        return self._refuse(m, "unsupported", said, "item.type")

    def _item_id(self, item: dict[str, Any]) -> str:
        given = item.get("id")
        if isinstance(given, str) and 0 < len(given) <= 64:
            return given
        self._items += 1
        return f"item_c{self._items}_{self.session_id[:8]}"

    def _added(self, item: dict[str, Any]) -> list[Action]:
        previous, self._last_item = self._last_item, item["id"]
        return [
            self._event("conversation.item.added", previous_item_id=previous, item=item),
            self._event("conversation.item.done", previous_item_id=previous, item=item),
        ]

    def _refuse(self, event: ClientEvent, code: str, message: str, param: str | None = None) -> list[Action]:
        return self.error(code, message, param=param, event_id=event.event_id)

    def _session_update(self, m: SessionUpdate) -> list[Action]:
        """What this server can do with the session asked for; an update it cannot honour changes nothing."""
        session = m.session
        if session.type not in (None, "realtime"):
            said = f"session type {quote(session.type)}: only 'realtime'"
            return self._refuse(m, "unsupported", said, "session.type")
        if session.output_modalities is not None and session.output_modalities != ["audio"]:
            said = "output_modalities is ['audio']: replies are spoken"
            return self._refuse(m, "unsupported", said, "session.output_modalities")
        choice = session.tool_choice
        if choice is not None and choice not in ("auto", "none"):
            said = "tool_choice is 'auto' or 'none' (the model decides whether to call)"
            return self._refuse(m, "unsupported", said, "session.tool_choice")
        specs = None
        if session.tools is not None:
            specs = _function_specs(session.tools)
            if isinstance(specs, str):
                return self._refuse(m, "invalid_value", specs, "session.tools")
        audio = session.audio or SessionAudio()
        formats = {"input": self.input_format, "output": self.output_format}
        for side, cfg in (("input", audio.input), ("output", audio.output)):
            fmt = cfg.format if cfg is not None else None
            if fmt is None:
                continue
            if (fmt.type, fmt.rate) in (("audio/pcm", None), ("audio/pcm", RATE)) or (
                fmt.type in G711 and fmt.rate in (None, g711.G711_RATE)
            ):
                formats[side] = fmt.type
                continue
            said = f"{quote(fmt.type)} at {fmt.rate} Hz" if fmt.rate is not None else quote(fmt.type)
            said = f"{side} audio is audio/pcm at {RATE} Hz, audio/pcmu or audio/pcma (8 kHz), not {said}"
            return self._refuse(m, "unsupported_rate", said, f"session.audio.{side}.format")
        if formats["output"] in G711 and self.output_rate % g711.G711_RATE:
            said = f"G.711 output needs the server's output rate to be a multiple of 8 kHz, not {self.output_rate} Hz"
            return self._refuse(m, "unsupported_rate", said, "session.audio.output.format")
        turns = audio.input.turn_detection if audio.input is not None else msgspec.UNSET
        if turns is None:
            said = "turn_detection null (manual turns) is not supported"
            return self._refuse(m, "unsupported", said, "session.audio.input.turn_detection")
        if isinstance(turns, TurnDetection) and (
            turns.type not in ("server_vad", "semantic_vad")
            or not turns.create_response
            or not turns.interrupt_response
        ):
            return self._refuse(
                m,
                "unsupported",
                "turn detection is the server's (server_vad or semantic_vad), with create_response and "
                "interrupt_response true",
                "session.audio.input.turn_detection",
            )
        if session.instructions is not None:
            self.instructions = session.instructions
        tools = None
        if specs is not None or choice is not None:
            if session.tools is not None:
                self.tools = list(session.tools)
            if choice is not None:
                self.tool_choice = choice
            offered = _function_specs(self.tools) if self.tool_choice == "auto" else []
            tools = tuple(offered) if isinstance(offered, list) else ()
        if formats["output"] != self.output_format:
            self._to_8k = g711.To8k(self.output_rate) if formats["output"] in G711 else None
        self.input_format, self.output_format = formats["input"], formats["output"]
        configure = Configure(
            self._input_rate(), acks=False, lead_s=self.limits.lead_s, instructions=session.instructions, tools=tools
        )
        return [configure, self._event("session.updated", session=self._session())]

    def _truncate(self, m: ItemTruncate) -> list[Action]:
        for response, r in self._responses.items():
            if r.item_id == m.item_id:
                return [TruncateReply(response, m.audio_end_ms)]
        return self._refuse(m, "item_truncate_invalid_item_id", f"no assistant item {quote(m.item_id)}", "item_id")

    def truncated(self, request: TruncateReply, text: str | None) -> list[Send]:
        r = self._responses.get(request.response)
        if r is None or text is None:
            return self.error("item_truncate_invalid_item_id", "that item is no longer known")
        return [
            self._event(
                "conversation.item.truncated", item_id=r.item_id, content_index=0, audio_end_ms=request.audio_end_ms
            )
        ]

    # -- server -> client ----------------------------------------------------

    def audio(self, samples: np.ndarray, response: int | None) -> list[Send]:
        r = self._responses.get(response) if response is not None else None
        if r is None:
            return []
        if self.output_format in G711:
            assert self._to_8k is not None
            payload = g711.encode(self._to_8k(samples), G711[self.output_format])
        else:
            if self._to_24k is not None:
                samples = self._to_24k.resample_chunk(samples)
            payload = float_to_pcm16(samples)
        if not payload:  # the resampler kept this chunk back: nothing to send yet
            return []
        delta = base64.b64encode(payload).decode()
        return [self._event("response.output_audio.delta", **self._where(r), delta=delta)]

    @staticmethod
    def _where(r: _Reply) -> dict[str, Any]:
        return {"response_id": r.id, "item_id": r.item_id, "output_index": 0, "content_index": 0}

    def event(self, event: Event) -> list[Send]:
        """A pipeline event as the Realtime events the client is sent (none for the server's own)."""
        handler = EVENT_HANDLERS.get(type(event))
        return handler(self, event) if handler is not None else []

    def _on_error(self, e: Error) -> list[Send]:
        return self.error("pipeline", failure_text(e.where))

    def _on_speech_start(self, e: SpeechStart) -> list[Send]:
        item = f"item_u{e.utterance}_{self.session_id[:8]}"
        self._user_items[e.utterance] = item
        self._stable = ""
        return [self._event("input_audio_buffer.speech_started", audio_start_ms=round(e.onset * 1000), item_id=item)]

    def _on_speech_end(self, e: SpeechEnd) -> list[Send]:
        item = self._user_items.get(e.utterance)
        previous, self._last_item = self._last_item, item
        user_item = {
            "id": item,
            "object": "realtime.item",
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        return [
            self._event("input_audio_buffer.speech_stopped", audio_end_ms=round(e.end * 1000), item_id=item),
            self._event("input_audio_buffer.committed", item_id=item, previous_item_id=previous),
            self._event("conversation.item.added", previous_item_id=previous, item=user_item),
        ]

    def _on_asr_partial(self, e: AsrPartial) -> list[Send]:
        stable = e.stable
        item = self._user_items.get(max(self._user_items, default=0))
        if not stable.startswith(self._stable) or stable == self._stable or item is None:
            return []
        delta, self._stable = stable[len(self._stable) :], stable
        return [
            self._event("conversation.item.input_audio_transcription.delta", item_id=item, content_index=0, delta=delta)
        ]

    def _on_asr_final(self, e: AsrFinal) -> list[Send]:
        item = self._user_items.get(e.utterance)
        if item is None:
            return []
        return [
            self._event(
                "conversation.item.input_audio_transcription.completed",
                item_id=item,
                content_index=0,
                transcript=e.text,
            )
        ]

    def _on_response_start(self, e: ResponseStart) -> list[Send]:
        return self._open(e.response, str(e.response))

    def _open(self, n: int, name: str) -> list[Send]:
        """A Realtime response, and its assistant message, for (this part of) reply ``n``."""
        r = _Reply(f"resp_{name}_{self.session_id[:8]}", f"item_a{name}_{self.session_id[:8]}")
        self._responses[n] = r
        while len(self._responses) > 16:
            self._responses.pop(next(iter(self._responses)))
        previous, self._last_item = self._last_item, r.item_id
        item = {"id": r.item_id, "object": "realtime.item", "type": "message", "role": "assistant",
                "status": "in_progress", "content": []}  # fmt: skip
        response = {"id": r.id, "object": "realtime.response", "status": "in_progress", "output": []}
        return [
            self._event("response.created", response=response),
            self._event("response.output_item.added", response_id=r.id, output_index=0, item=item),
            self._event("conversation.item.added", previous_item_id=previous, item=item),
            self._event("response.content_part.added", **self._where(r), part={"type": "audio", "transcript": ""}),
        ]

    def _on_tool_call(self, e: ToolCallStart) -> list[Send]:
        """A call of one of the client's tools (the server's own tools it does not see)."""
        r = self._responses.get(e.response)
        if r is None or e.name not in {t.get("name") for t in self.tools}:
            return []
        index = 1 + len(r.calls)  # the reply's message is output 0
        item_id = f"item_f{e.response}_{index}_{self.session_id[:8]}"
        item = {"id": item_id, "object": "realtime.item", "type": "function_call", "status": "in_progress",
                "call_id": e.call_id, "name": e.name, "arguments": ""}  # fmt: skip
        done = {**item, "status": "completed", "arguments": e.arguments}
        r.calls.append(done)
        where = {"response_id": r.id, "item_id": item_id, "output_index": index, "call_id": e.call_id}
        previous, self._last_item = self._last_item, item_id
        return [
            self._event("response.output_item.added", response_id=r.id, output_index=index, item=item),
            self._event("conversation.item.added", previous_item_id=previous, item=item),
            self._event("response.function_call_arguments.delta", **where, delta=e.arguments),
            self._event("response.function_call_arguments.done", **where, name=e.name, arguments=e.arguments),
            self._event("response.output_item.done", response_id=r.id, output_index=index, item=done),
            self._event("conversation.item.done", previous_item_id=previous, item=done),
        ]

    def _on_awaiting_tools(self, e: AwaitingTools) -> list[Send]:
        """The request ended with calls: if the client has some to run, this response is done."""
        r = self._responses.get(e.response)
        if r is None or not r.calls or r.done:
            return []
        r.done = True
        return self._finish(r, r.transcript, interrupted=False)

    def _on_response_continued(self, e: ResponseContinued) -> list[Send]:
        """The reply goes on with the results: in a new response, if the last one was done."""
        r = self._responses.get(e.response)
        if r is None or not r.done:
            return []
        return self._open(e.response, f"{e.response}r{e.round}")

    def _on_tts_chunk(self, e: TtsChunk) -> list[Send]:
        r = self._responses.get(e.response)
        if r is None:
            return []
        delta = (" " if r.transcript else "") + e.text
        r.transcript += delta
        return [self._event("response.output_audio_transcript.delta", **self._where(r), delta=delta)]

    def _on_barge_in(self, e: BargeIn) -> list[Send]:
        r = self._responses.get(e.response)
        if r is not None:
            r.cancel_reason = "client_cancelled" if e.reason in ("client", "truncate") else "turn_detected"
            r.by_truncate = e.reason == "truncate"
        return []

    def _on_truncate(self, e: Truncate) -> list[Send]:
        r = self._responses.get(e.response)
        if r is None or r.by_truncate:
            return []  # the client's own truncate: answered by truncated()
        return [
            self._event("conversation.item.truncated", item_id=r.item_id, content_index=0, audio_end_ms=e.audio_end_ms)
        ]

    def _on_turn_end(self, e: TurnEnd) -> list[Send]:
        r = self._responses.get(e.response)
        if r is None or r.done:
            return []
        # A reply that went on after its calls: this response has the words said since.
        transcript = r.transcript if r.id != f"resp_{e.response}_{self.session_id[:8]}" else e.text
        return self._finish(r, transcript, e.interrupted)

    def _finish(self, r: _Reply, transcript: str, interrupted: bool) -> list[Send]:
        part = {"type": "audio", "transcript": transcript}
        status = "incomplete" if interrupted else "completed"
        item = {"id": r.item_id, "object": "realtime.item", "type": "message", "role": "assistant",
                "status": status, "content": [{"type": "output_audio", "transcript": transcript}]}  # fmt: skip
        response: dict[str, Any] = {
            "id": r.id,
            "object": "realtime.response",
            "status": "cancelled" if interrupted else "completed",
            "output": [item, *r.calls],
        }
        if interrupted:
            response["status_details"] = {"type": "cancelled", "reason": r.cancel_reason}
        return [
            self._event("response.output_audio.done", **self._where(r)),
            self._event("response.output_audio_transcript.done", **self._where(r), transcript=transcript),
            self._event("response.content_part.done", **self._where(r), part=part),
            self._event("response.output_item.done", response_id=r.id, output_index=0, item=item),
            self._event("conversation.item.done", item=item),
            self._event("response.done", response=response),
        ]


# The pipeline events this dialect tells its client of; the others are the server's own.
EVENT_HANDLERS: dict[type[Event], Callable[[RealtimeProtocol, Any], list[Send]]] = {
    Error: RealtimeProtocol._on_error,
    SpeechStart: RealtimeProtocol._on_speech_start,
    SpeechEnd: RealtimeProtocol._on_speech_end,
    AsrPartial: RealtimeProtocol._on_asr_partial,
    AsrFinal: RealtimeProtocol._on_asr_final,
    ResponseStart: RealtimeProtocol._on_response_start,
    TtsChunk: RealtimeProtocol._on_tts_chunk,
    ToolCallStart: RealtimeProtocol._on_tool_call,
    AwaitingTools: RealtimeProtocol._on_awaiting_tools,
    ResponseContinued: RealtimeProtocol._on_response_continued,
    BargeIn: RealtimeProtocol._on_barge_in,
    Truncate: RealtimeProtocol._on_truncate,
    TurnEnd: RealtimeProtocol._on_turn_end,
}


_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _function_specs(tools: list[dict[str, Any]]) -> list[dict[str, Any]] | str:
    """Realtime's tools (``{"type": "function", "name", "description", "parameters"}``) as the chat
    API takes them, or what is wrong with them."""
    import jsonschema

    specs = []
    for i, t in enumerate(tools):
        name = t.get("name")
        if t.get("type", "function") != "function":
            return f"tools[{i}]: only function tools are supported, not {quote(str(t.get('type')))}"
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            return f"tools[{i}]: a function's name is 1-64 letters, digits, _ or -"
        parameters = t.get("parameters") or {"type": "object", "properties": {}}
        try:
            jsonschema.Draft202012Validator.check_schema(parameters)
        except jsonschema.SchemaError as e:
            return f"tools[{i}] ({name}): parameters is not a JSON schema ({e.message})"
        function = {"name": name, "description": str(t.get("description") or ""), "parameters": parameters}
        specs.append({"type": "function", "function": function})
    return specs
