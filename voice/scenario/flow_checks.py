"""The expectations of an agent's flow (``--agent``): where the conversation is after a turn, what it
collected, where the call was transferred (pure: events in, checks out).

``step`` is the step entered last before the next turn began (for the conversation's
expectations: at its end); ``state`` holds the fields collected by then, each compared as text
without case ("4" is 4); ``transferred`` is the number or address of a ``transfer`` event.
"""

from __future__ import annotations

from typing import Any

from core.events import Collected, Event, StepEntered, Transfer
from voice.scenario.spec import Expectation

# A check as the scenario's report takes it: its name, whether it passed, the figure, why it failed.
Outcome = tuple[str, bool, str, str]


def flow_checks(expect: Expectation, events: list[Event], until: float) -> list[Outcome]:
    """The flow's checks asked for by ``expect``, on ``events`` up to ``until``."""
    seen = [e for e in events if e.t <= until]
    out: list[Outcome] = []
    if expect.step is not None:
        steps = [e.step for e in seen if isinstance(e, StepEntered)]
        now = steps[-1] if steps else "-"
        ok = now == expect.step
        out.append(("step", ok, now, "" if ok else f"the conversation is in step {now}, not {expect.step}"))
    if expect.state is not None:
        state: dict[str, Any] = {}
        for e in seen:
            if isinstance(e, Collected):
                state.update(e.values)
        wrong = {k: state.get(k) for k, v in expect.state.items() if str(state.get(k, "")).lower() != str(v).lower()}
        figure = "; ".join(f"{k}: {v}" for k, v in state.items()) or "nothing collected"
        why = "" if not wrong else "not as expected: " + ", ".join(f"{k} is {v!r}" for k, v in wrong.items())
        out.append(("state", not wrong, figure, why))
    if expect.transferred is not None:
        to = [e.to for e in seen if isinstance(e, Transfer)]
        ok = expect.transferred in to
        figure = ", ".join(to) or "no transfer"
        out.append(("transferred", ok, figure, "" if ok else f"not transferred to {expect.transferred}"))
    return out
