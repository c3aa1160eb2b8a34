"""A reply's text read through one of vLLM's tool parsers, as the embedded engine streams it.

Small models write their calls in more forms than their chat template asks for. The parser
(``llama3_json`` for the bundled Qwen models) takes a call only where the reply starts with its
JSON object, so :func:`as_written` first reads past what the models were seen to put around it.
"""

from __future__ import annotations

from core.tool_calls import ToolCallDelta
from llm.base import Delta, LLMError


def as_written(raw: str) -> str | None:
    """The reply ``raw`` so far as the parser is to read it; None while what comes next decides.

    - An opening Markdown code fence (```json) and its line are dropped, and everything from the
      closing fence on (backticks that may begin one are held back): Qwen2.5-Coder-0.5B fenced its
      call so in 2 of 6 requests, the 1.5B fences its every call, pretty-printed.
    - A call written with its braces doubled, as in a Python format string
      (``{{"name": "calculate", "arguments": {...}}}``: Qwen2.5-Coder-1.5B, 2 of 8 requests), is
      read with one opening brace, and up to the end of the object that opens; the closing
      braces it doubled are dropped. Read as written, it was neither a call nor words: the reply
      was empty.
    """
    text = _unfenced(raw)
    if text is None:
        return None
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return text
    if stripped == "{":
        return None  # one brace, or the first of two
    if not stripped.startswith("{{"):
        return text
    single = stripped[1:]
    end = _object_end(single)
    return single if end is None else single[:end]


def _unfenced(raw: str) -> str | None:
    stripped = raw.lstrip()
    if not stripped.startswith("`"):
        return raw
    if "\n" not in stripped:
        return None if "```".startswith(stripped[:3]) else raw
    first, rest = stripped.split("\n", 1)
    if not first.startswith("```"):
        return raw
    end = rest.find("```")
    return rest[:end] if end >= 0 else rest.rstrip("`")


def _object_end(text: str) -> int | None:
    """Where the JSON object that ``text`` opens with ends (the index after its closing brace);
    None while it is open."""
    depth, quoted, escaped = 0, False, False
    for i, ch in enumerate(text):
        if quoted:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


class ToolCallReader:
    """One reply's text through vLLM's tool parser: the text to speak, and the calls' pieces.

    The parser is given the reply as :func:`as_written` reads it: past an opening code fence,
    with doubled braces single.
    """

    def __init__(self, parser, request) -> None:
        """``parser``: a vLLM tool parser for this reply; ``request``: the chat request it is told of."""
        self._parser = parser
        self._request = request
        self._raw = ""  # the reply as generated
        self._text = ""  # what the parser has been given of it
        self._ids: list[int] = []

    def read(self, delta: str, ids: list[int]) -> list[Delta | ToolCallDelta]:
        if not delta and not ids:
            return []
        self._raw += delta
        text = as_written(self._raw)
        if text is None or not text.startswith(self._text) or text == self._text:
            self._ids += ids
            return []
        delta, all_ids = text[len(self._text) :], self._ids + ids
        try:
            message = self._parser.extract_tool_calls_streaming(
                self._text, text, delta, self._ids, all_ids, ids, self._request
            )
        except Exception as e:  # the parser's own failure: the reply is unusable, as an engine error is
            raise LLMError(f"vLLM tool parser: {type(e).__name__}: {e}") from e
        self._text, self._ids = text, all_ids
        if message is None:
            return []
        out: list[Delta | ToolCallDelta] = [Delta(message.content, 0)] if message.content else []
        for call in message.tool_calls or []:
            function = call.function
            if isinstance(function, dict):  # some parsers hand over the model_dump
                name, arguments = function.get("name"), function.get("arguments")
            else:
                name, arguments = (function.name, function.arguments) if function is not None else (None, None)
            # No id: vLLM's is random (chatcmpl-tool-…), and the conversation names its calls itself.
            out.append(ToolCallDelta(call.index, None, name or None, arguments or ""))
        return out

    def finish(self, truncated: bool) -> list[ToolCallDelta]:
        """What the parser had read of the last call but not yet given out (as vLLM's server does).
        Not when the reply was cut off by ``max_tokens`` (``truncated``): the parser's reading of an
        unfinished object is lenient, and would pass off a call cut short as a whole one with its
        missing arguments dropped. Left as it is, its text does not parse, and it is never run."""
        parser = self._parser
        if truncated or not parser.prev_tool_call_arr or not parser.streamed_args_for_tool:
            return []
        rest = parser.get_remaining_unstreamed_args()
        return [ToolCallDelta(len(parser.prev_tool_call_arr) - 1, arguments=rest)] if rest else []
