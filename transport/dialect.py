"""What a dialect is to the server: the one type the three of them share.

A dialect is the pure half of a network transport: what its client sends
comes in as text or binary frames and goes out as :data:`Action` values; the
pipeline's events and reply audio go out as the messages the client is sent.
It never reads a socket or a clock; the connection (``transport/connection.py``)
does, the same for every dialect. Three implement it: our protocol
(``/ws`` and WebRTC's data channel, :class:`transport.protocol.VoiceProtocol`),
OpenAI Realtime (:class:`transport.realtime.RealtimeProtocol`) and Twilio
Media Streams (:class:`transport.twilio.TwilioProtocol`). Each reads its text
frames through ``transport/wire.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from core.events import Event
from transport.protocol import Action, Send, TruncateReply


@runtime_checkable
class Dialect(Protocol):
    """One connection's dialect state. Nothing here raises on what a client sent."""

    session_id: str

    def start(self) -> Sequence[Action]:
        """Actions when the connection opens (a dialect whose client speaks first: none)."""
        ...

    def receive_text(self, text: str) -> Sequence[Action]:
        """A text frame from the client: what to do, or the error to send back (or to log)."""
        ...

    def receive_binary(self, data: bytes) -> Sequence[Action]:
        """A binary frame from the client."""
        ...

    def ready(self, session_id: str, history: list[dict[str, Any]]) -> Sequence[Action]:
        """The session exists (``session_id``, maybe a stored one with its ``history``): what to tell the client."""
        ...

    def event(self, event: Event) -> Sequence[Action]:
        """A pipeline event as what the client is sent (none for the server's own)."""
        ...

    def audio(self, samples: np.ndarray, response: int | None) -> Sequence[Send]:
        """Reply audio (float32 at the output rate) of reply ``response`` as messages."""
        ...

    def error(self, code: str, message: str, fatal: bool = False, t: float | None = None) -> Sequence[Send]:
        """An error as the dialect says it (a dialect whose client reads none: logged, nothing sent)."""
        ...

    def truncated(self, request: TruncateReply, text: str | None) -> Sequence[Send]:
        """The answer to the client's own truncation of a reply (``text``: what remains; None: unknown)."""
        ...
