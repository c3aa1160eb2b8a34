"""The tool runner: the calls the core asks for (``RunTool``), checked and run, each in a task of its own.

A call is checked against its tool (``shell/tools/arguments.py``) before
anything runs; one that does not fit is answered with why. A tool of the
session's own runs here, given a :class:`SessionToolContext`; a tool the
client runs (Realtime's function tools) goes to the client, and its output is
awaited within ``client_tool_timeout_s``. Tools are not engine work: on
virtual time the timeline goes on while one runs (:meth:`ToolRunner.wait`).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from core.commands import Command, RunTool, StopTools
from core.flow import FlowRun
from core.tool_calls import ToolCall
from core.turns import Conversation
from shell.clock import Clock
from shell.flow_functions import FlowFunctions
from shell.tools import ToolResult, Tools
from shell.tools.arguments import SchemaArguments
from shell.tools.registry import OfferedTool


class Line(Protocol):
    """What a tool may ask of the conversation's line (``shell/phone_line.py``)."""

    def say_later(self, delay_s: float, text: str) -> None: ...

    def end_after_reply(self) -> None: ...


class SessionToolContext:
    """What the session's tools may ask of it (:class:`shell.tools.ToolContext`)."""

    def __init__(self, line: Line, flow: FlowRun | None = None) -> None:
        self._line = weakref.ref(line)  # not a cycle: a closed session is freed at once
        self._flow = flow
        self._state: dict[str, Any] = flow.state if flow is not None else {}

    @property
    def state(self) -> dict[str, Any]:
        return self._state

    @property
    def step(self) -> str:
        return self._flow.step_name if self._flow is not None else ""

    def now(self) -> datetime:
        return datetime.now().astimezone()

    def say_later(self, delay_s: float, text: str) -> None:
        line = self._line()
        if line is not None:
            line.say_later(delay_s, text)

    def end_conversation(self) -> None:
        line = self._line()
        if line is not None:
            line.end_after_reply()


class ToolRunner:
    """The tools of one session, and the client's: checked, run, cancelled by a barge-in."""

    def __init__(
        self,
        tools: Tools | None,
        clock: Clock,
        conversation: Conversation,
        run: Callable[[list[Command]], None],
        context: SessionToolContext,
        client_timeout_s: float,
        flow: FlowFunctions | None = None,
    ) -> None:
        """``run``: carries out the core's commands (a call's result goes back to the core);
        ``flow``: the agent's own functions (its transitions), answered at once."""
        self.tools = tools
        self.flow = flow
        self.clock = clock
        self.conversation = conversation
        self._run = run
        self._context = context
        self._client_timeout_s = client_timeout_s
        # call id -> its reply, whether a barge-in cancels it, the task running (or awaiting) it
        self._tasks: dict[str, tuple[int, bool, asyncio.Task]] = {}
        # Tools the client runs (Realtime's function calls): name -> its arguments' checker.
        self._client_tools: dict[str, SchemaArguments] = {}
        self._client_specs: list[dict[str, Any]] = []
        self._client_results: dict[str, asyncio.Future[str]] = {}  # call id -> the client's output
        self._offer()
        if tools is not None:
            tools.watch(self._offer)  # an MCP server's new list reaches the next request

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    def set_client_tools(self, specs: list[dict[str, Any]]) -> None:
        """The tools the client runs itself (``[]``: none), offered to the model beside the session's own."""
        checkers = {}
        for spec in specs:
            function = spec["function"]
            checkers[function["name"]] = SchemaArguments(function.get("parameters") or {"type": "object"})
        self._client_tools = checkers
        self._client_specs = list(specs)
        self._offer()

    def _offer(self) -> None:
        """The conversation offers the session's tools (our own, the MCP servers') and the client's
        (which win where a name is taken twice: the client named it last)."""
        own = self.tools.specs() if self.tools else []
        ours = [s for s in own if s["function"]["name"] not in self._client_tools]
        servers = self.tools.servers() if self.tools else {}
        mcp = {n: s for n, s in servers.items() if n not in self._client_tools}
        grounded = [name for s in ours if self.tools and self.tools.grounded(name := s["function"]["name"])]
        self.conversation.offer_tools(ours + self._client_specs, mcp, grounded)

    def client_tool_output(self, call_id: str, output: str) -> bool:
        """The client's result of call ``call_id``; False: no call of the client's waits for it."""
        waiting = self._client_results.pop(call_id, None)
        if waiting is None or waiting.done():
            return False
        waiting.set_result(output)
        return True

    def run_tool(self, cmd: RunTool) -> None:
        """Check the call against its tool; run it in a task of its own, or answer why it cannot run."""
        loop = asyncio.get_running_loop()
        if self.flow is not None and self.flow.owns(cmd.call.name):
            result, changed = self.flow.call(cmd.call)
            now = self.clock.now()
            self._run(self.conversation.tool_finished(cmd.response, cmd.call, result.status, result.content, 0.0, now,
                                                      ran=changed))  # fmt: skip
            return
        if cmd.call.name in self._client_tools:
            try:
                self._client_tools[cmd.call.name].check(cmd.call.arguments)
                why = None
            except ValueError as e:
                why = str(e)
            if why is None:
                # Waited for from now: the client may answer as soon as it sees the call.
                waiting = self._client_results[cmd.call.id] = loop.create_future()
                task = loop.create_task(self._await_client(cmd, waiting))
                self._tasks[cmd.call.id] = (cmd.response, True, task)
                return
            checked: tuple[OfferedTool, dict[str, Any]] | str = why
        else:
            call = _hook_call(cmd.call, self.tools, cmd.given or {}) if cmd.hook else cmd.call
            checked = self.tools.check(call) if self.tools is not None else "no tools are offered"
        if isinstance(checked, str):
            result = f"The call was not run: {checked}."
            now = self.clock.now()
            self._run(self.conversation.tool_finished(cmd.response, cmd.call, "error", result, 0.0, now, ran=False))
            return
        tool, arguments = checked
        task = loop.create_task(self._call_tool(cmd, tool, arguments))
        self._tasks[cmd.call.id] = (cmd.response, tool.options.cancel_on_barge_in, task)

    def stop_tools(self, cmd: StopTools) -> None:
        """A barge-in: the reply's tools whose policy says so are cancelled."""
        for response, cancel, task in list(self._tasks.values()):
            if response == cmd.response and cancel:
                task.cancel()

    async def _await_client(self, cmd: RunTool, waiting: asyncio.Future) -> None:
        """A call of the client's: its output, within ``client_tool_timeout_s``. ``waiting`` is given,
        not looked up: a client that answered before this task first ran took it out of the table
        already (its answer was lost, and the task failed)."""
        start = self.clock.now()
        timeout = self._client_timeout_s
        try:
            result = ToolResult("ok", await asyncio.wait_for(waiting, timeout), self.clock.now() - start)
        except TimeoutError:
            said = f"the client did not answer {cmd.call.name} within {timeout:g} s"
            result = ToolResult("timeout", said, self.clock.now() - start)
        except asyncio.CancelledError:
            why = f"{cmd.call.name} was cancelled: the person spoke over the reply"
            result = ToolResult("cancelled", why, self.clock.now() - start)
        finally:
            self._tasks.pop(cmd.call.id, None)
            self._client_results.pop(cmd.call.id, None)
        status, content, took = result.status, result.content, result.duration_s
        self._run(self.conversation.tool_finished(cmd.response, cmd.call, status, content, took, self.clock.now()))

    async def _call_tool(self, cmd: RunTool, tool: OfferedTool, arguments: dict[str, Any]) -> None:
        # Timed on the session's clock, as everything it stores is: on virtual time a call takes the
        # ticks the timeline went on while it ran, so a conversation repeats exactly.
        start = self.clock.now()
        try:
            result = await tool.run(arguments, self._context, clock=self.clock.now)
            if not cmd.hook:
                result = await self._result_hooked(cmd, result)
        except asyncio.CancelledError:  # a barge-in (StopTools), or the session closing
            why = f"{tool.name} was cancelled: the person spoke over the reply"
            result = ToolResult("cancelled", why, self.clock.now() - start)
        finally:
            self._tasks.pop(cmd.call.id, None)
        status, content, took = result.status, result.content, result.duration_s
        now = self.clock.now()
        self._run(self.conversation.tool_finished(cmd.response, cmd.call, status, content, took, now, say=result.say))

    async def _result_hooked(self, cmd: RunTool, result: ToolResult) -> ToolResult:
        """``result`` as the agent's ``on_tool_result`` hook rewrites it (it returned a text), in the
        call's own task: the tool's timeout and barge-in rules hold for both. A hook that fails makes
        the call's result its error."""
        run = self.flow.run if self.flow is not None else None
        name = run.flow.on_tool_result if run is not None else None
        if not isinstance(name, str) or self.tools is None:
            return result
        given = {"name": cmd.call.name, "status": result.status, "result": result.content}
        checked = self.tools.check(_hook_call(ToolCall(0, cmd.call.id, name, "{}"), self.tools, given))
        if isinstance(checked, str):
            return ToolResult("error", f"the on_tool_result hook {name} cannot run: {checked}", result.duration_s)
        hook, hook_arguments = checked
        rewritten = await hook.run(hook_arguments, self._context, clock=self.clock.now)
        if rewritten.status != "ok":
            return ToolResult(rewritten.status, rewritten.content, result.duration_s + rewritten.duration_s)
        return ToolResult(result.status, rewritten.content or result.content, result.duration_s + rewritten.duration_s)

    async def wait(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the tools running (none: return at once)."""
        if self._tasks:
            await asyncio.wait([task for _, _, task in self._tasks.values()], timeout=timeout_s)

    async def close(self) -> None:
        """The conversation ends: calls waiting for the client are cancelled (nobody will answer);
        the others are given their timeout to finish."""
        for call_id in list(self._client_results):
            self._tasks[call_id][2].cancel()
        running = [task for _, _, task in self._tasks.values()]
        if running:
            await asyncio.wait(running)


def _hook_call(call: ToolCall, tools: Tools | None, given: dict[str, Any]) -> ToolCall:
    """A hook's call with those of the arguments ``given`` its tool takes (a hook need not take the
    person's ``text``, or the tool's ``result``, that the flow gives it)."""
    if tools is None or call.name not in tools:
        return call
    taken = set((tools[call.name].spec()["function"].get("parameters") or {}).get("properties") or {})
    arguments = {k: v for k, v in given.items() if k in taken}
    return ToolCall(call.index, call.id, call.name, json.dumps(arguments, ensure_ascii=False))
