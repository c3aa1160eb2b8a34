"""The server's log, read after the attack: its warnings and tracebacks, grouped by kind. Pure."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

# -- the server's log --------------------------------------------------------------

_ID = re.compile(r"\b[0-9a-f]{8,}\b|\b\d+(\.\d+)?\b")


def log_summary(text: str, top: int = 20) -> dict[str, Any]:
    """Tracebacks, ERROR and WARNING lines in the log (lines alike up to ids and numbers counted as one)."""
    lines = text.splitlines()
    errors = [ln for ln in lines if ln.startswith("ERROR") or " ERROR " in ln[:40]]
    warnings = [ln for ln in lines if ln.startswith("WARNING") or " WARNING " in ln[:40]]
    exceptions = Counter(_exception_line(lines, i) for i, ln in enumerate(lines) if ln.startswith("Traceback"))
    return {
        "tracebacks": sum(1 for ln in lines if ln.startswith("Traceback")),
        "error_lines": len(errors),
        "warning_lines": len(warnings),
        "errors": Counter(_ID.sub("#", ln[:200]) for ln in errors).most_common(top),
        "exceptions": exceptions.most_common(top),
    }


def _exception_line(lines: list[str], i: int) -> str:
    """The exception a traceback starting at line ``i`` ends with: its first line back at the margin."""
    for line in lines[i + 1 :]:
        if line and not line[0].isspace():
            return _LONG_QUOTE.sub("'…'", line.strip())[:160]  # one name for the same error on any long path
    return "(cut off)"


_LONG_QUOTE = re.compile(r"'[^']{40,}'?")
