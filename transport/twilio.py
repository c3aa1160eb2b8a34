"""Twilio Media Streams (``/telephony/twilio``): a phone call as a session.

A number is connected with TwiML ``<Connect><Stream url="wss://HOST/telephony/twilio"/>``
(README, Phone calls). Twilio then opens a WebSocket and sends JSON text frames: ``connected``,
``start`` (the stream's and the call's ids, the custom parameters), ``media`` (the caller's
audio: base64 mu-law at 8 kHz, 20 ms a frame), ``dtmf`` (a key pressed), ``mark`` (the echo of
one of ours) and ``stop`` (the call ended). We send ``media`` (the reply, the same format),
``mark`` after each chunk of it, and ``clear`` to flush what Twilio holds at a barge-in.

What the caller heard comes from the marks. Each chunk of reply audio is followed by a mark
named with the reply samples sent so far; Twilio echoes it once the chunk has played, and the
echo is a played report for the session's playback accounting (as ``played`` is on ``/ws``),
so a reply cut by the caller is stored as far as they heard it. At a barge-in we send
``clear``: Twilio drops what it holds and echoes the marks still pending at once, played or
not, so those echoes are ignored and everything not acknowledged before is counted dropped.
The history may thus lose the last chunk (at most the lead, 0.3 s) the caller did hear, never
hold one they did not.

Every frame is read through the one schema reader (``transport/wire.py``) with the schemas
below, Twilio's documented fields with their types (others are ignored). Twilio reads nothing
we could say about an error: a frame that fails its schema (wrong types, nesting too deep, a
string holding a lone surrogate, which is no text and is refused, never cleaned) is logged in
one line and dropped; nothing of it goes on.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Annotated, Any

import msgspec
import numpy as np

from core.events import Event, PlaybackStopped
from transport import g711
from transport.protocol import (
    Action,
    AudioIn,
    Close,
    Configure,
    Key,
    KeyPressed,
    Limits,
    PlayedReport,
    Send,
    TruncateReply,
)
from transport.wire import Invalid, quote, read_message

log = logging.getLogger("voice.server.twilio")

# Reply audio sent ahead of what the caller heard: Twilio buffers it; at a barge-in ``clear``
# drops it. Larger than /ws's default: the marks come back over the phone network's delay.
LEAD_S = 0.3

# -- Twilio's messages: the schema every text frame is read with (transport/wire.py) --

Sid = Annotated[str, msgspec.Meta(max_length=64)]  # Twilio's ids are 34 characters
Param = Annotated[str, msgspec.Meta(max_length=1024)]


class MediaFormat(msgspec.Struct, frozen=True, rename="camel"):
    encoding: Param | None = None
    sample_rate: int = 8000


class StartInfo(msgspec.Struct, frozen=True, rename="camel"):
    stream_sid: Sid | None = None
    call_sid: Sid | None = None
    account_sid: Sid | None = None
    custom_parameters: Annotated[dict[Param, Param], msgspec.Meta(max_length=64)] | None = None
    media_format: MediaFormat | None = None


class Media(msgspec.Struct, frozen=True):
    payload: bytes  # base64 mu-law, decoded by the schema
    track: Param = "inbound"


class MarkInfo(msgspec.Struct, frozen=True):
    name: Sid


class DtmfInfo(msgspec.Struct, frozen=True):
    digit: Key  # one key of a phone's keypad, all a ``dtmf`` message may put in a turn


class Message(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):  # Twilio names fields in camelCase
    stream_sid: Sid | None = None


class Connected(Message, frozen=True):
    pass


class Start(Message, frozen=True):
    start: StartInfo


class MediaMessage(Message, frozen=True):
    media: Media


class Mark(Message, frozen=True):
    mark: MarkInfo


class Dtmf(Message, frozen=True):
    dtmf: DtmfInfo


class Stop(Message, frozen=True):
    pass


MESSAGES: dict[str, type[Message]] = {
    "connected": Connected,
    "start": Start,
    "media": MediaMessage,
    "mark": Mark,
    "dtmf": Dtmf,
    "stop": Stop,
}


class TwilioProtocol:
    """One Media Streams connection's state: the call, and the marks in flight."""

    def __init__(self, session_id: str, output_rate: int, limits: Limits | None = None) -> None:
        self.session_id = session_id
        self.output_rate = output_rate
        self.limits = limits or Limits()
        self.configured: Configure | None = None
        self.stream_sid: str | None = None
        self.call: dict[str, Any] = {}  # callSid, accountSid, customParameters: the call's metadata
        self.digits: list[str] = []  # DTMF keys pressed, in order
        self._to_8k = g711.To8k(output_rate)
        self._sent = 0  # reply samples (at the output rate) sent to Twilio so far
        self._played = 0  # of those, played: acknowledged by a mark's echo
        self._dropped = 0  # of those, dropped by a clear before they were acknowledged
        self._ignore_upto = 0  # marks up to this many samples sent were pending at a clear

    # -- Twilio -> server ------------------------------------------------

    def start(self) -> list[Action]:
        return []  # Twilio speaks first (connected, start)

    def receive_binary(self, data: bytes) -> list[Action]:
        log.info("session %s: a binary frame (%d bytes); Twilio sends text only: dropped", self.id, len(data))
        return []

    @property
    def id(self) -> str:
        return self.session_id[:8]

    def receive_text(self, text: str) -> list[Action]:
        message = read_message(text, MESSAGES, tag="event")
        if isinstance(message, Invalid):
            log.info("session %s: a Media Streams message dropped: %s: %s", self.id, message.code, message.message)
            return []
        match message:
            case Start():
                return self._on_start(message)
            case MediaMessage():
                return self._on_media(message.media)
            case Mark():
                return self._on_mark(message.mark)
            case Dtmf():
                return self._on_dtmf(message.dtmf)
            case Stop():
                return [Close(1000, "the call ended")]
        return []  # connected: Twilio's hello, nothing to do

    def _on_start(self, message: Start) -> list[Action]:
        if self.configured is not None:
            return []
        start = message.start
        fmt = start.media_format
        if fmt is not None and fmt != MediaFormat() and (fmt.encoding, fmt.sample_rate) != ("audio/x-mulaw", 8000):
            said = {"encoding": fmt.encoding, "sampleRate": fmt.sample_rate}
            log.warning("session %s: media format %s is not mu-law at 8 kHz: hanging up", self.id, said)
            return [Close(1003, "only audio/x-mulaw at 8000 Hz is spoken here")]
        self.stream_sid = start.stream_sid or message.stream_sid or ""
        parameters = dict(start.custom_parameters or {})
        # Twilio's start message does not carry the caller's number: the TwiML passes it as a
        # <Parameter name="From" value="{{From}}"/> (README, Phone calls).
        caller = next((parameters[k] for k in ("From", "from", "caller") if parameters.get(k)), None)
        self.call = {
            "channel": "twilio",
            "caller": caller,
            "call_sid": start.call_sid,
            "stream_sid": self.stream_sid,
            "account_sid": start.account_sid,
            "custom_parameters": parameters,
        }
        log.info("session %s: call %s from %s, stream %s", self.id, self.call["call_sid"], caller, self.stream_sid)
        # No echo canceller on a call: the phone cancels its own speaker's echo (the network its
        # line echo), so ours would only learn an echo path of nothing, and until it had learnt
        # one (the first half second of the first reply) it held back a caller who spoke then.
        # <Parameter name="agent" value="NAME"/> in the TwiML: the agent this number's calls get.
        agent = parameters.get("agent") or None
        self.configured = Configure(
            g711.G711_RATE, acks=True, lead_s=LEAD_S, echo_cancel=False, call=True, meta=self.call, agent=agent
        )
        return [self.configured]

    def _on_media(self, media: Media) -> list[Action]:
        if self.configured is None or media.track not in ("inbound", "inbound_track"):
            return []
        if len(media.payload) > self.limits.max_frame_bytes:
            log.info("session %s: a media frame of %d bytes is over the limit: dropped", self.id, len(media.payload))
            return []
        return [AudioIn(g711.decode(media.payload))] if media.payload else []

    def _on_mark(self, mark: MarkInfo) -> list[Action]:
        if not mark.name.isascii() or not mark.name.isdigit():
            log.info("session %s: a mark %s is not one of ours: ignored", self.id, quote(mark.name))
            return []
        sent = int(mark.name)
        if sent <= self._ignore_upto or sent > self._sent:
            return []  # pending at a clear (echoed at once, played or not), or not one of ours
        played = sent - self._dropped
        if played <= self._played:
            return []
        self._played = played
        return [PlayedReport(self._played, self._dropped)]

    def _on_dtmf(self, dtmf: DtmfInfo) -> list[Action]:
        if self.configured is None:
            return []
        self.digits.append(dtmf.digit)
        log.info("session %s: the caller pressed %s", self.id, dtmf.digit)
        return [KeyPressed(dtmf.digit)]

    # -- server -> Twilio ----------------------------------------------------

    def ready(self, session_id: str, history: list[dict[str, Any]]) -> list[Send]:
        self.session_id = session_id
        return []  # nothing to tell Twilio: the caller hears the session

    def audio(self, samples: np.ndarray, response: int | None) -> list[Send]:
        """A chunk of reply audio (float32 at the output rate): a media message, then its mark."""
        if self.stream_sid is None or not len(samples):
            return []
        self._sent += len(samples)
        payload = g711.encode(self._to_8k(samples))
        if not payload:
            return []
        chunk = {"payload": base64.b64encode(payload).decode()}
        return [
            Send(json.dumps({"event": "media", "streamSid": self.stream_sid, "media": chunk})),
            Send(json.dumps({"event": "mark", "streamSid": self.stream_sid, "mark": {"name": str(self._sent)}})),
        ]

    def event(self, event: Event) -> list[Action]:
        if isinstance(event, PlaybackStopped) and self.stream_sid is not None:
            return self.clear()
        return []

    def clear(self) -> list[Action]:
        """Flush Twilio's buffer: what it held was never heard, and is reported dropped."""
        self._ignore_upto = self._sent
        self._dropped = self._sent - self._played
        clear = {"event": "clear", "streamSid": self.stream_sid}
        return [Send(json.dumps(clear)), PlayedReport(self._played, self._dropped)]

    def error(self, code: str, message: str, fatal: bool = False, t: float | None = None) -> list[Send]:
        log.info("session %s: %s: %s", self.id, code, message)  # Twilio reads none; the server closes if fatal
        return []

    def truncated(self, request: TruncateReply, text: str | None) -> list[Send]:
        return []
