"""Reading what a client sends: one parse, one schema, one kind of refusal.

Every dialect (``/ws``, Realtime, Twilio Media Streams) reads every text
frame through :func:`read_message` before anything acts on it. A message is
a JSON object with a string ``type`` (Twilio's: ``event``); the type picks a
schema (a :class:`msgspec.Struct` of the dialect's own module) and the whole
message is checked against it in the same pass, with its sizes
and ranges. Whatever fails is an :class:`Invalid`: a stable code and a text
safe to send back, which names where in the message it failed and quotes at
most :data:`MAX_QUOTE` characters of what the client sent, escaped. Nothing
here raises on client input, and nothing names the server's internals.

Limits: a message is at most ``Limits.max_message_bytes`` (the WebSocket
layer closes with 1009 before it is read); nesting is bounded by the
decoder (a message nested deeper than it allows, about 900 levels, is
``invalid_json``; ours nest 5 deep); integers are 64-bit; strings are UTF-8
without lone surrogates; each free-text field has its own length limit in
its schema.

Text that is not Unicode (a lone surrogate, ``"\ud800"``, legal JSON syntax
but no character) is refused with the whole message, never cleaned: nothing
of a message is acted on unless all of it is text every later stage (the
tokenizer, the store, the log) can encode, and a cleaned value (a DTMF key,
an id) would be one the client never sent. msgspec refuses the escape
itself; a ``str`` that already holds one (no WebSocket frame can: they are
UTF-8) is refused here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

MAX_QUOTE = 60  # characters of a client's value an error may quote
TOO_DEEP = "not JSON this server reads: nested too deeply"


@dataclass(frozen=True)
class Invalid:
    """Why a message is not acted on: sent back as one ``error`` event."""

    code: str  # invalid_json, unknown_type or invalid_message (docs/protocol.md)
    message: str  # safe to send: no more than MAX_QUOTE characters of the client's input
    param: str | None = None  # where it failed, as a dotted path ("session.audio.input.format")
    event_id: str | None = None  # the client's own id of the message (Realtime), when it gave a usable one


class _Envelope(msgspec.Struct):
    """What every message has, read first to pick its schema."""

    type: str
    event_id: Any = None  # Realtime clients name their events; anything else is ignored here


class _EventEnvelope(msgspec.Struct):
    """Twilio Media Streams' envelope: the type is named ``event``."""

    event: str


_ENVELOPES = {"type": msgspec.json.Decoder(_Envelope), "event": msgspec.json.Decoder(_EventEnvelope)}
NOT_TEXT = "not JSON this server reads: a string holds a lone surrogate (\\ud800-\\udfff)"
_DECODERS: dict[type, msgspec.json.Decoder] = {}
_AT_PATH = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)


def quote(value: object, limit: int = MAX_QUOTE) -> str:
    """``value`` for an error text: a JSON string of at most ``limit`` characters, ASCII-escaped."""
    text = value if isinstance(value, str) else type(value).__name__
    cut = text[:limit]
    return json.dumps(cut) + ("…" if len(text) > limit else "")


def read_message(text: str, schemas: Mapping[str, type[msgspec.Struct]], tag: str = "type") -> msgspec.Struct | Invalid:
    """The message as the schema its ``tag`` field (``type``, or Twilio's ``event``) names,
    or why it cannot be acted on. Never raises on what a client sent."""
    try:
        head = _ENVELOPES[tag].decode(text)
    except msgspec.ValidationError:
        return Invalid("invalid_json", f"a message is a JSON object with a string '{tag}'")
    except msgspec.DecodeError as e:
        return Invalid("invalid_json", _not_json(e))
    except RecursionError:
        return Invalid("invalid_json", TOO_DEEP)
    except UnicodeEncodeError:
        return Invalid("invalid_json", NOT_TEXT)
    kind = getattr(head, tag)
    raw_id = getattr(head, "event_id", None)
    event_id = raw_id if isinstance(raw_id, str) and len(raw_id) <= 64 else None
    schema = schemas.get(kind)
    if schema is None:
        return Invalid("unknown_type", f"unknown message type {quote(kind)}", tag, event_id)
    decoder = _DECODERS.get(schema)
    if decoder is None:
        decoder = _DECODERS[schema] = msgspec.json.Decoder(schema)
    try:
        return decoder.decode(text)
    except msgspec.ValidationError as e:
        what, param = _where(str(e))
        return Invalid("invalid_message", f"{kind}: {what}" + (f" (at {param})" if param else ""), param, event_id)
    except RecursionError:  # an ignored field nested too deeply
        return Invalid("invalid_json", TOO_DEEP, None, event_id)


def _not_json(e: msgspec.DecodeError) -> str:
    reason = str(e)
    if reason == "Input data was truncated":  # also what the decoder says of a lone surrogate escape
        reason = "it ends too early, or a string holds a lone surrogate (\\ud800-\\udfff)"
    return f"not JSON: {reason[:120]}"


def _where(error: str) -> tuple[str, str | None]:
    """msgspec's "Expected `int`, got `str` - at `$.a.b`" as ("expected int, got str", "a.b").

    The schema's own words name types and our field names; a value the
    client sent (an enum's) is cut to MAX_QUOTE characters.
    """
    match = _AT_PATH.match(error)
    what, path = (match["what"], match["path"]) if match else (error, None)
    if what.startswith(("Invalid enum value ", "Invalid value ")):
        head, _, value = what.partition(" value ")
        what = f"{head} value {quote(value.strip(chr(39)))}"
    what = what.replace("`bytes`", "base64 `str`").replace("`", "")
    param = path.lstrip(".") if path else None
    if param is not None and len(param) > 120:
        param = param[:120] + "…"
    return what[:200], param or None
