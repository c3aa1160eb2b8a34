"""The import graph shows the layers: no cycles between files, and each layer imports only the ones below it.

The folders are the layers, read from the bottom up; a module imports only from
its own folder and the ones above it in this list (issue 31):

    core/                 pure: turn-taking, sentences, playback accounting, hearing, history
    asr/, tts/, llm/      the engines' adapters
    shell/tools/          the tools the assistant can call (the person's own code among them)
    shell/                asyncio wiring: session, stages, pump, device port, clock, engine loading
    transport/            devices and servers: replay, sound card, WebSocket, Realtime, Twilio, WebRTC
    voice/agent/          agent files read and checked (python -m voice.agent check FILE)
    voice/app/            the application: CLI, terminal, store, metrics, logs
    voice/scenario/       test scenarios on virtual time (python -m voice.scenario, pytest scenarios/)
    voice/bench/          the benchmarks (python -m voice.bench NAME)
    voice/                the ``python -m`` entry points, and ``voice.tools`` for tools files

Every import counts, those inside functions too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "asr", "llm", "tts", "shell", "transport", "voice")
# The folders from the bottom up: what a folder's modules may import besides their own.
FOLDERS = [("core",), ("asr", "tts", "llm"), ("shell",), ("transport",), ("voice",)]
LAYERS = [
    ("core",),
    ("asr", "tts", "llm"),
    ("shell.tools",),
    ("shell",),
    ("transport",),
    ("voice.agent",),
    ("voice.app",),
    ("voice.scenario",),
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
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from shell import models`
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
    # Restored after: other tests (a message nested too deeply) rely on the interpreter's usual limit.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(10_000, limit))

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

    try:
        for v in sorted(project):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
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


def test_the_folders_are_the_layers():
    """A picture of the top-level folders has every arrow pointing down: no folder imports
    one above it, so the folders alone tell a newcomer what may use what."""
    project, _ = _graph()
    rank = {top: i for i, tops in enumerate(FOLDERS) for top in tops}
    assert set(rank) == set(PACKAGES)
    upward = sorted(
        f"{m} imports {i}"
        for m, imported in project.items()
        for i in imported
        if rank[i.split(".")[0]] > rank[m.split(".")[0]]
    )
    assert upward == []
    # Each layer lives in one folder: the order of LAYERS is the order of the folders.
    tops = [rank[prefixes[0].split(".")[0]] for prefixes in LAYERS]
    assert tops == sorted(tops)


def test_the_core_is_pure():
    """The core imports nothing from the engines, the transports or the application, and does no I/O."""
    project, everything = _graph()
    core = [m for m in project if _layer(m) == 0]
    assert "core.turns" in core and "core.hearing" in core
    outside = {m: sorted(i for i in project[m] if i.split(".")[0] != "core") for m in core}
    assert {m: v for m, v in outside.items() if v} == {}
    foreign = {m: sorted(everything[m] - CORE_MAY_IMPORT - {"core"}) for m in core}
    assert {m: v for m, v in foreign.items() if v} == {}


# -- Rules that keep the shape (issue 31) ------------------------------------

MODULE_BUDGET = 500  # lines a module
CLASS_BUDGET = 300  # lines a class
# Over the budget on purpose, each with its reason. A file that comes back under
# its budget must leave this table (test_every_exception_is_still_needed).
OVER_BUDGET: dict[str, str] = {}

# The session is driven by the pump. Besides it, only what opens a session for a
# device imports it, to create one and to call its controls (cancel, truncate,
# the person's text, a client's tools); no stage of the shell does.
OPENS_SESSIONS: dict[str, str] = {
    "transport.connection": "one session per WebSocket connection, controlled by its dialect's messages",
    "transport.replay": "a recording replayed through a session, on its own pump",
    "voice.app.runtime": "the session of `python -m voice.run` (replay and desk)",
    "voice.bench.evaluate": "the labelled fixtures replayed through a session",
    "voice.bench.turns": "the turn-taking fixtures replayed through a session",
    "voice.bench.pipeline": "sessions timed in real time, and idle ones for their memory",
    "voice.bench.server": "the in-process session the server's figures are measured against",
    "voice.bench.tool_turns": "spoken tool requests through whole sessions",
    "voice.bench.trace": "every engine call of a session timed",
    "voice.bench.languages": "each language's recordings through whole sessions, on virtual time and in real time",
    "voice.scenario.runner": "a test scenario's conversation, on virtual time",
}


def _sizes() -> dict[str, int]:
    """Lines per module (``path``) and per class (``path:Class``), for every module of the packages."""
    sizes: dict[str, int] = {}
    for path in _modules().values():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        sizes[rel] = len(text.splitlines())
        for node in ast.walk(ast.parse(text, rel)):
            if isinstance(node, ast.ClassDef):
                sizes[f"{rel}:{node.name}"] = node.end_lineno - node.lineno + 1
    return sizes


def _over(sizes: dict[str, int]) -> dict[str, int]:
    return {k: n for k, n in sizes.items() if n > (CLASS_BUDGET if ":" in k else MODULE_BUDGET)}


def test_modules_and_classes_keep_to_their_budget():
    over = _over(_sizes())
    unexplained = {k: n for k, n in over.items() if k not in OVER_BUDGET}
    assert unexplained == {}, f"over {MODULE_BUDGET} lines a module or {CLASS_BUDGET} a class: split it by concern"


def test_every_exception_is_still_needed():
    sizes = _sizes()
    stale = sorted(k for k in OVER_BUDGET if k not in _over(sizes))
    assert stale == [], "back under the budget (or gone): remove from OVER_BUDGET"


def test_only_the_pump_and_what_opens_sessions_import_the_session():
    project, _ = _graph()
    importers = sorted(m for m, imported in project.items() if "shell.session" in imported)
    assert [m for m in importers if m != "shell.pump" and m not in OPENS_SESSIONS] == []
    assert [m for m in OPENS_SESSIONS if m not in importers] == [], "no longer imports the session: remove it"


def test_the_stages_of_the_shell_never_import_the_session():
    project, _ = _graph()
    stages = [m for m in project if m.startswith("shell.") and m not in ("shell.session", "shell.pump")]
    assert [m for m in stages if "shell.session" in project[m]] == []


def test_benchmarks_never_import_the_tests():
    _, everything = _graph()
    assert sorted(m for m, top in everything.items() if m.startswith("voice.bench") and "tests" in top) == []


def test_paths_from_a_module_still_reach_the_repository_root():
    """A module that finds the repository from its own file (the models folder, the benchmarks'
    fixtures) counts its folders: after a move it must still land on the root."""
    from shell import models
    from voice.bench import common

    assert (models.ROOT / "pyproject.toml").is_file()
    assert (common.ROOT / "pyproject.toml").is_file()
