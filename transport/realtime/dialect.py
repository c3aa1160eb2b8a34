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
from typing import Any

import numpy as np

from transport import g711
from transport.protocol import (
    Action,
    Configure,
    Limits,
    Send,
    TruncateReply,
    float_to_pcm16,
    send_json,
)
from transport.realtime.client_events import ClientEvents
from transport.realtime.messages import FORMAT, G711, RATE
from transport.realtime.server_events import ServerEvents, _Reply
from transport.resample import resampler
from transport.wire import MAX_QUOTE


def _format(kind: str) -> dict[str, Any]:
    return FORMAT if kind == "audio/pcm" else {"type": kind}


def _first_words(text: str) -> str:
    return text if len(text) <= MAX_QUOTE else text[:MAX_QUOTE] + "…"


class RealtimeProtocol(ClientEvents, ServerEvents):
    """One ``/v1/realtime`` connection's state: ids of items and responses."""

    def __init__(
        self,
        session_id: str,
        output_rate: int,
        limits: Limits | None = None,
        resume: str | None = None,
        semantic: bool = False,
        denoise: bool = False,
        agent: str | None = None,
    ) -> None:
        """``semantic``: the server ends turns with its end-of-turn model (Smart Turn and the
        words), which Realtime calls ``semantic_vad``; else by silence (``server_vad``).
        ``denoise``: the server suppresses noise unless asked not to (its ``--denoise``);
        ``agent``: the server's agent by that name (``?agent=NAME``; None: its default)."""
        self.session_id = session_id
        self.semantic = semantic
        # Realtime's input noise_reduction as the client last set it (None: off).
        self.noise_reduction: str | None = "near_field" if denoise else None
        # ?session=ID in the URL: a stored conversation to go on with (an id is at most 64 characters).
        self._bad_resume = resume is not None and not 0 < len(resume) <= 64
        self.resume = None if self._bad_resume else resume
        self.agent = agent  # ?agent=NAME in the URL: the server's agent by that name
        self.limits = limits or Limits()
        self.instructions: str | None = None
        self._events = 0
        self.output_rate = output_rate
        self._to_24k = resampler(output_rate, RATE)  # the reply as audio/pcm: this dialect's edge
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
                    "noise_reduction": None if self.noise_reduction is None else {"type": self.noise_reduction},
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
        return [
            Configure(self._input_rate(), acks=False, lead_s=self.limits.lead_s, resume=self.resume, agent=self.agent)
        ]

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
                samples = self._to_24k(samples)
            payload = float_to_pcm16(samples)
        if not payload:  # the resampler kept this chunk back: nothing to send yet
            return []
        delta = base64.b64encode(payload).decode()
        return [self._event("response.output_audio.delta", **self._where(r), delta=delta)]
