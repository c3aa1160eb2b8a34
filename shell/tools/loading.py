"""Tools from where the command line names them: ``builtin``, or a Python file (``--tools``)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from shell.tools import builtin
from shell.tools.registry import ToolDefinitionError, Tools


def load_tools(sources: Iterable[str]) -> Tools:
    """``builtin`` or a path to a Python file, each; raises :class:`ToolDefinitionError` (one line)."""
    tools = Tools()
    for source in sources:
        if source == "builtin":
            functions, where = [getattr(builtin, n) for n in builtin.__all__], "builtin"
        else:
            functions, where = _functions_of(Path(source)), source
        for fn in functions:
            tools.add(fn, where)
    return tools


def import_file(path: Path, what: str, error: type[ValueError]) -> ModuleType:
    """A person's Python file (``what``: "tools file", "agent file") run as a module of its own; what
    stops it is one line: ``error`` naming the file (and the line)."""
    if not path.is_file():
        raise error(f"{path}: no such {what}")
    prefix = "voice_" + what.split()[0]
    name = f"{prefix}_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise error(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and typing look their module up
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise error(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:
        message = str(e).splitlines()[0] if str(e) else ""
        raise error(f"{path}: importing it failed: {type(e).__name__}: {message}") from None
    return module


def _functions_of(path: Path) -> list[Callable[..., Any]]:
    module = import_file(path, "tools file", ToolDefinitionError)
    names = getattr(module, "__all__", None)
    if not isinstance(names, list | tuple) or not names:
        raise ToolDefinitionError(f"{path}: lists no tools: name its tool functions in __all__")
    missing = [n for n in names if not callable(getattr(module, n, None))]
    if missing:
        raise ToolDefinitionError(f"{path}: __all__ names {', '.join(missing)}, which is not a function in it")
    return [getattr(module, n) for n in names]
