"""Agent files read and checked: a YAML file, or a Python module that defines ``agent = Agent(...)``.

Both come to one :class:`AgentFile`: the flow (:mod:`core.flow`) and the agent's own tools.
Every mistake is one :class:`AgentFileError` line naming the file, the place in it
(``steps.details.next.confirm``) and the problem, before anything runs; a file that reads
is then checked as a graph (:func:`core.flow_graph.problems`), every problem a line of its own.
Paths in a file (its tools files) are relative to the file's folder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from core.flow import Field, Flow, Hook, Step, Transition
from core.flow_graph import problems
from shell.hold_sounds import BUILTIN, HoldSound, HoldSoundError
from shell.tools.loading import import_file, load_tools
from shell.tools.registry import ToolDefinitionError, Tools

TOP_KEYS = {"name", "role", "tools", "everywhere", "fields", "start", "steps", "on_user_turn", "on_tool_result", "hold"}
STEP_KEYS = {"instructions", "say", "respond", "tools", "collect", "context", "call", "end", "transfer", "next"}
STEP_KEYS |= {"on_enter", "on_exit", "on_user_turn", "ask_change"}
TRANSITION_KEYS = {"to", "description", "needs", "auto", "when"}


class AgentFileError(ValueError):
    """An agent file that cannot run as written. ``str(e)`` is one line; ``lines`` holds each
    problem as its own line (the file named in each), for ``python -m voice.agent check``."""

    def __init__(self, message: str, lines: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.lines: tuple[str, ...] = tuple(lines) or (message,)


@dataclasses.dataclass(frozen=True)
class AgentFile:
    """An agent as read from ``path`` (None: made from a prompt, :func:`one_step_agent`): its
    flow, and the tools its file defines (those its steps name come from here)."""

    path: Path | None
    flow: Flow
    tools: Tools


@dataclasses.dataclass(frozen=True)
class Agent:
    """An agent in a Python file: ``agent = Agent(role=..., steps=[Step(...), ...])``.

    ``steps``: :class:`core.flow.Step` objects (lists are fine where a Step takes a tuple);
    ``start``: the first step's name by default; ``fields``: name -> JSON schema (a
    ``description`` key in it is what the model reads), or :class:`Field` objects; ``tools``:
    Python functions (``voice.tools.tool`` sets their options) or tool sources as the YAML
    file names them (``"builtin"``, a file relative to this one); ``everywhere``: the names of
    the tools every step offers; ``name``: the file's stem by default.
    """

    role: str
    steps: Sequence[Step]
    start: str | None = None
    fields: dict[str, dict[str, Any]] | Sequence[Field] | None = None
    tools: Sequence[Callable[..., Any] | str] = ()
    everywhere: Sequence[str] = ()
    name: str | None = None
    on_user_turn: Hook | None = None  # every step's hook for the person's turns (a function, or a tool's name)
    on_tool_result: Hook | None = None  # called with each tool's result, which it may rewrite
    hold: str | None = None  # played while a reply waits on a slow tool: "chime", or a sound file's path


def load_agent(path: str | Path, other_tools: Iterable[str] | None = ()) -> AgentFile:
    """Read the agent file at ``path`` (``.yaml``, ``.yml`` or ``.py``) and check its flow.
    ``other_tools``: names of tools offered from elsewhere (the command line's) that its steps
    may name; None: tools are offered that are not known yet (an MCP server's, listed once it
    has started), so the names its steps give are not checked. Raises :class:`AgentFileError`."""
    agent = read_agent(path)
    known = None if other_tools is None else {t.name for t in agent.tools} | set(other_tools)
    found = problems(agent.flow, known_tools=known)
    if found:
        raise AgentFileError(f"{agent.path}: {'; '.join(found)}", [f"{agent.path}: {p}" for p in found])
    return agent


def read_agent(path: str | Path) -> AgentFile:
    """Read the agent file at ``path`` without checking its flow as a graph (what ``graph`` draws).
    Raises :class:`AgentFileError` for a file that is not one."""
    path = Path(path)
    if path.suffix in (".yaml", ".yml"):
        return _from_yaml(path)
    if path.suffix == ".py":
        return _from_python(path)
    raise AgentFileError(f"{path}: an agent file is a .yaml or a .py file")


def one_step_agent(role: str, tools: Tools) -> AgentFile:
    """The agent of a plain prompt (``--system-prompt``): one step, offering ``tools`` (their names as they are now)."""
    return AgentFile(None, Flow.one_step(role, tuple(t.name for t in tools)), tools)


# -- YAML -------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """YAML that refuses a key given twice in one mapping (two steps of one name: the last would win)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base`: the keys written beside it override the base's
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            if not isinstance(key, str):
                continue  # a name that is no text is the reader's to refuse, where it stands
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"{key!r} is given twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _from_yaml(path: Path) -> AgentFile:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # a SafeLoader
    except OSError as e:
        raise AgentFileError(f"{path}: cannot be read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise AgentFileError(f"{path}: cannot be read (not UTF-8 text)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise AgentFileError(f"{path}{where}: not YAML: {problem}") from None
    r = _Reader(path)
    top = r.mapping(data, "", TOP_KEYS)
    role = r.text(top.get("role"), "role", required=True) or ""
    sources = top.get("tools")
    sources = [sources] if isinstance(sources, str) else r.names(sources, "tools")
    tools = r.tools(sources, "tools")
    steps_data = r.mapping(top.get("steps"), "steps")
    if not steps_data:
        raise r.fail("steps", "an agent needs at least one step (steps: NAME: {instructions: ...})")
    steps = {name: r.step(name, value) for name, value in r.keyed(steps_data, "steps", "step").items()}
    fields = {
        name: r.field(name, value, f"fields.{name}")
        for name, value in r.keyed(r.mapping(top.get("fields"), "fields"), "fields", "field").items()
    }
    flow = Flow(
        role=role,
        steps=steps,
        start=r.text(top.get("start"), "start") or next(iter(steps)),
        fields=fields,
        tools=tuple(r.names(top.get("everywhere"), "everywhere")),
        name=r.text(top.get("name"), "name") or path.stem,
        on_user_turn=r.text(top.get("on_user_turn"), "on_user_turn"),
        on_tool_result=r.text(top.get("on_tool_result"), "on_tool_result"),
        hold=r.hold(top.get("hold")),
    )
    return AgentFile(path, flow, tools)


class _Reader:
    """Reads one file's values, each checked where it stands (``where``: its place in the file)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, message: str) -> AgentFileError:
        return AgentFileError(f"{self.path}: {where + ': ' if where else ''}{message}")

    def mapping(self, value: Any, where: str, keys: set[str] | None = None) -> dict[Any, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(where, f"a mapping is needed, not {_kind(value)}")
        if keys is not None:
            unknown = sorted(str(k) for k in value if k not in keys)
            if unknown:
                raise self.fail(where, f"unknown key {unknown[0]!r} (the keys: {', '.join(sorted(keys))})")
        return value

    def keyed(self, value: dict[Any, Any], where: str, what: str) -> dict[str, Any]:
        """A mapping whose keys are names (YAML reads ``yes:`` as true, ``1:`` as a number)."""
        for key in value:
            if not isinstance(key, str):
                raise self.fail(where, f"a {what}'s name is text, not {_kind(key)}: quote it")
        return value

    def text(self, value: Any, where: str, required: bool = False) -> str | None:
        if value is None or (required and value == ""):
            if required:
                raise self.fail(where, "is needed")
            return None
        if not isinstance(value, str):
            hint = " (quote it)" if isinstance(value, int | float | bool) else ""
            raise self.fail(where, f"text is needed, not {_kind(value)}{hint}")
        return value

    def names(self, value: Any, where: str) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(where, f"a list of names is needed ([a, b]), not {_kind(value)}")
        for i, v in enumerate(value):
            self.text(v, f"{where}[{i}]", required=True)
        return value

    def flag(self, value: Any, where: str) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.fail(where, f"true or false is needed, not {_kind(value)}")
        return value

    def context(self, value: Any, where: str) -> Any:
        if value is None:
            return "all"
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise self.fail(where, f"all, none, summary or a number of turns is needed, not {_kind(value)}")
        return value  # its value is the graph's to check (core.flow_graph)

    def hold(self, value: Any) -> str | None:
        """The hold sound: ``chime``, or a sound file (relative to the agent file's folder), checked by reading it."""
        sound = self.text(value, "hold")
        if sound is None or sound in BUILTIN:
            return sound
        path = self.path.parent / sound
        try:
            HoldSound.of(str(path), 16000)
        except HoldSoundError as e:
            raise self.fail("hold", f"{e} (a sound file, or {', '.join(BUILTIN)})") from None
        return str(path)

    def tools(self, sources: list[Any], where: str) -> Tools:
        """The tools of ``builtin`` and of Python files (relative to the agent file's folder)."""
        try:
            return load_tools(str(s) if s == "builtin" else str(self.path.parent / s) for s in sources)
        except ToolDefinitionError as e:
            raise self.fail(where, str(e)) from None

    def field(self, name: str, value: Any, where: str) -> Field:
        schema = dict(self.mapping(value, where))
        if not schema:
            raise self.fail(where, "a JSON schema is needed ({type: integer, minimum: 1})")
        description = self.text(schema.pop("description", None), f"{where}.description") or ""
        ask = self.text(schema.pop("ask", None), f"{where}.ask")
        return Field(name, schema, description, ask, self.example(schema.pop("example", None), f"{where}.example"))

    def example(self, value: Any, where: str) -> tuple[str, Any] | None:
        """A field's example answer: ``{said: "Three of us.", value: 3}``."""
        if value is None:
            return None
        data = self.mapping(value, where, {"said", "value"})
        said = self.text(data.get("said"), f"{where}.said", required=True) or ""
        if "value" not in data:
            raise self.fail(f"{where}.value", "the value the example answer gives is needed")
        return said, data["value"]

    def step(self, name: str, value: Any) -> Step:
        where = f"steps.{name}"
        data = self.mapping(value, where, STEP_KEYS)
        following = self.keyed(self.mapping(data.get("next"), f"{where}.next"), f"{where}.next", "function")
        transitions = [self.transition(f, v, f"{where}.next.{f}") for f, v in following.items()]
        return Step(
            name=name,
            instructions=self.text(data.get("instructions"), f"{where}.instructions") or "",
            tools=tuple(self.names(data.get("tools"), f"{where}.tools")),
            transitions=tuple(transitions),
            collect=tuple(self.names(data.get("collect"), f"{where}.collect")),
            context=self.context(data.get("context"), f"{where}.context"),
            say=self.text(data.get("say"), f"{where}.say"),
            ask_change=self.text(data.get("ask_change"), f"{where}.ask_change"),
            respond=self.text(data.get("respond"), f"{where}.respond") or "wait",  # type: ignore[arg-type]
            call=self.text(data.get("call"), f"{where}.call"),
            end=self.flag(data.get("end"), f"{where}.end"),
            transfer=self.text(data.get("transfer"), f"{where}.transfer"),
            on_enter=self.text(data.get("on_enter"), f"{where}.on_enter"),
            on_exit=self.text(data.get("on_exit"), f"{where}.on_exit"),
            on_user_turn=self.text(data.get("on_user_turn"), f"{where}.on_user_turn"),
        )

    def transition(self, function: str, value: Any, where: str) -> Transition:
        if isinstance(value, str):
            return Transition(function, value, _went(value))
        if not isinstance(value, dict):
            raise self.fail(where, f"a step's name or {{to: STEP, description: ...}} is needed, not {_kind(value)}")
        data = self.mapping(value, where, TRANSITION_KEYS)
        to = self.text(data.get("to"), f"{where}.to", required=True) or ""
        description = self.text(data.get("description"), f"{where}.description") or _went(to)
        needs = tuple(self.names(data.get("needs"), f"{where}.needs"))
        when = tuple(self.phrases(data.get("when"), f"{where}.when"))
        return Transition(function, to, description, needs, self.flag(data.get("auto"), f"{where}.auto"), when)

    def phrases(self, value: Any, where: str) -> list[str]:
        """A list of phrases (a single one may be given as a text)."""
        if value is None:
            return []
        given = [value] if isinstance(value, str) else value
        if not isinstance(given, list) or not all(isinstance(p, str) and p.strip() for p in given):
            raise self.fail(where, f"a list of phrases is needed, not {_kind(value)}")
        return [p.strip() for p in given]


def _went(to: str) -> str:
    return f"Go on to step {to}."


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a yes/no)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, int | float):
        return f"the number {value}"
    return f"{type(value).__name__} {value!r}"


# -- Python -----------------------------------------------------------------


def _from_python(path: Path) -> AgentFile:
    module = _module_of(path)
    agent = getattr(module, "agent", None)
    if not isinstance(agent, Agent):
        found = "nothing" if agent is None else type(agent).__name__
        raise AgentFileError(f"{path}: agent: `agent = Agent(...)` is needed (voice.agent.Agent), it is {found}")
    r = _Reader(path)
    role = r.text(agent.role, "role", required=True) or ""
    if isinstance(agent.steps, str | bytes) or not isinstance(agent.steps, Sequence) or not agent.steps:
        raise r.fail("steps", "a list of Step objects is needed, at least one")
    tools = _python_tools(r, agent.tools)

    def hook(value: Any, where: str) -> str | None:
        """A hook's name: a function given is one of the agent's tools from now on."""
        if value is None or isinstance(value, str):
            return r.text(value, where)
        if not callable(value):
            raise r.fail(where, f"a function or a tool's name is needed, not {_kind(value)}")
        name = getattr(value, "__name__", "")
        if name not in tools or getattr(tools[name], "function", None) is not value:
            try:
                tools.add(value, str(r.path))
            except ToolDefinitionError as e:
                raise r.fail(where, str(e).removeprefix(f"{r.path}: ")) from None
        return name

    steps: dict[str, Step] = {}
    for i, step in enumerate(agent.steps):
        checked = _checked_step(r, step, f"steps[{i}]")
        kinds = ("on_enter", "on_exit", "on_user_turn")
        hooks = {k: hook(getattr(step, k), f"steps.{checked.name}.{k}") for k in kinds}
        checked = dataclasses.replace(checked, **hooks)
        if checked.name in steps:
            raise r.fail(f"steps[{i}]", f"a step named {checked.name!r} comes before it")
        steps[checked.name] = checked
    flow = Flow(
        role=role,
        steps=steps,
        start=r.text(agent.start, "start") or next(iter(steps)),
        fields=_fields(r, agent.fields),
        tools=tuple(r.names(_listed(agent.everywhere), "everywhere")),
        name=r.text(agent.name, "name") or path.stem,
        on_user_turn=hook(agent.on_user_turn, "on_user_turn"),
        on_tool_result=hook(agent.on_tool_result, "on_tool_result"),
        hold=r.hold(agent.hold),
    )
    return AgentFile(path, flow, tools)


def _module_of(path: Path) -> Any:
    """The agent file run as a module of its own (as tools files are)."""
    return import_file(path, "agent file", AgentFileError)


def _listed(value: Any) -> Any:
    """A tuple as the list it stands for (Python files write either)."""
    return list(value) if isinstance(value, tuple) else value


def _checked_step(r: _Reader, step: Any, where: str) -> Step:
    """A Step of a Python file, its values checked as a YAML file's are (lists made tuples)."""
    if not isinstance(step, Step):
        raise r.fail(where, f"a Step is needed (voice.agent.Step), not {_kind(step)}")
    name = r.text(step.name, f"{where}.name", required=True) or ""
    where = f"steps.{name}"
    if not isinstance(step.transitions, list | tuple):
        raise r.fail(f"{where}.transitions", f"a list of Transitions is needed, not {_kind(step.transitions)}")
    transitions = []
    for i, t in enumerate(step.transitions):
        at = f"{where}.transitions[{i}]"
        if not isinstance(t, Transition):
            raise r.fail(at, f"a Transition is needed (voice.agent.Transition), not {_kind(t)}")
        function = r.text(t.function, f"{at}.function", required=True) or ""
        to = r.text(t.to, f"{at}.to", required=True) or ""
        description = r.text(t.description, f"{at}.description") or _went(to)
        needs = tuple(r.names(_listed(t.needs), f"{at}.needs"))
        when = tuple(r.phrases(_listed(t.when), f"{at}.when"))
        transitions.append(Transition(function, to, description, needs, r.flag(t.auto, f"{at}.auto"), when))
    return Step(
        name=name,
        instructions=r.text(step.instructions, f"{where}.instructions") or "",
        tools=tuple(r.names(_listed(step.tools), f"{where}.tools")),
        transitions=tuple(transitions),
        collect=tuple(r.names(_listed(step.collect), f"{where}.collect")),
        context=r.context(step.context, f"{where}.context"),
        say=r.text(step.say, f"{where}.say"),
        ask_change=r.text(step.ask_change, f"{where}.ask_change"),
        respond=r.text(step.respond, f"{where}.respond") or "wait",  # type: ignore[arg-type]
        call=r.text(step.call, f"{where}.call"),
        end=r.flag(step.end, f"{where}.end"),
        transfer=r.text(step.transfer, f"{where}.transfer"),
    )


def _fields(r: _Reader, fields: Any) -> dict[str, Field]:
    if fields is None:
        return {}
    if isinstance(fields, dict):
        r.keyed(fields, "fields", "field")
        return {name: r.field(name, value, f"fields.{name}") for name, value in fields.items()}
    if isinstance(fields, str) or not isinstance(fields, Sequence):
        raise r.fail("fields", f"a mapping of JSON schemas or a list of Fields is needed, not {_kind(fields)}")
    out: dict[str, Field] = {}
    for i, f in enumerate(fields):
        if not isinstance(f, Field):
            raise r.fail(f"fields[{i}]", f"a Field is needed (voice.agent.Field), not {_kind(f)}")
        name = r.text(f.name, f"fields[{i}].name", required=True) or ""
        if name in out:
            raise r.fail(f"fields[{i}]", f"a field named {name!r} comes before it")
        schema = r.mapping(f.schema, f"fields[{i}].schema")
        description = r.text(f.description, f"fields[{i}].description") or ""
        ask = r.text(f.ask, f"fields[{i}].ask")
        out[name] = Field(name, dict(schema), description, ask, _example(r, f.example, f"fields[{i}].example"))
    return out


def _example(r: _Reader, example: Any, where: str) -> tuple[str, Any] | None:
    """A Field's example of a Python file: ``("Three of us.", 3)``, the answer and the value it gives."""
    if example is None:
        return None
    if not isinstance(example, tuple | list) or len(example) != 2:
        raise r.fail(where, f'(said, value) is needed, e.g. ("Three of us.", 3), not {_kind(example)}')
    said = r.text(example[0], f"{where}[0]", required=True) or ""
    return said, example[1]


def _python_tools(r: _Reader, given: Any) -> Tools:
    """The functions given, as tools, and the tools of the sources named (``builtin``, a file)."""
    if isinstance(given, str) or not isinstance(given, Sequence):
        raise r.fail("tools", f"a list of functions is needed, not {_kind(given)}")
    tools = Tools()
    for i, item in enumerate(given):
        where = f"tools[{i}]"
        try:
            if isinstance(item, str):
                for t in r.tools([item], where):
                    tools.add(t)
            else:
                tools.add(item, str(r.path))
        except ToolDefinitionError as e:
            message = str(e).removeprefix(f"{r.path}: ")
            raise r.fail(where, message) from None
    return tools
