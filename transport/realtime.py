"""The OpenAI Realtime dialect (``/v1/realtime``), without I/O.

Speaks enough of the Realtime API's events for its clients (the official
``openai`` SDK's ``client.realtime.connect``) to hold a spoken conversation
with barge-in: audio is base64 PCM16 at 24 kHz inside JSON events, turns are
found by our VAD (``server_vad`` semantics), and a client that stopped playing
says how much it played with ``conversation.item.truncate``. It produces the
same actions as :class:`transport.protocol.VoiceProtocol`; which events are
supported is listed in ``docs/protocol.md``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import soxr

from transport.protocol import (
    Action,
    AudioIn,
    CancelReply,
    Configure,
    Limits,
    Send,
    TruncateReply,
    float_to_pcm16,
    parse_json_object,
    pcm16_to_float,
    send_json,
)
from voice.core.events import (
    AsrFinal,
    AsrPartial,
    BargeIn,
    Error,
    Event,
    ResponseStart,
    SpeechEnd,
    SpeechStart,
    Truncate,
    TtsChunk,
    TurnEnd,
)

RATE = 24000  # the Realtime API's audio/pcm
FORMAT = {"type": "audio/pcm", "rate": RATE}


@dataclass
class _Reply:
    """One reply under the ids its client knows, and what the client was told of it."""

    id: str  # resp_...
    item_id: str  # item_a...
    transcript: str = ""  # the chunks' texts sent so far
    cancel_reason: str = "turn_detected"  # response.done's status_details, should it be cut
    by_truncate: bool = False  # cut by the client's own conversation.item.truncate


class RealtimeProtocol:
    """One ``/v1/realtime`` connection's state: ids of items and responses."""

    def __init__(
        self, session_id: str, output_rate: int, limits: Limits | None = None, resume: str | None = None
    ) -> None:
        self.session_id = session_id
        self.resume = resume  # ?session=ID in the URL: a stored conversation to go on with
        self.limits = limits or Limits()
        self.instructions: str | None = None
        self._events = 0
        self._to_24k = None if output_rate == RATE else soxr.ResampleStream(output_rate, RATE, 1, dtype="float32")
        self._user_items: dict[int, str] = {}  # utterance -> item id
        self._responses: dict[int, _Reply] = {}  # response -> its ids and what was sent
        self._last_item: str | None = None
        self._stable = ""  # the partial transcript already sent as deltas
        self._cancelling = False

    # -- helpers -------------------------------------------------------------

    def _event(self, kind: str, **fields: Any) -> Send:
        self._events += 1
        body = {"type": kind, "event_id": f"event_{self._events}", **fields}
        return send_json(body)

    def error(self, code: str, message: str, fatal: bool = False, t: float | None = None) -> list[Send]:
        kind = "server_error" if code in ("pipeline", "internal") else "invalid_request_error"
        return [self._event("error", error={"type": kind, "code": code, "message": message, "param": None})]

    def _session(self) -> dict[str, Any]:
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": f"sess_{self.session_id}",
            "model": "voice-pipeline",
            "output_modalities": ["audio"],
            "instructions": self.instructions or "",
            "audio": {
                "input": {
                    "format": FORMAT,
                    "transcription": {"model": "whisper"},
                    "turn_detection": {"type": "server_vad", "create_response": True, "interrupt_response": True},
                },
                "output": {"format": FORMAT, "voice": "piper"},
            },
        }

    # -- client -> server ----------------------------------------------------

    def start(self) -> list[Action]:
        return [Configure(RATE, acks=False, lead_s=self.limits.lead_s, resume=self.resume)]

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
        return out

    def receive_binary(self, data: bytes) -> list[Action]:
        return self.error("invalid_request", "the Realtime API sends JSON text frames, not binary ones")

    def receive_text(self, text: str) -> list[Action]:
        message = parse_json_object(text)
        if isinstance(message, str):
            return self.error("invalid_json", message)
        kind = message["type"]
        handler = {
            "session.update": self._session_update,
            "input_audio_buffer.append": self._append,
            "input_audio_buffer.commit": self._commit,
            "input_audio_buffer.clear": lambda m: [self._event("input_audio_buffer.cleared")],
            "response.cancel": lambda m: [CancelReply()],
            "response.create": lambda m: [],  # replies start on their own at each endpoint
            "conversation.item.truncate": self._truncate,
        }.get(kind)
        if handler is None:
            if kind == "conversation.item.create":
                return self.error("unsupported", "only spoken input is supported (input_audio_buffer.append)")
            return self.error("unknown_type", f"unknown or unsupported event type {kind[:60]!r}")
        return handler(message)

    def _session_update(self, m: dict[str, Any]) -> list[Action]:
        session = m.get("session")
        if not isinstance(session, dict):
            return self.error("invalid_message", "session.update needs a 'session' object")
        audio = session.get("audio") or {}
        if not isinstance(audio, dict):
            return self.error("invalid_message", "'session.audio' is an object")
        for side in ("input", "output"):
            side_cfg = audio.get(side) or {}
            if not isinstance(side_cfg, dict):
                return self.error("invalid_message", f"'session.audio.{side}' is an object")
            fmt = side_cfg.get("format")
            if fmt is not None and (
                not isinstance(fmt, dict) or fmt.get("type") != "audio/pcm" or fmt.get("rate", RATE) != RATE
            ):
                return self.error("unsupported_rate", f"{side} audio is audio/pcm at {RATE} Hz only, not {fmt}")
        instructions = session.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            return self.error("invalid_message", "'instructions' is a string")
        if instructions is not None:
            self.instructions = instructions
        configure = Configure(RATE, acks=False, lead_s=self.limits.lead_s, instructions=instructions)
        return [configure, self._event("session.updated", session=self._session())]

    def _append(self, m: dict[str, Any]) -> list[Action]:
        audio = m.get("audio")
        if not isinstance(audio, str):
            return self.error("invalid_message", "input_audio_buffer.append needs base64 'audio'")
        try:
            data = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            return self.error("invalid_message", "'audio' is not valid base64")
        if len(data) % 2:
            return self.error("odd_length", f"PCM16 audio has an even length, not {len(data)} bytes")
        return [AudioIn(pcm16_to_float(data))] if data else []

    def _commit(self, m: dict[str, Any]) -> list[Action]:
        return [self._event("input_audio_buffer.committed", item_id=self._last_item, previous_item_id=None)]

    def _truncate(self, m: dict[str, Any]) -> list[Action]:
        item_id, end = m.get("item_id"), m.get("audio_end_ms")
        if not isinstance(end, int) or isinstance(end, bool) or end < 0:
            return self.error("invalid_message", "'audio_end_ms' is an integer >= 0")
        for response, r in self._responses.items():
            if r.item_id == item_id:
                return [TruncateReply(response, end)]
        return self.error("item_truncate_invalid_item_id", f"no assistant item {str(item_id)[:60]!r}")

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
        if self._to_24k is not None:
            samples = self._to_24k.resample_chunk(samples)
        delta = base64.b64encode(float_to_pcm16(samples)).decode()
        return [self._event("response.output_audio.delta", **self._where(r), delta=delta)]

    @staticmethod
    def _where(r: _Reply) -> dict[str, Any]:
        return {"response_id": r.id, "item_id": r.item_id, "output_index": 0, "content_index": 0}

    def event(self, event: Event) -> list[Send]:
        """A pipeline event as the Realtime events the client is sent (none for the server's own)."""
        handler = EVENT_HANDLERS.get(type(event))
        return handler(self, event) if handler is not None else []

    def _on_error(self, e: Error) -> list[Send]:
        return self.error("pipeline", f"{e.where}: {e.message}")

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
        n = e.response
        r = _Reply(f"resp_{n}_{self.session_id[:8]}", f"item_a{n}_{self.session_id[:8]}")
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
        if r is None:
            return []
        interrupted = e.interrupted
        transcript = e.text
        part = {"type": "audio", "transcript": transcript}
        status = "incomplete" if interrupted else "completed"
        item = {"id": r.item_id, "object": "realtime.item", "type": "message", "role": "assistant",
                "status": status, "content": [{"type": "output_audio", "transcript": transcript}]}  # fmt: skip
        response: dict[str, Any] = {
            "id": r.id,
            "object": "realtime.response",
            "status": "cancelled" if interrupted else "completed",
            "output": [item],
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
    BargeIn: RealtimeProtocol._on_barge_in,
    Truncate: RealtimeProtocol._on_truncate,
    TurnEnd: RealtimeProtocol._on_turn_end,
}
