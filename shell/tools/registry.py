"""Tools the assistant can call: plain Python functions, described to the model by their signature.

A tool is a function. Its name is the tool's name, its docstring the description
the model reads, its parameters (each with a type annotation: ``str``, ``int``,
``float``, ``bool``, a ``Literal`` or ``Enum``, lists of those, ``X | None``,
defaults) the JSON schema of its arguments; pydantic derives the schema and
validates every call against it before the function runs. A call whose
arguments do not parse or fit is never run: the model is told why.

A file of tools (``--tools FILE.py``) names its tools in ``__all__``. Options go
on with :func:`tool`::

    from shell.tools import tool

    __all__ = ["look_up_order"]

    @tool(timeout_s=5, cancel_on_barge_in=False)
    async def look_up_order(order_id: str) -> str:
        \"\"\"The status of an order, by its number.\"\"\"
        ...

``cancel_on_barge_in`` (default True): whether the person speaking over the reply
cancels the tool while it runs; a tool that books or pays should finish, and
its result is kept. ``timeout_s`` (default 10): past it the call's result is a
timeout. A parameter annotated :class:`ToolContext` is not shown to the model:
it gives the tool the session (the time, speaking later, ending the
conversation). Sync functions run in a thread (cancelling one only stops
waiting for it); async ones on the event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import json
import re
import time
import typing
import weakref
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Literal, Protocol

import pydantic

from core.tool_calls import ToolCall
from shell.tools.arguments import ModelArguments

DEFAULT_TIMEOUT_S = 10.0
ToolStatus = Literal["ok", "error", "cancelled", "timeout"]


class ToolDefinitionError(ValueError):
    """A tool that cannot be offered to the model (said in one line, at start-up)."""


class ToolContext(Protocol):
    """What a tool may ask of the session it runs in."""

    def now(self) -> datetime:
        """The wall-clock time, with its time zone."""
        ...

    def say_later(self, delay_s: float, text: str) -> None:
        """Speak ``text`` in ``delay_s`` seconds (a timer), whatever the conversation is doing then."""
        ...

    def end_conversation(self) -> None:
        """End the conversation once the current reply has been spoken (a call hangs up)."""
        ...

    @property
    def state(self) -> dict[str, Any]:
        """The fields the agent's flow has collected (``--agent``; empty without one): a tool may
        read them, and write them for the steps that follow."""
        ...

    @property
    def step(self) -> str:
        """The step of the agent's flow the conversation is in ("" without ``--agent``)."""
        ...


@dataclasses.dataclass(frozen=True)
class ToolOptions:
    timeout_s: float = DEFAULT_TIMEOUT_S
    cancel_on_barge_in: bool = True
    # Its arguments' numbers must come from the conversation: a call holding none of them is not run
    # (core/grounded.py: a small model called the calculator with numbers nobody said).
    grounded: bool = False


def tool(
    fn: Callable | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    cancel_on_barge_in: bool = True,
    grounded: bool = False,
) -> Any:
    """Set a tool's options: ``@tool(timeout_s=5, cancel_on_barge_in=False)`` (plain ``@tool`` keeps the defaults);
    ``grounded=True``: a call is run only if one of its arguments' numbers is one said in the conversation."""

    def mark(f: Callable) -> Callable:
        f.__voice_tool__ = ToolOptions(timeout_s, cancel_on_barge_in, grounded)  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark


@dataclasses.dataclass(frozen=True)
class ToolResult:
    """What became of a call: ``content`` is what the model is told (``say``: a hook's words to say)."""

    status: ToolStatus
    content: str
    duration_s: float
    say: bool = False


@dataclasses.dataclass(frozen=True)
class Say:
    """What a hook returns to have ``text`` said word for word (an agent's ``on_user_turn``: the
    answer, without the model): ``return Say("We open at noon.")``. A tool the model calls that
    returns it is told the text."""

    text: str


@dataclasses.dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments
    function: Callable[..., Any]
    options: ToolOptions
    source: str  # where it was defined, for messages
    _model: type[pydantic.BaseModel] = dataclasses.field(repr=False, compare=False)
    _context: str | None = dataclasses.field(default=None, repr=False, compare=False)  # the ToolContext parameter

    @classmethod
    def from_function(cls, fn: Callable[..., Any], source: str = "") -> Tool:
        name = getattr(fn, "__name__", "")
        where = f"{source}: " if source else ""
        if not callable(fn) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name):
            raise ToolDefinitionError(f"{where}{name or fn!r} is not a function that can be a tool")
        description = inspect.cleandoc(fn.__doc__ or "")
        if not description:
            raise ToolDefinitionError(f"{where}tool {name} has no docstring: the model needs it to know what it does")
        try:
            hints = typing.get_type_hints(fn)
        except Exception as e:
            raise ToolDefinitionError(f"{where}tool {name}: its annotations do not resolve ({e})") from e
        fields: dict[str, Any] = {}
        context = None
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolDefinitionError(f"{where}tool {name}: *{param.name} cannot be described to the model")
            if param.name not in hints:
                raise ToolDefinitionError(
                    f"{where}tool {name}: parameter {param.name} has no type annotation (the model needs its type)"
                )
            if hints[param.name] is ToolContext:
                context = param.name
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (hints[param.name], default)
        try:
            model = pydantic.create_model(f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields)
            parameters = tidy_schema(model.model_json_schema())
        except Exception as e:  # pydantic cannot describe a type
            raise ToolDefinitionError(f"{where}tool {name}: {e}".splitlines()[0]) from e
        options = getattr(fn, "__voice_tool__", ToolOptions())
        return cls(name, description, parameters, fn, options, source, model, context)

    @property
    def server(self) -> str:
        """The MCP server it comes from: none, it is the session's own."""
        return ""

    def spec(self) -> dict[str, Any]:
        return function_spec(self.name, self.description, self.parameters)

    def arguments(self, text: str) -> dict[str, Any]:
        """The call's arguments, parsed and checked; raises ValueError with what the model got wrong."""
        return ModelArguments(self.name, self._model).check(text)

    async def run(
        self, arguments: dict[str, Any], context: ToolContext | None, clock: Callable[[], float] = time.monotonic
    ) -> ToolResult:
        """Run with ``arguments`` (from :meth:`arguments`) within the tool's timeout; ``clock``
        times it (the session's). A task cancelled while this runs raises
        :class:`asyncio.CancelledError` as usual."""
        kwargs = dict(arguments)
        if self._context is not None:
            kwargs[self._context] = context
        start = clock()
        try:
            if inspect.iscoroutinefunction(self.function):
                value = await asyncio.wait_for(self.function(**kwargs), self.options.timeout_s)
            else:
                value = await asyncio.wait_for(asyncio.to_thread(self.function, **kwargs), self.options.timeout_s)
        except TimeoutError:
            return ToolResult(
                "timeout", f"{self.name} did not finish within {self.options.timeout_s:g} s", clock() - start
            )
        except Exception as e:  # the tool's own failure: the model is told, the conversation goes on
            return ToolResult("error", f"{self.name} failed: {type(e).__name__}: {e}", clock() - start)
        if isinstance(value, Say):
            return ToolResult("ok", value.text, clock() - start, say=True)
        return ToolResult("ok", _as_text(value), clock() - start)


@typing.runtime_checkable
class OfferedTool(Protocol):
    """What the tool runner needs of a tool: a :class:`Tool` (a function of ours) or an MCP
    server's (:class:`shell.mcp.tools.McpTool`)."""

    name: str
    description: str
    options: ToolOptions

    @property
    def source(self) -> str: ...

    @property
    def server(self) -> str: ...

    def spec(self) -> dict[str, Any]: ...

    def arguments(self, text: str) -> dict[str, Any]: ...

    async def run(
        self, arguments: dict[str, Any], context: ToolContext | None, clock: Callable[[], float]
    ) -> ToolResult: ...


class Tools:
    """The tools offered to the model, by name: the session's own, then the MCP servers'.

    The MCP servers' tools change when a server announces a new list
    (:meth:`set_server_tools`); whoever offers them (each session's tool runner)
    is told through :meth:`watch`.
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, OfferedTool] = {}
        self._watchers: list[weakref.WeakMethod] = []
        self._base: Tools = self  # following(): the tools whose MCP servers' tools these follow
        for t in tools:
            self.add(t)

    def add(self, t: OfferedTool | Callable[..., Any], source: str = "") -> OfferedTool:
        t = t if isinstance(t, OfferedTool) else Tool.from_function(t, source)
        if t.name in self._tools:
            first = self._tools[t.name].source or "an earlier tool"
            raise ToolDefinitionError(f"{t.source or 'a tool'}: a tool named {t.name} is already defined in {first}")
        self._tools[t.name] = t
        return t

    def own_names(self) -> set[str]:
        """The names of the tools that come from no MCP server."""
        return {name for name, t in self._tools.items() if not t.server}

    def set_server_tools(self, tools: Iterable[OfferedTool]) -> None:
        """The MCP servers' tools, all of them, in place of those before; the watchers are told."""
        own = {name: t for name, t in self._tools.items() if not t.server}
        self._tools = own
        for t in tools:
            self.add(t)
        for ref in list(self._watchers):
            method = ref()
            if method is None:
                self._watchers.remove(ref)
            else:
                method()

    def watch(self, method: Callable[[], None]) -> None:
        """Call bound ``method`` when the tools change (held weakly: a closed session is freed)."""
        # Closed sessions' references go here too: a server whose tools never change would
        # otherwise keep one per session it ever had.
        self._watchers = [ref for ref in self._watchers if ref() is not None]
        self._watchers.append(weakref.WeakMethod(method))  # type: ignore[arg-type]

    @classmethod
    def following(cls, servers_of: Tools, own: Iterable[OfferedTool]) -> Tools:
        """``own`` tools (another agent's) beside the MCP servers' tools of ``servers_of``, which
        they follow when a server lists its tools anew (keep it: it is watched weakly)."""
        joined = cls(own)
        joined._base = servers_of
        joined._follow_base()
        servers_of.watch(joined._follow_base)
        return joined

    def _follow_base(self) -> None:
        self.set_server_tools(t for t in self._base if t.server)

    def servers(self) -> dict[str, str]:
        """Tool name -> its MCP server, for the tools that come from one."""
        return {name: t.server for name, t in self._tools.items() if t.server}

    def grounded(self, name: str) -> bool:
        """Whether tool ``name``'s calls must use a number said in the conversation (``@tool(grounded=True)``)."""
        t = self._tools.get(name)
        return t is not None and t.options.grounded

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> OfferedTool:
        return self._tools[name]

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self):
        return iter(self._tools.values())

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self._tools.values()]

    def check(self, call: ToolCall) -> tuple[OfferedTool, dict[str, Any]] | str:
        """The tool and its checked arguments, or why the call cannot run (for the model)."""
        t = self._tools.get(call.name)
        if t is None:
            known = ", ".join(self._tools) or "none"
            return f"there is no tool named {call.name!r} (the tools are: {known})"
        try:
            return t, t.arguments(call.arguments)
        except ValueError as e:
            return str(e)


def function_spec(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool as the chat template and the OpenAI API take it (ours and the MCP servers')."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def tidy_schema(schema: Any) -> Any:
    """pydantic's schema without its titles and ``additionalProperties``: words the model reads on
    every request, saying nothing it needs (a 0.5B model copied ``{"additionalProperties": false,
    "properties": {}, ...}`` into a call as its arguments). Extra arguments are still refused."""
    if isinstance(schema, dict):
        noise = {"title", "additionalProperties"}
        return {k: tidy_schema(v) for k, v in schema.items() if k not in noise or not isinstance(v, str | bool)}
    if isinstance(schema, list):
        return [tidy_schema(v) for v in schema]
    return schema


def _as_text(value: Any) -> str:
    if value is None:  # nothing to tell (a hook that only wrote the state)
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, enum.Enum):
        return str(value.value)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
