"""Structured logs: one JSON object per line, for the pipeline's events and its own logs.

``--log-json`` installs :class:`JsonFormatter` on the root logger and
:func:`event_logger` turns each pipeline event into a log record of the
``voice.events`` logger, so a log shipper sees events and errors in one
stream: ``{"ts": ..., "level": "INFO", "logger": "voice.events", "session":
..., "type": "barge_in", "t": 12.34, ...}``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

EventSink = Callable[[dict[str, Any]], None]
EVENTS = "voice.events"


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

    def sink(event: dict[str, Any]) -> None:
        level = logging.ERROR if event.get("type") == "error" else logging.INFO
        if log.isEnabledFor(level):
            log.log(level, "%s", event.get("type"), extra={"event": {"session": session, **event}})

    return sink


def read_events(text: str) -> list[dict[str, Any]]:
    """The pipeline events in a ``--log-json`` log (other lines and records are skipped)."""
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("logger") == EVENTS:
                out.append(record)
    return out


def fan_out(*sinks: EventSink) -> EventSink:
    def sink(event: dict[str, Any]) -> None:
        for s in sinks:
            s(event)

    return sink


def use_json_logs(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
