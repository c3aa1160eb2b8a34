"""Tools from MCP servers (issue 36): ``--mcp "COMMAND ARGS"``, ``--mcp URL``, ``--mcp FILE.json``.

- :mod:`~shell.mcp.spec`: what ``--mcp`` names (a server and its options), without I/O;
- :mod:`~shell.mcp.connection`: one server kept reachable (started, listed, restarted);
- :mod:`~shell.mcp.tools`: a server's tool, offered and run as our own tools are;
- :mod:`~shell.mcp.results`: a call's result as text the model can say;
- :mod:`~shell.mcp.servers`: a run's servers, their tools in the run's ``Tools``.
"""

from shell.mcp.servers import McpServers, McpStartError
from shell.mcp.spec import McpServerSpec, McpSpecError, parse_mcp

__all__ = ["McpServerSpec", "McpServers", "McpSpecError", "McpStartError", "parse_mcp"]
