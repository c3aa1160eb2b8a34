"""Realtime, client to server: what each client event asks, as the connection's actions, or
why it is refused (an ``error`` event in OpenAI's shape), without I/O."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from asr.whisper import known_language
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
    pcm16_to_float,
)
from transport.realtime.messages import (
    CLIENT_EVENTS,
    G711,
    RATE,
    AudioAppend,
    AudioClear,
    AudioCommit,
    ClientEvent,
    ItemCreate,
    ItemTruncate,
    NoiseReduction,
    ResponseCancel,
    ResponseCreate,
    SessionAudio,
    SessionConfig,
    SessionUpdate,
    TurnDetection,
)
from transport.realtime.tools import _function_specs
from transport.wire import Invalid, quote, read_message

# Realtime's kinds of input noise reduction: the server has one suppressor (RNNoise) for both.
NOISE_REDUCTION_TYPES = ("near_field", "far_field")


class ClientEvents:
    """The half of :class:`~transport.realtime.RealtimeProtocol` that reads the client's events."""

    # The connection's state and helpers, kept by RealtimeProtocol.
    session_id: str
    output_rate: int
    limits: Limits
    instructions: str | None
    input_format: str
    output_format: str
    tools: list[dict[str, Any]]
    tool_choice: str
    noise_reduction: str | None
    _to_8k: g711.To8k | None
    _responses: dict[int, Any]
    _typed: list[str]
    _items: int
    _last_item: str | None
    _event: Callable[..., Send]
    error: Callable[..., list[Send]]
    _session: Callable[[], dict[str, Any]]
    _input_rate: Callable[[], int]

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
        reduction = audio.input.noise_reduction if audio.input is not None else msgspec.UNSET
        if isinstance(reduction, NoiseReduction) and reduction.type not in NOISE_REDUCTION_TYPES:
            said = f"noise_reduction type {quote(reduction.type)}: one of near_field, far_field (or null: off)"
            return self._refuse(m, "invalid_value", said, "session.audio.input.noise_reduction.type")
        denoise = None
        if reduction is not msgspec.UNSET:
            self.noise_reduction = reduction.type if isinstance(reduction, NoiseReduction) else None
            denoise = "off" if reduction is None else "rnnoise"
        language = _transcription_language(session)
        if language is not None and not known_language(language):
            said = f"transcription language {quote(language)} is not one Whisper knows (a code such as en, es, ja)"
            return self._refuse(m, "invalid_value", said, "session.audio.input.transcription.language")
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
            self._input_rate(),
            acks=False,
            lead_s=self.limits.lead_s,
            instructions=session.instructions,
            tools=tools,
            language=language,
            denoise=denoise,
        )
        return [configure, self._event("session.updated", session=self._session())]

    def _truncate(self, m: ItemTruncate) -> list[Action]:
        for response, r in self._responses.items():
            if r.item_id == m.item_id:
                return [TruncateReply(response, m.audio_end_ms)]
        return self._refuse(m, "item_truncate_invalid_item_id", f"no assistant item {quote(m.item_id)}", "item_id")


def _transcription_language(session: SessionConfig) -> str | None:
    """``session.audio.input.transcription.language``, where the client gave one."""
    given = session.audio.input if session.audio is not None else None
    if given is None or given.transcription is None:
        return None
    return given.transcription.language
