"""Tool rounds: a reply that calls tools, and the filler while they run.

With ``tools`` (the specs offered to the model), a reply may call them. A call goes to its
tool (``RunTool``) only once it is whole (:class:`~core.tool_calls.ToolCallStream`),
never from a speculative reply before its commit, never after the reply was cut. What the
model said before its calls is spoken while they run; when a round's calls all have results,
the model is asked again with them (``StartResponse`` of the same reply, its next ``round``;
past ``max_tool_rounds`` without tools, so that it answers in words), and its answer goes on
in the same reply, one ledger, one turn. If the tools keep it quiet for ``filler_delay_s``,
``filler`` is said, once a reply. A barge-in discards a call still streaming and stops the
reply's running tools (``StopTools``: each as its policy says). Every result, even one that
came after the cut, is a tool turn in the history (stored by the conversation).

:class:`ToolRounds` holds these rules; a reply's state for them is its
:class:`~core.reply.ToolState`. The conversation decides which reply a report is for and
whether the floor allows a filler; this module decides what the reply's tools do next.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.commands import Command, Emit, RunTool, StartResponse
from core.events import AwaitingTools, ResponseContinued, ToolCallStart
from core.faithful import numbers_given, numbers_in, read_back
from core.flow import FlowRun
from core.grounded import made_up, recent_texts, said_numbers
from core.history import ToolStatus, ToolUse, tool_calls_message, tool_result_message
from core.reply import Reply
from core.tool_calls import ToolCall, ToolCallDelta, ToolCallStream, ToolCallStreamError

HOOK_KINDS = ("on_enter", "on_exit", "on_user_turn")


def is_hook_call(call_id: str) -> bool:
    """Whether call ``call_id`` is one of the flow's hooks (:meth:`ToolRounds.call_hook` names it so)."""
    return call_id.endswith(tuple(f"_{kind}" for kind in HOOK_KINDS))


# Rounds of calls that were all refused unrun, each followed by one more with tools: the model,
# told which tool does not exist or which argument is wrong, tries again.
MAX_REFUSED_ROUNDS = 1


class ToolRounds:
    """The tool rules of one conversation's replies (see the module's docstring)."""

    def __init__(
        self,
        tools: list[dict[str, Any]] | None,
        max_tool_rounds: int,
        filler: str | None,
        filler_delay_s: float,
    ) -> None:
        self.tools = tools or None
        self.servers: dict[str, str] = {}  # tool name -> the MCP server it comes from (the shell's)
        # The tools whose calls must use a number the conversation holds (core/grounded.py; the shell's).
        self.grounded: frozenset[str] = frozenset()
        self.max_tool_rounds = max_tool_rounds
        self.filler = filler
        self.filler_delay_s = filler_delay_s
        # The agent's flow (None: one prompt, every tool offered); in a flow, each step offers its own.
        self.flow: FlowRun | None = None
        # The request for the step just entered, from the history, and what a reply does on entering
        # a step (core/steps.py): both the conversation's, set by it.
        self.restate: Callable[[], list[dict[str, Any]]] = lambda: []
        self.on_step_entered: Callable[[Reply, float], list[Command]] = lambda r, t: []
        self.on_step_call: Callable[[Reply, float], list[Command]] = lambda r, t: []
        self.on_hook: Callable[[Reply, float], list[Command]] = lambda r, t: []

    def offered(self, functions: bool = True) -> list[dict[str, Any]] | None:
        """The tool specs offered now: every one given, or in a flow the step's tools and (with
        ``functions``) the flow's own functions, its transitions."""
        flow = self.flow
        if flow is None:
            return self.tools
        names = set(flow.tool_names())
        specs = [s for s in self.tools or [] if s["function"]["name"] in names]
        return (specs + (flow.function_specs() if functions else [])) or None

    def start(self, r: Reply) -> None:
        """A new reply: its first round's calls are numbered from its id; tools offered if any."""
        r.tool.calls = ToolCallStream(id_prefix=f"call_{r.id}_0_")
        r.tool.offered = self.offered() is not None
        r.tool.steps_entered = self.flow.entered if self.flow is not None else 0

    def call_delta(self, r: Reply, delta: ToolCallDelta, t: float) -> list[Command]:
        """A piece of a tool call the model is writing: the call goes to its tool once whole."""
        if r.tool.round_over or not r.tool.offered:
            return []  # (a model asked without tools that calls one all the same: not run)
        try:
            whole = r.tool.calls.feed(delta)
        except ToolCallStreamError:  # a piece out of order: the call it belongs to was run already
            return []
        out: list[Command] = []
        for call in whole:
            out += self._dispatch(r, call, t)
        return out

    def generation_ended(self, r: Reply, t: float, error: str | None) -> list[Command]:
        """The round's generation ended: its last calls are whole (on an error, none is)."""
        out: list[Command] = []
        if error is None:
            for call in r.tool.calls.finish():
                out += self._dispatch(r, call, t)
        else:
            r.tool.calls.discard()  # a call the failure cut short is not whole: never run
        return out

    def await_results(self, r: Reply, t: float) -> list[Command]:
        """The model asked for tools: the reply goes on once they answer. What it said before
        the calls is spoken meanwhile."""
        r.tool.round_over = True
        out = r.synthesize(r.grouper.flush())
        if r.tool.round_calls:
            out.append(Emit(AwaitingTools(t, response=r.id, calls=len(r.tool.round_calls))))
        return out + self.next_round(r, t)

    def result(
        self, r: Reply, call: ToolCall, status: ToolStatus, result: str, ran: bool, t: float, say: bool = False
    ) -> list[Command]:
        """Call ``call`` of ``r``, which waits for it, has its ``result`` (``say``: a hook's, to be said)."""
        r.tool.running.discard(call.id)
        r.tool.results[call.id] = (status, result)
        r.tool.round_ran = r.tool.round_ran or ran
        r.tool.say_result = say
        if status == "ok" and not r.tool.hook:  # a hook's is no answer the model may fail to read back
            r.tool.ok_results.append(result)
        return self.next_round(r, t)

    def answer_with_results(self, r: Reply) -> list[Command]:
        """The model, asked again with its calls' results, said nothing that can be spoken (it
        wrote JSON, or nothing): the last result that came back ok is said instead, so the
        person hears what the tool found ("84", "timer set for 10 min") rather than silence."""
        chunks = self.read_back(r, r.grouper.flush())
        if chunks or r.tool.round_chunks or not r.tool.ok_results:
            return r.synthesize(chunks)
        return r.synthesize([r.tool.ok_results[-1]])

    def read_back(self, r: Reply, chunks: list[str]) -> list[str]:
        """``chunks`` of the answer given with results, none stating a number it was not given: such
        a chunk is the result itself, said once (core/faithful.py)."""
        if r.tool.round == 0 or not r.tool.ok_results or not chunks:
            return chunks
        if r.tool.known_numbers is None:  # the round's messages are fixed: read once, not per chunk
            r.tool.known_numbers = numbers_given(r.messages) + numbers_in(r.user_text)
        chunks, r.tool.result_said = read_back(chunks, r.tool.known_numbers, r.tool.ok_results[-1], r.tool.result_said)
        return chunks

    def filler_due(self, r: Reply, t: float) -> list[Command]:
        """The filler, if ``r`` has been quiet too long since its calls went out (the tools, then
        the model asked again with their results); the caller checks that it is not paused."""
        if self.filler is None or r.tool.filler_said:
            return []
        quiet = r.quiet_on_tools_s(t)
        if quiet is None or quiet < self.filler_delay_s - 1e-9:
            return []
        r.tool.filler_said = True
        return r.synthesize([self.filler])

    def run_held(self, r: Reply, t: float) -> list[Command]:
        """A speculative reply was committed: the calls it held run now that it is the reply."""
        calls, r.tool.held_calls = r.tool.held_calls, []
        out: list[Command] = []
        for call in calls:
            out += self._run_call(r, call, t)
        return out

    def next_round(self, r: Reply, t: float) -> list[Command]:
        """The round's generation ended with calls, and they all have results: ask the model
        again, with them (past ``max_tool_rounds``, without tools: it must answer in words)."""
        if r.speculative or not r.tool.round_over or r.tool.running:
            return []
        if not r.tool.round_calls:
            # Its calls were all made up: the model is asked again as it was (at the commit, if the reply
            # was speculative), without tools, and never sees them (told why, a 0.5B model read the
            # refusal out to the person).
            r.tool.rounds_refused += 1
            return self.ask_again(r, t, None)
        if r.tool.hook:
            return self.on_hook(r, t)  # its result is the model's to read only where the hook says so
        self.with_results(r)
        if r.tool.step_call:
            return self.on_step_call(r, t)
        if self.flow is not None and self.flow.entered != r.tool.steps_entered:
            return self.on_step_entered(r, t)
        # A round whose calls were all refused unrun (a tool the model made up, arguments that do not
        # fit) does not count: told what was wrong, the model may try again, once.
        if r.tool.round_ran:
            r.tool.rounds_run += 1
        else:
            r.tool.rounds_refused += 1
        again = r.tool.rounds_run < self.max_tool_rounds and r.tool.rounds_refused <= MAX_REFUSED_ROUNDS
        return self.ask_again(r, t, self.offered() if again else None)

    def with_results(self, r: Reply) -> None:
        """The round's calls and their results added to what the model is asked next."""
        uses = [ToolUse(c.id, c.name, c.arguments, r.tool.results[c.id][0]) for c in r.tool.round_calls]
        said = r.generated[r.tool.round_text_from :].strip()
        r.messages = [
            *r.messages,
            tool_calls_message(said, uses),
            *(tool_result_message(u, r.tool.results[u.call_id][1]) for u in uses),
        ]

    def ask_again(self, r: Reply, t: float, tools: list[dict[str, Any]] | None) -> list[Command]:
        """The next round of ``r``: its state anew, and the model asked with ``r.messages`` (and ``tools``)."""
        self._new_round(r)
        r.tool.offered = tools is not None
        return [
            Emit(ResponseContinued(t, response=r.id, round=r.tool.round)),
            StartResponse(r.id, r.messages, tools=tools, round=r.tool.round),
        ]

    def call_for_step(self, r: Reply, name: str, t: float) -> list[Command]:
        """A step calls tool ``name`` itself on entry (``call:``), without arguments (the tool reads the
        state): a round of its own, whose result the model is then asked to tell."""
        self._new_round(r)
        call = ToolCall(0, f"call_{r.id}_{r.tool.round}_step", name, "{}")
        r.tool.round_calls, r.tool.round_over, r.tool.step_call = [call], True, True
        return self._run_call(r, call, t)

    def call_hook(self, r: Reply, kind: str, name: str, arguments: dict[str, Any], t: float) -> list[Command]:
        """The flow calls its hook ``name`` (``kind``: on_enter, on_exit or on_user_turn) in a round of
        its own, with ``arguments`` (those its tool takes are given it): core/steps.py goes on with its result."""
        self._new_round(r)
        call = ToolCall(0, f"call_{r.id}_{r.tool.round}_{kind}", name, "{}")
        r.tool.round_calls, r.tool.round_over, r.tool.hook = [call], True, kind
        return self._run_call(r, call, t, RunTool(r.id, call, hook=kind, given=arguments))

    def end_round(self, r: Reply) -> None:
        """The round is over (a hook's, whose result the flow has used): the next is a new one."""
        self._new_round(r)

    def _new_round(self, r: Reply) -> None:
        r.tool.round += 1
        r.tool.calls = ToolCallStream(id_prefix=f"call_{r.id}_{r.tool.round}_")
        r.tool.round_calls, r.tool.results, r.tool.round_over, r.tool.round_ran = [], {}, False, False
        r.tool.made_up, r.tool.known_numbers = [], None
        r.tool.round_text_from = len(r.generated)
        r.tool.round_chunks, r.tool.hook, r.tool.say_result = 0, "", False

    def _dispatch(self, r: Reply, call: ToolCall, t: float) -> list[Command]:
        """``call`` is whole: it runs now, or at the commit of a speculative reply; a made-up call
        of a grounded tool (core/grounded.py) never runs."""
        if call.name in self.grounded and made_up(call.arguments, said_numbers(recent_texts(r.messages))):
            r.tool.made_up.append(call)
            return []
        r.tool.round_calls.append(call)
        if r.speculative:
            r.tool.held_calls.append(call)
            return []
        return self._run_call(r, call, t)

    def _run_call(self, r: Reply, call: ToolCall, t: float, run: RunTool | None = None) -> list[Command]:
        """``call`` goes to its tool (``run``: the command that sends it, when it is a hook's)."""
        r.tool.running.add(call.id)
        if r.tool.since is None:
            r.tool.since = t
        server = self.servers.get(call.name, "")
        start = ToolCallStart(
            t, response=r.id, call_id=call.id, name=call.name, arguments=call.arguments, server=server
        )
        return [Emit(start), run or RunTool(r.id, call)]
