"""Tools the assistant can call (issue 16): see :mod:`voice.tools.registry`."""

from voice.tools.loading import load_tools
from voice.tools.registry import (
    DEFAULT_TIMEOUT_S,
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
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "ToolOptions",
    "ToolResult",
    "Tools",
    "load_tools",
    "tool",
]
