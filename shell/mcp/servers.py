"""The MCP servers of a run, their tools kept in the run's :class:`~shell.tools.Tools`.

Started together before the engines load, so that a server that cannot start
stops start-up in a second, with one line, rather than after a minute of
loading. Their tools are offered beside the session's own under the names
the servers give them; where a name is taken twice (by our own tool, or by
two servers) each server's is offered as ``server_name``. The names are
worked out again, for all servers, whenever one lists its tools anew.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import re
from collections.abc import Iterable

from shell.mcp.connection import McpConnection
from shell.mcp.spec import McpServerSpec
from shell.mcp.tools import McpTool
from shell.tools import Tools

log = logging.getLogger("voice.mcp")

START_TIMEOUT_S = 30.0  # a server started with npx or uvx may fetch itself first


class McpStartError(RuntimeError):
    """A server that could not be started or reached (one line: which, and why)."""


class McpServers:
    """``async with McpServers(specs, tools):`` the servers connected and their tools in ``tools``."""

    def __init__(self, specs: Iterable[McpServerSpec], tools: Tools, start_timeout_s: float = START_TIMEOUT_S) -> None:
        self.tools = tools
        self.start_timeout_s = start_timeout_s
        self.connections = [McpConnection(spec, self._listed) for spec in specs]
        self.skipped: list[str] = []  # tools offered by a server that could not be offered to the model

    async def __aenter__(self) -> McpServers:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect every server and list its tools; raises :class:`McpStartError` if one fails."""
        starts = [c.start(self.start_timeout_s) for c in self.connections]
        results = await asyncio.gather(*starts, return_exceptions=True)
        for connection, result in zip(self.connections, results, strict=True):
            if isinstance(result, BaseException):
                await self.close()
                raise McpStartError(f"--mcp {connection.spec.where}: cannot start: {result}") from None
        names = [c.name for c in self.connections]
        if len(set(names)) < len(names):
            await self.close()
            twice = sorted(n for n, k in collections.Counter(names).items() if k > 1)
            raise McpStartError(f"--mcp: two servers are named {', '.join(twice)}: give one another with name=")

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.connections))

    def summary(self) -> list[str]:
        """The start-up line: every tool offered, by where it came from (our own files, each
        server and where it runs); then a line per tool a server offered that could not be."""
        groups: dict[str, list[str]] = {}
        for t in self.tools:
            if not t.server:
                groups.setdefault(t.source or "own", []).append(t.name)
        for c in self.connections:
            offered = [t.name for t in self.tools if getattr(t, "connection", None) is c]
            groups[f"mcp {c.name}: {c.spec.where}"] = offered or ["no tools"]
        line = "; ".join(f"{', '.join(names)} ({where})" for where, names in groups.items())
        return [f"tools: {line}", *self.skipped]

    def _listed(self, connection: McpConnection) -> None:
        """A server listed its tools (at start, after a change, after a restart): offer them all anew.
        (A connection is named before it first lists, so every tool here has its server's name.)"""
        taken = collections.Counter(self.tools.own_names())
        for c in self.connections:
            taken.update({_safe(t.name) for t in c.tools})
        offered, self.skipped = [], []
        for c in self.connections:
            for listed in c.tools:
                name = _safe(listed.name)
                if taken[name] > 1:
                    name = f"{c.name}_{name}"[:64]
                try:
                    offered.append(McpTool.offer(c, listed, name))
                except ValueError as e:
                    self.skipped.append(f"mcp {c.name}: {listed.name} not offered: {e}")
        self.tools.set_server_tools(offered)
        for line in self.skipped:
            log.warning("%s", line)


def _safe(name: str) -> str:
    """A tool name the chat API takes (MCP allows dots and slashes; OpenAI's functions do not)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "tool"
