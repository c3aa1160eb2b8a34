"""The tools API for a person's own tools files: ``from voice.tools import tool``.

The machinery lives in :mod:`shell.tools` (the session runs the tools); this is the name
users import, kept stable while the folders below it move.
"""

from shell.tools import (
    DEFAULT_TIMEOUT_S,
    Tool,
    ToolContext,
    ToolDefinitionError,
    ToolOptions,
    ToolResult,
    Tools,
    load_tools,
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
