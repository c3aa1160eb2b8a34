"""Tools the assistant can call (issue 16): see :mod:`shell.tools.registry`. A person's tools
file imports them as ``voice.tools`` (voice/tools.py).
"""

from shell.tools.loading import load_tools
from shell.tools.registry import (
    DEFAULT_TIMEOUT_S,
    Say,
    Tool,
    ToolContext,
    ToolDefinitionError,
    ToolOptions,
    ToolResult,
    Tools,
    tool,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "Say",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "ToolOptions",
    "ToolResult",
    "Tools",
    "load_tools",
    "tool",
]
