"""The import graph shows the layers: no cycles between files, and each layer imports only the ones below it.

    voice.core            pure: turn-taking, sentences, playback accounting, hearing, history
    asr, tts, llm         the engines' adapters
    voice.tools           the tools the assistant can call (the person's own code among them)
    voice.shell           asyncio wiring: session, pump, device port, clock, engine loading
    transport             devices and servers: replay, sound card, WebSocket
    voice.app             the application: CLI, terminal, store, metrics, logs
    voice.bench           benchmark helpers
    voice.run, voice.history   the ``python -m`` entry points

Every import counts, those inside functions too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("voice", "asr", "llm", "tts", "transport")
LAYERS = [
    ("voice.core",),
    ("asr", "tts", "llm"),
    ("voice.tools",),
    ("voice.shell",),
    ("transport",),
    ("voice.app",),
    ("voice.bench",),
    ("voice.run", "voice.history", "voice"),
]
# What the pure core may import besides itself: no I/O, no engines, no clocks.
CORE_MAY_IMPORT = {
    "__future__",
    "collections",
    "dataclasses",
    "difflib",
    "enum",
    "math",
    "re",
    "typing",
    "numpy",
    "soxr",
    "logging",
}


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _imports(path: Path, name: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing module's package
                base = name.split(".")[: -node.level] if path.name != "__init__.py" else name.split(".")
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from voice.shell import models`
    return found


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(project imports between project modules, every top-level import) per module."""
    modules = _modules()
    project: dict[str, set[str]] = {}
    everything: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported = _imports(path, name)
        everything[name] = {i.split(".")[0] for i in imported}
        project[name] = {i for i in imported if i in modules and i != name and not name.startswith(i + ".")}
    return project, everything


def _layer(module: str) -> int:
    best, rank = -1, None
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    assert rank is not None, f"{module} is in no layer: add it to LAYERS"
    return rank


def test_no_import_cycles_between_files():
    project, _ = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in project[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(project):
        if v not in index:
            visit(v)
    assert cycles == []


def test_each_layer_imports_only_the_layers_below():
    project, _ = _graph()
    upward = [
        f"{m} ({LAYERS[_layer(m)][0]}) imports {i} ({LAYERS[_layer(i)][0]})"
        for m, imported in sorted(project.items())
        for i in sorted(imported)
        if _layer(i) > _layer(m)
    ]
    assert upward == []


def test_the_core_is_pure():
    """The core imports nothing from the engines, the transports or the application, and does no I/O."""
    project, everything = _graph()
    core = [m for m in project if _layer(m) == 0]
    assert "voice.core.turns" in core and "voice.core.hearing" in core
    outside = {m: sorted(i for i in project[m] if not i.startswith("voice.core")) for m in core}
    assert {m: v for m, v in outside.items() if v} == {}
    foreign = {m: sorted(everything[m] - CORE_MAY_IMPORT - {"voice"}) for m in core}
    assert {m: v for m, v in foreign.items() if v} == {}
