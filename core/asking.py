"""What the model is asked: the system prompt and the turns it reads.

The prompt is the agent's step's instructions (in a flow, :mod:`core.flow`), the session's own
words after them (the tools prompt, or the whole prompt outside a flow), and in a language other
than English which one to answer in. The turns are those the step's context holds (every one
outside a flow). A stored turn of the person's keeps its language and, in a flow, the step and
state it was said in, which is where a resumed conversation starts again.
"""

from __future__ import annotations

from typing import Any

from core.commands import Command, StartResponse
from core.floor import Floor
from core.flow import Transition
from core.reply import Reply
from core.steps import Steps
from core.tool_rounds import ToolRounds


class Asking:
    """The requests of one conversation's replies (see the module's docstring)."""

    def __init__(self, floor: Floor, tool_rounds: ToolRounds, system_prompt: str | None, steps: Steps) -> None:
        self.floor = floor
        self.tool_rounds = tool_rounds  # its flow: the step whose instructions and context apply
        self.system_prompt = system_prompt
        self.steps = steps

    def messages(self, text: str) -> list[dict[str, str]]:
        """The LLM request that answers ``text``: the conversation so far, then it. In a language
        other than English the system prompt says which, and that the answer is in it: the reply
        follows the person's last utterance (the messages differ, so a speculation started in
        another language is not committed)."""
        return [*self.step_messages(), {"role": "user", "content": text}]

    def prompt(self) -> str | None:
        """The system prompt: the agent's step's instructions (in a flow), the session's own words,
        and in a language other than English which language to answer in."""
        flow = self.tool_rounds.flow
        parts = [flow.instructions() if flow is not None else None, self.system_prompt]
        language = self.floor.language.current
        if language.code != "en":
            parts.append(f"The person speaks {language.name}: always answer in {language.name}.")
        return " ".join(p for p in parts if p) or None

    def step_messages(self) -> list[dict[str, str]]:
        """The conversation as the model reads it now: the prompt, then the turns its step's context
        holds (all of them outside a flow)."""
        flow = self.tool_rounds.flow
        since = flow.context_from if flow is not None else 0
        return self.floor.history.messages(self.prompt(), since=since, opening=flow is None)

    def said_in(self) -> dict[str, Any]:
        """What a stored turn of the person's keeps: its language (nothing while held to English), and
        in a flow the step and state it was said in."""
        code = self.floor.language.reported
        flow = self.tool_rounds.flow
        return {**({"language": code} if code else {}), **(flow.snapshot() if flow is not None else {})}

    def question(self) -> str:
        """In a step that collects fields, the question the person answers now (the assistant's last
        words), which the recognizer reads as the text before their answer: alone, Whisper base heard
        "Rossi." as "Brassy" and "Two." as "10 10" (docs/bench/flows.md). "": not collecting."""
        if not self.collecting():
            return ""
        turns = self.floor.history.turns
        return next((u.text for u in reversed(turns) if u.role == "assistant" and u.text), "")

    def collecting(self) -> bool:
        """Whether the step collects fields: each turn is read for them before the model answers."""
        flow = self.tool_rounds.flow
        return flow is not None and bool(flow.step.collect)

    def heard_transition(self, text: str) -> Transition | None:
        """The transition the person's ``text`` takes by its phrases (None: none; the model decides)."""
        flow = self.tool_rounds.flow
        return None if flow is None else flow.heard_transition(text, self.floor.language.current)

    def says_the_same(self, r: Reply, went_on: str) -> bool:
        """Whether ``went_on``, said on from the turn reply ``r`` answers, asks what that turn did: it
        says phrases of the transition the turn's took and nothing more ("Sure, | go ahead." at a
        read-back). Whisper may hear the turn's own last words again before it ("No, at 8.")."""
        flow = self.tool_rounds.flow
        if flow is None or r.heard_move is None:
            return False
        step, function = r.heard_move
        return flow.says_only(step, function, went_on, self.floor.language.current)

    def reads_first(self) -> bool:
        """Whether the person's turn is read before the model may answer it: the step collects fields,
        or a hook is given each turn first (a speculative reply would not know what it finds)."""
        flow = self.tool_rounds.flow
        return flow is not None and (bool(flow.step.collect) or flow.turn_hook() is not None)

    def first_request(self, r: Reply, text: str, t: float) -> list[Command]:
        """Reply ``r`` begins: the step's hook for the person's turn is called first, if it has one
        (core/steps.py goes on with :meth:`read_turn`); else :meth:`read_turn` at once."""
        flow = self.tool_rounds.flow
        hook = flow.turn_hook() if flow is not None else None
        if hook is not None and not r.tool.turn_hooked:
            r.tool.turn_hooked = True
            return self.tool_rounds.call_hook(r, "on_user_turn", hook, {"text": text}, t)
        return self.read_turn(r, t)

    def read_turn(self, r: Reply, t: float) -> list[Command]:
        """The person's turn, read: a transition its phrases take is taken, and the reply speaks for
        the new step; in a step that collects, it is read for its fields first (core/steps.py); else
        the model answers (with what a hook added to its request)."""
        steps, flow, text = self.steps, self.tool_rounds.flow, r.user_text
        heard = self.heard_transition(text)
        if flow is not None and heard is not None:
            r.heard_move = (flow.step_name, heard.function)
            flow.move(heard.function, self.floor.history.last_user_turn())
            return steps.entered(r, t)
        if self.collecting():
            return [steps.extract(r, text)]
        return [StartResponse(r.id, r.messages, tools=self.tool_rounds.offered(), round=r.tool.round)]
