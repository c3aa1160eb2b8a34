"""The agent's own functions, answered for one session: its transitions.

The model calls them like any tool (:mod:`core.flow` offers them in the step they belong to),
and the flow answers at once (:class:`core.flow.FlowRun`): a transition whose needed fields are
missing moves nothing, and the model is told what to ask for. They take no arguments: any the
model writes are ignored. A transition's new step takes effect for the round that follows its
result (core/tool_rounds.py). The fields themselves are collected by core/collecting.py.
"""

from __future__ import annotations

from core.flow import CallAnswer, Flow, FlowRun
from core.history import History
from core.tool_calls import ToolCall
from shell.tools import ToolResult


class FlowFunctions:
    """One session's answers to its flow's functions."""

    def __init__(self, run: FlowRun, history: History) -> None:
        self.run = run
        self.history = history

    def owns(self, name: str) -> bool:
        """Whether ``name`` is a function of the flow's, offered in the current step."""
        return self.run.owns(name)

    def call(self, call: ToolCall) -> tuple[ToolResult, bool]:
        """The result of ``call`` and whether it changed anything (False: refused, nothing moved)."""
        answer = self.run.move(call.name, self.history.last_user_turn())
        return _result(answer), answer.ok


def resumed_run(flow: Flow, history: History) -> tuple[FlowRun, bool]:
    """The session's place in ``flow``: where its history's last stored turn left it (a resumed
    conversation: True), else at the start."""
    run = FlowRun(flow)
    for turn in reversed(history.turns):
        if "step" in turn.extra:
            # The person's turn keeps where its reply took the flow as soon as it did (core/steps.py).
            run.resume(turn.extra.get("left_at") or turn.extra)
            return run, True
    return run, False


def _result(answer: CallAnswer) -> ToolResult:
    return ToolResult("ok" if answer.ok else "error", answer.result, 0.0)
