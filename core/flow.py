"""An agent as a flow of steps: what each step tells the model, offers it, collects and says.

An agent is a role (the instructions of every step) and named steps. A step has its own
instructions, the tools it offers (beside the agent's tools for every step), the functions
that move the conversation to another step (:class:`Transition`), the state fields it
collects, what the model's context holds on entry (:data:`Context`), an exact text said on
entry without the model, and whether the model speaks on entry or waits for the person.
A step with ``end`` ends the conversation once its text was heard; one with ``transfer``
hands the call to a number or address. Hooks (``on_enter``, ``on_exit``, ``on_user_turn``, and the
agent's ``on_tool_result``) are tools of the agent's that the flow calls itself (core/steps.py).

:class:`FlowRun` is one conversation's place in the flow: its step and its state. It is
pure: the functions the model calls are answered here (:meth:`FlowRun.call`), and the shell
runs them as tools, so that a transition takes effect when its function's result is in,
under the tools' rules for barge-in and timeouts (docs/guide/agents.md). Nothing here does
I/O; the agent file is read by :mod:`voice.agent`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from core.language import Language
from core.phrases import holds_phrase, without_phrases
from core.words import words

# What the model's context holds when a step is entered: every turn so far ("all"), none of
# them ("none"), the last N turns (an int), or a summary of what came before ("summary").
Context = Literal["all", "none", "summary"] | int
Respond = Literal["wait", "speak"]
# A hook: the name of one of the agent's tools (a Python agent file may give the function, which
# its loader turns into its name: what the flow holds is always a name).
Hook = str | Callable[..., Any]

_FIELD_IN_TEXT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_LAST_WORD = re.compile(r"(\w+)\s*$")


class FlowError(ValueError):
    """A flow that cannot run as written (one line: the file, the step, the problem)."""


@dataclass(frozen=True)
class Transition:
    """A function the model calls to move on: ``function`` (its name, what the model reads:
    ``description``) takes the conversation to step ``to``. ``needs``: the fields that must be
    collected first (a call before they are is answered with what is missing, and nothing moves).
    ``auto``: taken by the flow itself, never offered to the model, as soon as what it needs is
    collected (a small model called such functions before it knew anything: core/collecting.py)."""

    function: str
    to: str
    description: str
    needs: tuple[str, ...] = ()
    auto: bool = False
    # Phrases that take it when the person's turn holds one ("yes", "go ahead"), before the model is
    # asked: told to call a function when the caller says yes, the 0.5B model called it for 1 of 6 answers.
    when: tuple[str, ...] = ()


@dataclass(frozen=True)
class Field:
    """A piece of information the agent collects: its name and its JSON schema
    (``{"type": "integer", "minimum": 1}``), what the model reads about it, and the question the
    flow asks for it, word for word, while it is missing (None: the model asks in its words), and
    an example answer to it with the value it gives (``("Three of us.", 3)``), which the model is
    shown when it reads the person's answer (core/collecting.py)."""

    name: str
    schema: dict[str, Any]
    description: str = ""
    ask: str | None = None
    example: tuple[str, Any] | None = None


@dataclass(frozen=True)
class Step:
    name: str
    instructions: str = ""
    tools: tuple[str, ...] = ()  # the agent's tools this step offers, by name
    transitions: tuple[Transition, ...] = ()
    collect: tuple[str, ...] = ()  # the fields this step asks for (the agent's fields, by name)
    context: Context = "all"
    say: str | None = None  # said on entry, word for word, without the model ({field}: its value)
    # Said instead of moving on when the step is entered again with all it collects known and the
    # words that led back changed nothing ("No."): the same read-back again would answer nobody.
    ask_change: str | None = None
    respond: Respond = "wait"  # on entry: wait for the person, or let the model speak first
    call: str | None = None  # a tool the flow calls itself on entry, without arguments (it reads the state)
    end: bool = False  # the conversation ends once ``say`` was heard
    transfer: str | None = None  # the call goes to this number or SIP address on entry
    on_enter: Hook | None = None  # called on entry, before ``say``; a text it returns is said first
    on_exit: Hook | None = None  # called when a transition leaves the step
    on_user_turn: Hook | None = None  # called with each finished turn of the person's in the step

    def function_names(self) -> list[str]:
        """The names of the flow's own functions this step offers the model (its transitions but the automatic)."""
        return [t.function for t in self.transitions if not t.auto]


@dataclass(frozen=True)
class Flow:
    """An agent: its ``role`` (what every step's instructions start with), its steps by name, the
    one it starts in, the fields it collects, and the tools every step offers."""

    role: str
    steps: dict[str, Step]
    start: str
    fields: dict[str, Field] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    name: str = "agent"
    on_user_turn: Hook | None = None  # every step's (a step's own is called instead)
    on_tool_result: Hook | None = None  # called with each tool's result, which it may rewrite
    hold: str | None = None  # the sound played while a reply waits on a slow tool (core/hold_sound.py)

    def step(self, name: str) -> Step:
        return self.steps[name]

    @classmethod
    def one_step(cls, role: str, tools: tuple[str, ...] = ()) -> Flow:
        """Today's agent: one prompt, the tools given, no step to move to."""
        return cls(role=role, steps={"main": Step("main")}, start="main", tools=tools)


@dataclass(frozen=True)
class CallAnswer:
    """What a flow function's call comes to: ``result`` (what the model is told), ``ok``
    (False: nothing changed, and ``result`` says why), ``entered`` (the step it moved to)."""

    result: str
    ok: bool = True
    entered: Step | None = None


@dataclass
class FlowRun:
    """One conversation's place in its flow: the step, the state, and where the step's context starts."""

    flow: Flow
    step_name: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    context_from: int = 0  # the first history turn the step's context holds
    summary: str | None = None  # what came before, when the step's context is a summary
    prepared: tuple[int, str] | None = None  # the newest summary ready: the turns it covers, its text
    entered: int = 0  # steps entered so far, the start included
    previous: str = ""  # the step before the last one entered
    via: str = ""  # the transition it was entered by ("": none, as at the start)

    def __post_init__(self) -> None:
        if not self.step_name:
            self.step_name = self.flow.start

    @property
    def step(self) -> Step:
        return self.flow.steps[self.step_name]

    # -- what the model reads -------------------------------------------

    def instructions(self) -> str:
        """The system prompt in this step: the role, the step's instructions, and what the
        state already holds or still lacks, so the model asks for what is missing."""
        parts = [self.flow.role.strip(), self.step.instructions.strip()]
        known = {k: v for k, v in self.state.items() if v is not None}
        if known:
            parts.append("Known so far: " + "; ".join(f"{k}: {v}" for k, v in known.items()) + ".")
        missing = self.missing(self.step.collect)
        if missing:
            parts.append(f"Still to ask for: {', '.join(missing)}. Ask for {missing[0]} now, in one short question.")
        if self.summary:
            parts.append(f"Earlier in the conversation: {self.summary}")
        return " ".join(p for p in parts if p)

    def tool_names(self) -> list[str]:
        """The agent's tools offered now: every step's, then this step's (each once)."""
        names: list[str] = []
        for n in (*self.flow.tools, *self.step.tools):
            if n not in names:
                names.append(n)
        return names

    def function_specs(self) -> list[dict[str, Any]]:
        """The flow's own functions offered now, as tool specs: the step's transitions (not the
        automatic ones), each without arguments."""
        return [
            _spec(t.function, t.description, {"type": "object", "properties": {}})
            for t in self.step.transitions
            if not t.auto
        ]

    def turn_hook(self) -> str | None:
        """The hook each finished turn of the person's is given to first (None: none): the step's, else the agent's."""
        hook = self.step.on_user_turn or self.flow.on_user_turn
        return hook if isinstance(hook, str) else None

    def missing(self, names: tuple[str, ...] | list[str]) -> list[str]:
        return [n for n in names if self.state.get(n) is None]

    # -- what the model calls -------------------------------------------

    def owns(self, function: str) -> bool:
        """Whether ``function`` is one of the flow's own functions offered in this step."""
        return function in self.step.function_names()

    def record(self, values: dict[str, Any]) -> None:
        """Values the person said for the step's fields (core/collecting.py): they overwrite what
        was there (a correction)."""
        self.state.update({k: v for k, v in values.items() if k in self.step.collect and v is not None})

    def heard_transition(self, said: str, language: Language) -> Transition | None:
        """The step's first transition one of whose phrases ``said`` holds, and whose needs are known."""
        for t in self.step.transitions:
            if t.when and not self.missing(t.needs) and holds_phrase(said, t.when, language):
                return t
        return None

    def says_only(self, step: str, function: str, said: str, language: Language) -> bool:
        """Whether ``said`` holds a phrase of step ``step``'s transition ``function``, and nothing else
        but closing words and backchannels ("Go ahead." to a read-back; not "No, at 8.": "at 8")."""
        when = next((t.when for t in self.flow.steps[step].transitions if t.function == function), ())
        rest, found = without_phrases(said, (*when, *language.closings), language, numbers=True)
        return found and all(w in language.backchannels for w in words(rest))

    def auto_transition(self) -> Transition | None:
        """The step's first automatic transition whose needs are all collected (None: none yet)."""
        return next((t for t in self.step.transitions if t.auto and not self.missing(t.needs)), None)

    def move(self, function: str, history_len: int) -> CallAnswer:
        """A transition's call: the step it names is entered, unless fields it needs are missing.
        ``history_len``: the turns stored so far (where a context that starts anew starts)."""
        t = next((t for t in self.step.transitions if t.function == function), None)
        if t is None:
            return CallAnswer(f"{function} cannot be called in step {self.step_name}", ok=False)
        missing = self.missing(t.needs)
        if missing:
            return CallAnswer(f"Not yet: ask the person for {', '.join(missing)} first.", ok=False)
        return CallAnswer(f"Now in step {t.to}.", entered=self.enter(t.to, history_len, via=function))

    def enter(self, name: str, history_len: int, via: str = "") -> Step:
        """Step ``name`` is entered (by transition ``via``; "": none): its context starts where its
        rule says. ``history_len``: where the turn that led here begins, which every context holds."""
        step = self.flow.steps[name]
        self.previous, self.step_name, self.via = self.step_name, name, via
        self.entered += 1
        if step.context == "all":
            self.context_from, self.summary = 0, None
        elif step.context == "summary":  # the newest one prepared, and every turn after it (core/summary.py)
            upto, self.summary = self.prepared if self.prepared is not None else (0, None)
            self.context_from = min(upto, history_len)
        elif step.context == "none":
            self.context_from, self.summary = history_len, None
        else:
            self.context_from, self.summary = max(0, history_len - int(step.context)), None
        return step

    def prepare_summary(self, upto: int, text: str) -> None:
        """A summary of the history's first ``upto`` turns came back: the next step entered whose
        context is a summary starts from it (an older one than the newest kept is dropped)."""
        if text and (self.prepared is None or upto >= self.prepared[0]):
            self.prepared = (upto, text)

    def next_question(self) -> str | None:
        """The question for the step's first missing field, if it has one of its own (None: none)."""
        missing = self.missing(self.step.collect)
        return self.fill(self.flow.fields[missing[0]].ask) if missing else None

    def entry_text(self) -> str | None:
        """The step's exact text with the state's values in it (a field not known yet is left as written)."""
        return self.fill(self.step.say)

    def fill(self, text: str | None) -> str | None:
        """``text`` with the state's values in place of its ``{field}``s (one not known yet is left as written)."""
        if text is None:
            return None
        return _FIELD_IN_TEXT.sub(lambda m: _filled(self.state.get(m.group(1)), m.group(0), text[: m.start()]), text)

    def snapshot(self) -> dict[str, Any]:
        """What is stored with a finalized turn: the step and the state (resumed from it)."""
        return {"step": self.step_name, "state": dict(self.state)}

    def resume(self, stored: dict[str, Any]) -> None:
        """Back at a stored snapshot's step and state (a step the flow no longer has: the start)."""
        name = stored.get("step")
        self.step_name = name if isinstance(name, str) and name in self.flow.steps else self.flow.start
        state = stored.get("state")
        self.state.clear()  # in place: the tools' context holds this dict
        self.state.update(state if isinstance(state, dict) else {})


def _filled(value: Any, written: str, before: str) -> str:
    """A field's value as said in a text after ``before``; not known (None, as :meth:`FlowRun.missing`
    reads it): as written. A value that starts with the word before it says it once: "at {time}"
    with the time kept as "at 8" is "at 8", not "at at 8"."""
    if value is None:
        return written
    said = str(value)
    last = _LAST_WORD.search(before)
    if last and said.lower().startswith(last.group(1).lower() + " "):
        said = said[len(last.group(1)) + 1 :]
    return said


def _spec(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}
