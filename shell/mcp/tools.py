"""An MCP server's tool, offered to the model and run by the tool runner as our own tools are.

It has what :class:`shell.tools.Tool` has: a name, a description, the JSON
schema of its arguments (the server's ``inputSchema``), options (the server's
timeout and barge-in policy) and :meth:`McpTool.run`. A call's arguments are
checked against the server's schema before it goes out, by the one checker
of tool arguments (``shell/tools/arguments.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from shell.mcp.connection import McpConnection, McpUnavailable
from shell.mcp.results import result_text
from shell.tools.arguments import SchemaArguments
from shell.tools.registry import ToolContext, ToolOptions, ToolResult, function_spec, tidy_schema


@dataclasses.dataclass(frozen=True)
class McpTool:
    name: str  # as offered to the model: the server's, or ``server_name`` where names clash
    remote_name: str  # as the server knows it
    description: str
    parameters: dict[str, Any]
    options: ToolOptions
    connection: McpConnection = dataclasses.field(repr=False, compare=False)
    _checker: SchemaArguments = dataclasses.field(repr=False, compare=False)

    @classmethod
    def offer(cls, connection: McpConnection, listed: Any, name: str) -> McpTool:
        """Server ``connection``'s tool as it listed it (``listed``: the SDK's Tool), offered as ``name``.
        Raises ValueError if its input schema is not one that arguments can be checked against."""
        import jsonschema

        schema = tidy_schema(dict(listed.input_schema or {"type": "object"}))
        schema.pop("$schema", None)  # checked as draft 2020-12, whatever draft it names
        try:
            checker = SchemaArguments(schema)
        except jsonschema.SchemaError as e:
            raise ValueError(f"its inputSchema is not a JSON schema ({e.message})") from None
        spec = connection.spec
        options = ToolOptions(spec.timeout_s, cancel_on_barge_in=spec.on_barge_in == "cancel")
        description = (listed.description or listed.title or listed.name).strip()
        return cls(name, listed.name, description, schema, options, connection, checker)

    @property
    def server(self) -> str:
        return self.connection.name

    @property
    def source(self) -> str:
        return f"mcp {self.server}"

    def spec(self) -> dict[str, Any]:
        return function_spec(self.name, self.description, self.parameters)

    def arguments(self, text: str) -> dict[str, Any]:
        """The call's arguments, parsed and checked against the server's schema; raises ValueError."""
        value = self._checker.check(text)
        if not isinstance(value, dict):
            raise ValueError("the arguments must be a JSON object")
        return value

    async def run(
        self, arguments: dict[str, Any], context: ToolContext | None, clock: Callable[[], float] = time.monotonic
    ) -> ToolResult:
        """The server's answer within the timeout. A timeout cancels the request on the server
        (and has the connection check the server is not hung); a server that is down or stops
        answers with why, so that the model can tell the person."""
        start = clock()
        timeout = self.options.timeout_s
        try:
            result = await asyncio.wait_for(self.connection.call(self.remote_name, arguments), timeout)
        except TimeoutError:
            self.connection.timed_out()
            said = f"{self.name} (on the {self.server} server) did not finish within {timeout:g} s"
            return ToolResult("timeout", said, clock() - start)
        except McpUnavailable as e:
            return ToolResult("error", f"{self.name} could not be run: {e}", clock() - start)
        except Exception as e:  # the server's error for the request (not the tool's: that is a result)
            why = getattr(e, "message", None) or f"{type(e).__name__}: {e}"
            return ToolResult("error", f"{self.name} failed on the {self.server} server: {why}", clock() - start)
        failed, text = result_text(result)
        if failed:
            return ToolResult("error", f"{self.name} failed: {text}", clock() - start)
        return ToolResult("ok", text, clock() - start)
