"""The OpenAI Realtime dialect (``/v1/realtime``), without I/O: a small package.

- :mod:`~transport.realtime.messages`: the client events' schemas (read by ``transport/wire.py``) and the audio formats;
- :mod:`~transport.realtime.client_events`: what each client event asks, as the connection's actions;
- :mod:`~transport.realtime.server_events`: the pipeline's events as the Realtime events the client is sent;
- :mod:`~transport.realtime.tools`: the client's own tools, checked and offered to the model;
- :mod:`~transport.realtime.dialect`: :class:`RealtimeProtocol`, one connection's state, made of the two halves.

Everything other code imports from ``transport.realtime`` is re-exported here.
"""

from transport.realtime.dialect import RealtimeProtocol
from transport.realtime.messages import (
    CLIENT_EVENTS,
    FORMAT,
    G711,
    MAX_INSTRUCTIONS,
    RATE,
    AudioAppend,
    AudioClear,
    AudioCommit,
    AudioFormat,
    ClientEvent,
    InputAudio,
    ItemCreate,
    ItemTruncate,
    OutputAudio,
    ResponseCancel,
    ResponseCreate,
    SessionAudio,
    SessionConfig,
    SessionUpdate,
    TurnDetection,
)
from transport.realtime.server_events import EVENT_HANDLERS
from transport.realtime.tools import _function_specs

__all__ = [
    "CLIENT_EVENTS",
    "EVENT_HANDLERS",
    "FORMAT",
    "G711",
    "MAX_INSTRUCTIONS",
    "RATE",
    "AudioAppend",
    "AudioClear",
    "AudioCommit",
    "AudioFormat",
    "ClientEvent",
    "InputAudio",
    "ItemCreate",
    "ItemTruncate",
    "OutputAudio",
    "RealtimeProtocol",
    "ResponseCancel",
    "ResponseCreate",
    "SessionAudio",
    "SessionConfig",
    "SessionUpdate",
    "TurnDetection",
    "_function_specs",
]
