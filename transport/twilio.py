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

Twilio reads nothing we could say about an error: bad frames are logged and dropped.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from typing import Any

import numpy as np

from transport import g711
from transport.protocol import (
    Action,
    AudioIn,
    Close,
    Configure,
    Limits,
    PlayedReport,
    Send,
    TruncateReply,
    UserText,
)
from voice.core.events import Event, PlaybackStopped

log = logging.getLogger("voice.server.twilio")

# Reply audio sent ahead of what the caller heard: Twilio buffers it; at a barge-in ``clear``
# drops it. Larger than /ws's default: the marks come back over the phone network's delay.
LEAD_S = 0.3


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
        try:
            message = json.loads(text)
            kind = message["event"]
        except (ValueError, KeyError, TypeError):
            log.info("session %s: not a Media Streams message: %.80r", self.id, text)
            return []
        handler = getattr(self, f"_on_{kind}", None) if isinstance(kind, str) else None
        if handler is None:
            log.info("session %s: unknown Media Streams event %.40r: ignored", self.id, kind)
            return []
        try:
            return handler(message)
        except (KeyError, TypeError, ValueError, binascii.Error) as e:
            log.info("session %s: a malformed %r message (%s): dropped", self.id, kind, e)
            return []

    def _on_connected(self, message: dict[str, Any]) -> list[Action]:
        return []

    def _on_start(self, message: dict[str, Any]) -> list[Action]:
        if self.configured is not None:
            return []
        start = message["start"]
        fmt = start.get("mediaFormat") or {}
        if fmt and (fmt.get("encoding"), int(fmt.get("sampleRate", 8000))) != ("audio/x-mulaw", 8000):
            log.warning("session %s: media format %s is not mu-law at 8 kHz: hanging up", self.id, fmt)
            return [Close(1003, "only audio/x-mulaw at 8000 Hz is spoken here")]
        self.stream_sid = str(start.get("streamSid") or message.get("streamSid") or "")
        parameters = {str(k): str(v) for k, v in dict(start.get("customParameters") or {}).items()}
        # Twilio's start message does not carry the caller's number: the TwiML passes it as a
        # <Parameter name="From" value="{{From}}"/> (README, Phone calls).
        caller = next((parameters[k] for k in ("From", "from", "caller") if parameters.get(k)), None)
        self.call = {
            "channel": "twilio",
            "caller": caller,
            "call_sid": start.get("callSid"),
            "stream_sid": self.stream_sid,
            "account_sid": start.get("accountSid"),
            "custom_parameters": parameters,
        }
        log.info("session %s: call %s from %s, stream %s", self.id, self.call["call_sid"], caller, self.stream_sid)
        self.configured = Configure(g711.G711_RATE, acks=True, lead_s=LEAD_S, call=True, meta=self.call)
        return [self.configured]

    def _on_media(self, message: dict[str, Any]) -> list[Action]:
        media = message["media"]
        if self.configured is None or media.get("track", "inbound") not in ("inbound", "inbound_track"):
            return []
        payload = base64.b64decode(media["payload"], validate=True)
        if len(payload) > self.limits.max_frame_bytes:
            log.info("session %s: a media frame of %d bytes is over the limit: dropped", self.id, len(payload))
            return []
        return [AudioIn(g711.decode(payload))] if payload else []

    def _on_mark(self, message: dict[str, Any]) -> list[Action]:
        sent = int(message["mark"]["name"])
        if sent <= self._ignore_upto or sent > self._sent:
            return []  # pending at a clear (echoed at once, played or not), or not one of ours
        played = sent - self._dropped
        if played <= self._played:
            return []
        self._played = played
        return [PlayedReport(self._played, self._dropped)]

    def _on_dtmf(self, message: dict[str, Any]) -> list[Action]:
        digit = str(message["dtmf"]["digit"])[:1]
        if not digit or self.configured is None:
            return []
        self.digits.append(digit)
        log.info("session %s: the caller pressed %s", self.id, digit)
        return [UserText(f"(The caller pressed {digit} on the phone's keypad.)")]

    def _on_stop(self, message: dict[str, Any]) -> list[Action]:
        return [Close(1000, "the call ended")]

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
