"""The client's own tools, as Realtime's ``session.update`` gives them: checked and put in the
shape the chat API takes them (the model is offered them; the client runs the calls). Their
parameters are checked by the one tool-argument checker (``shell/tools/arguments.py``), which
checks each call's arguments against them too."""

from __future__ import annotations

import re
from typing import Any

from shell.tools.arguments import schema_problem
from transport.wire import quote

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _function_specs(tools: list[dict[str, Any]]) -> list[dict[str, Any]] | str:
    """Realtime's tools (``{"type": "function", "name", "description", "parameters"}``) as the chat
    API takes them, or what is wrong with them."""
    specs = []
    for i, t in enumerate(tools):
        name = t.get("name")
        if t.get("type", "function") != "function":
            said = "only function tools are supported"
            if t.get("type") == "mcp":  # the server reaches no URL a client names; its own are --mcp
                said += " (MCP servers are the server's: python -m voice.run --serve --mcp ...)"
            return f"tools[{i}]: {said}, not {quote(str(t.get('type')))}"
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            return f"tools[{i}]: a function's name is 1-64 letters, digits, _ or -"
        parameters = t.get("parameters") or {"type": "object", "properties": {}}
        problem = schema_problem(parameters)
        if problem is not None:
            return f"tools[{i}] ({name}): parameters is not a JSON schema ({problem})"
        function = {"name": name, "description": str(t.get("description") or ""), "parameters": parameters}
        specs.append({"type": "function", "function": function})
    return specs
