"""What the server answers over plain HTTP: the browser page's files (``transport/web/``) and ``/health``."""

from __future__ import annotations

import json
import mimetypes
from pathlib import Path
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Response

WEB_ROOT = Path(__file__).parent / "web"


def response(status: int, reason: str, kind: str, body: bytes, cache: str) -> Response:
    """An HTTP response with a body of ``kind`` (its Content-Type) and its Cache-Control."""
    headers = Headers([("Content-Type", kind), ("Content-Length", str(len(body))), ("Cache-Control", cache)])
    return Response(status, reason, headers, body)


def static_file(connection: ServerConnection, path: str) -> Response:
    """The file of ``WEB_ROOT`` at ``path`` (``/``: index.html), never one outside it; else 404."""
    name = "index.html" if path in ("", "/") else path.lstrip("/")
    try:
        file = (WEB_ROOT / name).resolve()
        found = len(name) <= 255 and WEB_ROOT.resolve() in file.parents and file.is_file()
    except (OSError, ValueError):  # a NUL byte, a name too long for the file system
        found = False
    if not found:
        return connection.respond(404, "not found\n")
    body = file.read_bytes()
    kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    if kind.startswith("text/") or kind.endswith("javascript"):
        kind += "; charset=utf-8"
    return response(200, "OK", kind, body, "no-cache")


def health_response(health: dict[str, Any]) -> Response:
    """``GET /health``: 200 while a new session is welcome here; 503 when full or draining (a front door skips it)."""
    body = (json.dumps(health) + "\n").encode()
    if health["status"] == "ready":
        return response(200, "OK", "application/json", body, "no-store")
    return response(503, "Service Unavailable", "application/json", body, "no-store")
