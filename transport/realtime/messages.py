"""The Realtime API's client events as this server reads them: the schema every text frame is
read with (``transport/wire.py``), and the audio formats it speaks."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

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


class Transcription(msgspec.Struct, frozen=True):  # Whisper transcribes; its language is honoured
    model: Name | None = None
    language: Name | None = None
    prompt: Annotated[str, msgspec.Meta(max_length=MAX_INSTRUCTIONS)] | None = None


class NoiseReduction(msgspec.Struct, frozen=True):  # either type: RNNoise (the server has one suppressor)
    type: Name


class InputAudio(msgspec.Struct, frozen=True):
    format: AudioFormat | None = None
    transcription: Transcription | None = None
    noise_reduction: NoiseReduction | msgspec.UnsetType | None = msgspec.UNSET  # null: off
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
