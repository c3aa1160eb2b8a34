"""What an MCP tool's result is told to the model: text it can say (no I/O).

A result is a list of content blocks and, from newer servers, structured
content. Text blocks are kept as they are. What cannot be said (an image, a
recording, a file) is named in a few words, so that the model can tell the
person it got one. Structured content is used only when there is no text
(servers send the same data as JSON text too). The whole is capped: a 0.5B
model reading thousands of characters of JSON answers worse, and slower.
"""

from __future__ import annotations

import json
from typing import Any

MAX_RESULT_CHARS = 2000


def result_text(result: Any) -> tuple[bool, str]:
    """(is it an error, the text the model is told) of a ``CallToolResult``."""
    parts = [_block_text(block) for block in result.content or ()]
    text = "\n".join(p for p in parts if p and p.strip())
    if not text.strip() and result.structured_content is not None:
        text = said_value(result.structured_content)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS].rstrip() + " ... (the rest was cut)"
    return bool(result.is_error), text.strip() or "(no result)"


def said_value(value: Any) -> str:
    """A value as the model reads it best: a bare string or number, else compact JSON.
    ``{"result": x}``, how SDK servers wrap a plain return value, is ``x``."""
    if isinstance(value, dict) and list(value) == ["result"]:
        value = value["result"]
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def _compact(text: str) -> str:
    """JSON text (SDK servers indent a returned object) on one line: fewer tokens for the model."""
    if text[:1] not in "{[":
        return text
    try:
        return said_value(json.loads(text))
    except ValueError:
        return text


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return _compact(block.text)
    if kind == "image":
        return f"(an image, {block.mime_type}, that cannot be said)"
    if kind == "audio":
        return f"(a recording, {block.mime_type}, that cannot be played here)"
    if kind == "resource_link":
        return f"(a link to {block.name}: {block.uri})"
    if kind == "resource":
        inner = block.resource
        text = getattr(inner, "text", None)
        return text if isinstance(text, str) else f"(a file, {inner.uri})"
    return ""
