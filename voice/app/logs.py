"""Structured logs: one JSON object per line, for the pipeline's events and its own logs.

``--log-json`` installs :class:`JsonFormatter` on the root logger and
:func:`event_logger` turns each pipeline event into a log record of the
``voice.events`` logger, so a log shipper sees events and errors in one
stream: ``{"ts": ..., "level": "INFO", "logger": "voice.events", "session":
..., "t": 12.34, "type": "barge_in", ...}``, the event as ``events.jsonl``
has it (:meth:`~core.events.Event.to_json`) inside the record.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from core.events import Error, Event, event_from_json

EventSink = Callable[[Event], None]
EVENTS = "voice.events"
RECORD = ("ts", "level", "logger", "session")  # what a log record adds around an event


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
        }
        event = getattr(record, "event", None)
        if isinstance(event, dict):
            entry.update(event)
        else:
            entry["message"] = record.getMessage()
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def event_logger(session: str) -> EventSink:
    """A sink that logs each event of ``session`` (errors at ERROR, the rest at INFO)."""
    log = logging.getLogger(EVENTS)

    def sink(event: Event) -> None:
        level = logging.ERROR if isinstance(event, Error) else logging.INFO
        if log.isEnabledFor(level):
            log.log(level, "%s", event.type, extra={"event": {"session": session, **event.to_json()}})

    return sink


def read_records(text: str) -> list[dict[str, Any]]:
    """The pipeline events' records in a ``--log-json`` log, as written (``ts`` and
    ``session`` included); other lines and records are skipped."""
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("logger") == EVENTS:
                out.append(record)
    return out


def read_events(text: str) -> list[Event]:
    """The pipeline events in a ``--log-json`` log (other lines and records are skipped).

    Raises :class:`~core.events.EventError` on an event record that is no known event.
    """
    return [event_from_json({k: v for k, v in r.items() if k not in RECORD}) for r in read_records(text)]


def fan_out(*sinks: EventSink) -> EventSink:
    def sink(event: Event) -> None:
        for s in sinks:
            s(event)

    return sink


def use_json_logs(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
