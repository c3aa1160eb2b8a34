"""Which steps and transitions of each agent the scenarios reached: ``python -m voice.scenario run --coverage``.

A flow is tested like code, and like code its tests leave parts of it unrun: a step no scenario
reaches, a transition no scenario takes (a correction, a handover from the middle of a step). From
the ``step_entered`` events of each scenario with an agent (``agent: {agent: FILE}``), this lists per
agent file the steps and transitions reached and those none did.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from core.events import Event, StepEntered
from core.flow import Flow


@dataclass
class FlowCoverage:
    """One agent file's steps and transitions, and which the scenarios reached."""

    path: str
    flow: Flow
    scenarios: list[str] = field(default_factory=list)
    steps: set[str] = field(default_factory=set)
    transitions: set[tuple[str, str]] = field(default_factory=set)  # (step, function)

    def all_transitions(self) -> list[tuple[str, str, str]]:
        """(step, function, to) for every transition of the flow, in the file's order."""
        return [(name, t.function, t.to) for name, step in self.flow.steps.items() for t in step.transitions]

    def missed_steps(self) -> list[str]:
        return [name for name in self.flow.steps if name not in self.steps]

    def missed_transitions(self) -> list[tuple[str, str, str]]:
        return [t for t in self.all_transitions() if t[:2] not in self.transitions]


def coverage(runs: Iterable[tuple[str, str, Flow, list[Event]]]) -> list[FlowCoverage]:
    """Per agent file, what its scenarios reached; ``runs``: (scenario, agent file, its flow, events)."""
    out: dict[str, FlowCoverage] = {}
    for scenario, path, flow, events in runs:
        cov = out.setdefault(path, FlowCoverage(path, flow))
        cov.scenarios.append(scenario)
        for e in events:
            if isinstance(e, StepEntered):
                cov.steps.add(e.step)
                if e.via:
                    cov.transitions.add((e.previous, e.via))
    return list(out.values())


def coverage_table(covs: list[FlowCoverage]) -> str:
    """A few lines per agent file: what was reached of it, then what was not."""
    lines = []
    for c in covs:
        steps, transitions = len(c.flow.steps), len(c.all_transitions())
        reached = steps - len(c.missed_steps())
        taken = transitions - len(c.missed_transitions())
        where = os.path.normpath(os.path.relpath(c.path) if os.path.isabs(c.path) else c.path)
        count = f"{len(c.scenarios)} scenario{'s' if len(c.scenarios) != 1 else ''}"
        lines.append(f"{where} ({count}): steps {reached} of {steps}, transitions {taken} of {transitions}")
        if c.missed_steps():
            lines.append(f"  steps no scenario reached: {', '.join(c.missed_steps())}")
        for step, function, to in c.missed_transitions():
            lines.append(f"  not taken: {step} --{function}--> {to}")
    return "\n".join(lines) if lines else "coverage: no scenario ran an agent's flow (agent: {agent: FILE})"
