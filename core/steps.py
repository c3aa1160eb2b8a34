"""A reply in an agent's flow: the step it enters, and the person's words read for a step's fields.

A transition is taken when its function's result is in (the model called it), or by the flow
itself once what it needs is collected (``auto``). The reply then goes on for the new step, never
the old one: its exact text is said (``say``), and the model speaks after it only if the step
says so (``respond: speak``); a step with no text has the model answer, asked with the new
step's instructions and context and offered its own tools, not its transitions, which wait for
the person's next turn (offered them at once, a 0.5B model moved on again before saying a word).
Entered mid-reply, a step that collects first reads the turn that led there for its fields
("I'd like a table for four" gives the party size). A step that ends the call, or transfers
it, does so once the reply has been heard.

The fields of a turn are read by an extraction request (core/collecting.py); its values the
person said are kept, and the reply goes on: by a transition the flow can now take, else by the
model's answer, told what is known and what is still missing.

Hooks are tools of the agent's that the flow calls itself, each in a round of its own, so a
hook has a tool's timeout and barge-in rules: at a transition the step left's ``on_exit`` and the
step entered's ``on_enter`` run before the new step's own course; the person's turn goes to the
step's ``on_user_turn`` before anything reads it (core/asking.py). :meth:`Steps.hook_done` goes on
with each result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.collecting import extraction_request, kept_values
from core.commands import Command, Emit, EndConversation, Extract, StartResponse
from core.events import Collected, LlmDone, StepEntered, Transfer
from core.flow import FlowRun
from core.history import History
from core.reply import Reply
from core.tool_rounds import ToolRounds

# Transitions one reply may make: a model that moves on and back forever is stopped (it answers in words).
MAX_STEPS_PER_REPLY = 3


class Steps:
    """The flow's rules for one conversation's replies (see the module's docstring)."""

    def __init__(self, tool_rounds: ToolRounds, history: History) -> None:
        self.tool_rounds = tool_rounds
        self.history = history
        # The person's turn read after its hook (``on_user_turn``): the conversation's (core/asking.py).
        self.turn_read: Callable[[Reply, float], list[Command]] = lambda r, t: []

    @property
    def flow(self) -> FlowRun | None:
        return self.tool_rounds.flow

    def entered(self, r: Reply, t: float) -> list[Command]:
        """A transition was taken in reply ``r``: it goes on for the new step, once the hooks of the
        step left (``on_exit``) and of the one entered (``on_enter``) have run."""
        flow = self.flow
        assert flow is not None
        previous = r.tool.steps_entered
        r.tool.steps_entered = flow.entered
        r.tool.steps_moved += flow.entered - previous
        r.tool.rounds_run = r.tool.rounds_refused = 0
        r.messages = self.tool_rounds.restate()
        step = flow.step
        entered = StepEntered(t, step=step.name, previous=flow.previous, response=r.id, via=flow.via)
        out: list[Command] = [Emit(entered)]
        self._keep_place(r)
        if step.transfer:
            out.append(Emit(Transfer(t, to=step.transfer, response=r.id)))
        if step.end or step.transfer:
            out.append(EndConversation(r.id, step.transfer))  # once this reply has been heard
        left = flow.flow.steps.get(flow.previous)
        hooks = [("on_exit", left.on_exit if left is not None else None), ("on_enter", step.on_enter)]
        r.tool.hooks_left = [(kind, name) for kind, name in hooks if isinstance(name, str)]
        return out + self._next_hook(r, t)

    def opened(self, r: Reply, t: float) -> list[Command]:
        """Reply ``r`` opens the conversation in the start step: its ``on_enter`` hook runs, as a
        transition's would, then its words are said (the greeting); the model is not asked."""
        flow = self.flow
        assert flow is not None
        r.tool.opening = True
        r.messages = self.tool_rounds.restate()  # what the model reads if the hook fails (it apologises)
        name = flow.step.on_enter
        r.tool.hooks_left = [("on_enter", name)] if isinstance(name, str) else []
        return self._next_hook(r, t)

    def _next_hook(self, r: Reply, t: float) -> list[Command]:
        """The next of the entry's hooks, or when they have all run, the step's own course."""
        if r.tool.hooks_left:
            kind, name = r.tool.hooks_left.pop(0)
            return self.tool_rounds.call_hook(r, kind, name, {}, t)
        return self._step_course(r, t)

    def _step_course(self, r: Reply, t: float) -> list[Command]:
        """What the step just entered does: its words, then what it collects, calls, or the model's answer."""
        flow, rounds = self.flow, self.tool_rounds
        assert flow is not None
        step = flow.step
        out: list[Command] = []
        text = flow.entry_text()
        if r.tool.opening:  # no one has spoken yet: the greeting, or nothing more
            if text is not None:
                return self.say(r, text, t, move_on=False)
            r.llm_done = True
            return [Emit(LlmDone(t, response=r.id, tokens=r.tokens))]
        if step.collect and r.user_text and r.tool.steps_moved < MAX_STEPS_PER_REPLY:
            if text is not None:  # its words first, then what the turn that led here says of its fields
                out += self._said(r, text)
            return [*out, self.extract(r, r.user_text)]
        if step.call is not None:  # said first, then the tool; the model tells its result
            if text is not None:
                out += self._said(r, text)
            return out + rounds.call_for_step(r, step.call, t)
        if text is not None:
            if step.respond != "speak" or step.end or step.transfer:
                return out + self.say(r, text, t)
            out += self._said(r, text)
            r.messages = [*r.messages, {"role": "assistant", "content": text}]
        tools = rounds.offered(functions=False) if r.tool.steps_moved < MAX_STEPS_PER_REPLY else None
        return out + rounds.ask_again(r, t, tools)

    def hook_done(self, r: Reply, t: float) -> list[Command]:
        """A hook's result is in (core/flow.py). One that failed (it raised, timed out) is told to
        the model as its result, and the model answers: it apologises, and the conversation goes on
        in the step it is in. ``on_enter``: a text it returned is said, then the step's own course;
        ``on_exit``: its result is not used; ``on_user_turn``: ``Say`` is the answer, without the model,
        a text is what the model reads before it answers (a lookup), nothing: the turn goes on as usual."""
        kind = r.tool.hook
        status, result = next(iter(r.tool.results.values()))
        if status != "ok":
            r.tool.hooks_left = []
            self.tool_rounds.with_results(r)
            return self.tool_rounds.ask_again(r, t, None)
        say = r.tool.say_result and bool(result)
        if kind == "on_user_turn" and result and not say:
            self.tool_rounds.with_results(r)
        self.tool_rounds.end_round(r)  # what follows is a round of its own, not the hook's
        if kind == "on_user_turn":
            return self.say(r, result, t) if say else self.turn_read(r, t)
        out = self._said(r, result) if kind == "on_enter" and result else []
        return out + self._next_hook(r, t)

    def say(self, r: Reply, text: str, t: float, move_on: bool = True) -> list[Command]:
        """``text``, word for word, in reply ``r``; then (``move_on``) a transition the flow can take
        at once (an ``auto`` one whose needs are known), else the reply ends: the model is not asked again."""
        flow = self.flow
        assert flow is not None
        out = self._said(r, text)
        auto = flow.auto_transition() if move_on else None
        if auto is not None and r.tool.steps_moved < MAX_STEPS_PER_REPLY and not (flow.step.end or flow.step.transfer):
            flow.move(auto.function, self.history.last_user_turn())
            return out + self.entered(r, t)
        r.llm_done = True
        return [*out, Emit(LlmDone(t, response=r.id, tokens=r.tokens))]

    def reply_cut(self, r: Reply, t: float) -> list[Command]:
        """Reply ``r`` was cut by the person. Where it had entered a step that ends or transfers the
        call, they spoke over its goodbye or handover ("wait, one more thing"): the call stays up
        (shell/phone_line.py), and the conversation goes back to the step before, where they are
        heard; a step that ends has no way on. Any other transition the reply took is kept."""
        flow = self.flow
        if flow is None or not r.tool.steps_moved or not (flow.step.end or flow.step.transfer):
            return []
        left = flow.step_name
        flow.enter(flow.previous, self.history.last_user_turn())
        self._keep_place(r)
        return [Emit(StepEntered(t, step=flow.step_name, previous=left, response=r.id))]

    def _keep_place(self, r: Reply) -> None:
        """Where reply ``r`` has taken the flow (its step and state), kept at once with the person's turn
        it answers (``left_at``): a process killed before the reply's own turn is stored resumes there."""
        flow = self.flow
        turn = next((u for u in reversed(self.history.turns) if u.role == "user"), None)
        # The reply answers that turn, or ends with it (turns said before it, answered with it).
        if flow is None or turn is None or not r.user_text.endswith(turn.text):
            return
        turn.extra["left_at"] = flow.snapshot()
        self.history.changed(turn)  # the store writes it now (shell: the recorder amends the turn)

    @staticmethod
    def _said(r: Reply, text: str) -> list[Command]:
        """The flow's own ``text`` synthesized in reply ``r``, and kept in what the reply generated."""
        r.generated += ("" if not r.generated or r.generated.endswith(" ") else " ") + text
        return r.synthesize([text])

    def call_done(self, r: Reply, t: float) -> list[Command]:
        """The call a step made on entry has its result: said word for word (a tool's result is written
        to be heard), or told by the model where the step says ``respond: speak``."""
        r.tool.step_call = False
        r.messages = self.tool_rounds.restate()
        step = self.flow.step if self.flow is not None else None
        if step is not None and step.respond == "speak":
            return self.tool_rounds.ask_again(r, t, None)
        _, result = next(iter(r.tool.results.values()))
        return self.say(r, result, t)

    def extract(self, r: Reply, said: str) -> Extract:
        """The request that reads ``said`` for the step's fields, after the question before it."""
        assert self.flow is not None
        asked = next((u.text for u in reversed(self.history.turns) if u.role == "assistant" and u.text), "")
        messages, schema = extraction_request(self.flow, asked, said)
        return Extract(r.id, messages, schema)

    def extracted(self, r: Reply, values: dict[str, Any], t: float) -> list[Command]:
        """What reply ``r``'s extraction found (empty: nothing, or it failed): the values the person
        said are kept; the flow moves on by itself if it now can, else the model answers."""
        flow, rounds = self.flow, self.tool_rounds
        if flow is None:
            return []
        kept, dropped = kept_values(flow, values, r.user_text)
        flow.record(kept)
        if kept:
            self._keep_place(r)
        out: list[Command] = [Emit(Collected(t, response=r.id, values=kept, dropped=dropped))]
        auto = flow.auto_transition()
        if auto is not None and r.tool.steps_moved and not kept:
            # Sent back with everything known and nothing new ("No." to a read-back): the person is
            # asked what to change; read the same again, they heard no change (docs/bench/flows.md).
            if flow.step.ask_change:
                return out + self.say(r, flow.fill(flow.step.ask_change) or "", t, move_on=False)
            auto = None  # the model answers, told what is known
        if auto is not None:
            flow.move(auto.function, self.history.last_user_turn())
            return out + self.entered(r, t)
        question = flow.next_question()
        if question is not None:  # the flow's own words for what is still missing
            return out + self.say(r, question, t)
        r.messages = rounds.restate()
        if r.tool.round == 0 and not r.tool.steps_moved:  # the reply's first request
            return [*out, StartResponse(r.id, r.messages, tools=rounds.offered())]
        return out + rounds.ask_again(r, t, rounds.offered(functions=False))
