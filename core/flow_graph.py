"""A flow read as a graph: the problems found before it runs, and the flow drawn as Mermaid.

:func:`problems` is what ``python -m voice.agent check FILE`` and every start-up run: a
transition to a step that does not exist, a step no path from the start reaches, a step with
no way on (no transition, no end, no transfer), a name offered twice in one step, a collected
field the agent does not declare or whose schema is not one a model can be held to. Each
problem is one line naming the step. :func:`mermaid` draws the same definition.
"""

from __future__ import annotations

from core.flow import NAME, Flow, Step

# The JSON schema types a collected field may have (what the argument checker and vLLM's
# structured output both take for one value).
FIELD_TYPES = {"string", "integer", "number", "boolean"}


def problems(flow: Flow, known_tools: set[str] | None = None) -> list[str]:
    """Every problem of ``flow``, one line each (empty: it can run). ``known_tools``: the names
    of the tools defined for it (None: not checked)."""
    out: list[str] = []
    if flow.start not in flow.steps:
        out.append(f"start: no step named {flow.start!r}")
    for name, f in flow.fields.items():
        out += [f"fields.{name}: {p}" for p in _field_problems(f.schema)]
    for name in flow.tools:
        if known_tools is not None and name not in known_tools:
            out.append(f"tools: no tool named {name!r}")
    out += _hook_problems({"on_user_turn": flow.on_user_turn, "on_tool_result": flow.on_tool_result}, known_tools)
    for step in flow.steps.values():
        out += [f"step {step.name}: {p}" for p in _step_problems(flow, step, known_tools)]
    if flow.start in flow.steps:
        reached = reachable(flow)
        unreached = [s for s in flow.steps if s not in reached]
        out += [f"step {s}: no path from the start ({flow.start}) reaches it" for s in unreached]
    return out


def reachable(flow: Flow) -> set[str]:
    """The steps some path of transitions from the start reaches (the start included)."""
    seen = {flow.start}
    todo = [flow.start]
    while todo:
        step = flow.steps.get(todo.pop())
        for t in step.transitions if step else ():
            if t.to in flow.steps and t.to not in seen:
                seen.add(t.to)
                todo.append(t.to)
    return seen


def _step_problems(flow: Flow, step: Step, known_tools: set[str] | None) -> list[str]:
    out: list[str] = []
    if not NAME.fullmatch(step.name):
        out.append("a step's name is letters, digits and _")
    for t in step.transitions:
        if t.to not in flow.steps:
            out.append(f"{t.function} goes to {t.to!r}, which is no step")
        if not NAME.fullmatch(t.function):
            out.append(f"{t.function!r} cannot be a function's name (letters, digits and _)")
        for n in t.needs:
            if n not in flow.fields:
                out.append(f"{t.function} needs {n!r}, which is no field of the agent")
    for n in step.collect:
        if n not in flow.fields:
            out.append(f"collects {n!r}, which is no field of the agent (fields: {', '.join(flow.fields) or 'none'})")
    if step.ask_change and not step.collect:
        out.append("ask_change: the step collects nothing, so it is never said")
    if step.call is not None and known_tools is not None and step.call not in known_tools:
        out.append(f"call: no tool named {step.call!r}")
    for n in step.tools:
        if known_tools is not None and n not in known_tools:
            out.append(f"tools: no tool named {n!r}")
    hooks = {"on_enter": step.on_enter, "on_exit": step.on_exit, "on_user_turn": step.on_user_turn}
    out += _hook_problems(hooks, known_tools)
    offered = [*dict.fromkeys((*flow.tools, *step.tools)), *step.function_names()]
    twice = sorted({n for n in offered if offered.count(n) > 1})
    if twice:
        out.append(f"offers {', '.join(twice)} twice (a tool and a function of the flow share a name)")
    if not step.transitions and not step.end and not step.transfer and not _is_only_step(flow, step):
        out.append("no way on: no transition, and it neither ends the conversation nor transfers it")
    if step.end and step.transitions:
        out.append("ends the conversation on entry, so its transitions are never taken")
    if (step.end or step.transfer) and not step.say and step.respond != "speak" and step.call is None:
        out.append("ends or transfers the call without saying anything first (say: ..., or respond: speak)")
    if step.context not in ("all", "none", "summary") and not _is_turn_count(step.context):
        out.append(f"context {step.context!r}: all, none, summary or a number of turns")
    if step.respond not in ("wait", "speak"):
        out.append(f"respond {step.respond!r}: wait or speak")
    return out


def _hook_problems(hooks: dict[str, object], known_tools: set[str] | None) -> list[str]:
    """A hook names one of the agent's tools (a Python file's function is one: its loader named it)."""
    out = []
    for key, hook in hooks.items():
        if hook is None:
            continue
        if not isinstance(hook, str):
            out.append(f"{key}: the name of a tool is needed, not {type(hook).__name__}")
        elif known_tools is not None and hook not in known_tools:
            out.append(f"{key}: no tool named {hook!r}")
    return out


def _is_turn_count(context: object) -> bool:
    """A positive number of turns (a bool is an int to Python, never a number of turns)."""
    return isinstance(context, int) and not isinstance(context, bool) and context > 0


def _is_only_step(flow: Flow, step: Step) -> bool:
    """A one-step agent (today's: a prompt and its tools) needs no way on."""
    return len(flow.steps) == 1


def _field_problems(schema: object) -> list[str]:
    if not isinstance(schema, dict):
        return ["its schema is not a mapping (e.g. {type: integer, minimum: 1})"]
    kind = schema.get("type")
    if "enum" in schema:
        values = schema["enum"]
        ok = isinstance(values, list) and values and all(isinstance(v, str | int | float | bool) for v in values)
        return [] if ok else ["enum: a list of plain values"]
    if kind not in FIELD_TYPES:
        return [f"type {kind!r}: one of {', '.join(sorted(FIELD_TYPES))} (or an enum)"]
    return []


def mermaid(flow: Flow) -> str:
    """The flow as a Mermaid flowchart: each step a node (the start marked, an end or a transfer
    drawn as such, what it collects and its hooks written in it), each transition an arrow
    labelled with its function."""
    node = _node_ids(flow)
    lines = ["flowchart TD", f"    {node[None]}(( )) --> {node.get(flow.start, flow.start)}"]
    for step in flow.steps.values():
        label = step.name
        if step.collect:
            label += "<br/>collects " + ", ".join(step.collect)
        for kind in ("on_enter", "on_exit", "on_user_turn"):
            if isinstance(hook := getattr(step, kind), str):
                label += f"<br/>{kind}: {hook}"
        if step.end:
            lines.append(f'    {node[step.name]}(["{label}<br/>ends the call"])')
        elif step.transfer:
            lines.append(f'    {node[step.name]}[/"{label}<br/>transfers to {_quoted(step.transfer)}"/]')
        else:
            lines.append(f'    {node[step.name]}["{label}"]')
    for step in flow.steps.values():
        for t in step.transitions:
            lines.append(f"    {node[step.name]} -->|{t.function}| {node.get(t.to, t.to)}")
    return "\n".join(lines) + "\n"


def _node_ids(flow: Flow) -> dict[str | None, str]:
    """Each step's Mermaid id (its name), and the start marker's (None): an id no step has, and
    never ``end``, which Mermaid reads as the end of a subgraph."""
    taken = set(flow.steps)
    ids: dict[str | None, str] = {}
    for name in (None, *flow.steps):
        if name is not None and name.lower() != "end":
            ids[name] = name
            continue
        wanted = name or "start"
        while wanted in taken or wanted.lower() == "end":
            wanted += "_"
        taken.add(wanted)
        ids[name] = wanted
    return ids


def _quoted(text: str) -> str:
    """Text inside a Mermaid label's quotes (a quote there would end it)."""
    return text.replace('"', "#quot;")


__all__ = ["FIELD_TYPES", "mermaid", "problems", "reachable"]
