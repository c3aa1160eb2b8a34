'''Agents as flows of steps, from a file: ``from voice.agent import Agent, Step, Transition``.

An agent file is YAML (agents/restaurant.yaml is a whole one) or a Python module that
defines ``agent``::

    from voice.agent import Agent, Step, Transition

    def book_table(name: str, party_size: int) -> str:
        """Book a table: the name it is under and how many people."""
        return f"Booked for {party_size} under {name}."

    agent = Agent(
        role="You answer the phone at Luigi's. Keep replies short.",
        fields={"name": {"type": "string"}, "party_size": {"type": "integer", "minimum": 1}},
        tools=[book_table],
        steps=[
            Step("details", collect=("name", "party_size"), transitions=(
                Transition("details_complete", "book", "You have the name and the party size.",
                           needs=("name", "party_size")),)),
            Step("book", "Call book_table, then say the booking back.", tools=("book_table",),
                 respond="speak", transitions=(Transition("booked", "goodbye", "The table is booked."),)),
            Step("goodbye", say="Thank you, goodbye!", end=True),
        ],
    )

``python -m voice.agent check FILE`` says whether a file can run (every problem a line);
``python -m voice.agent graph FILE`` draws its steps as a Mermaid flowchart.
:func:`load_agent` reads and checks one (:class:`AgentFile`: the flow and its tools).

The flow itself is :mod:`core.flow` (pure), read as a graph by :mod:`core.flow_graph`; the
loader is :mod:`voice.agent.load`. This is the name users import, kept stable while those move.
'''

from core.flow import Field, Step, Transition
from shell.tools.registry import Say
from voice.agent.load import Agent, AgentFile, AgentFileError, load_agent, one_step_agent

__all__ = [
    "Agent",
    "AgentFile",
    "AgentFileError",
    "Field",
    "Say",
    "Step",
    "Transition",
    "load_agent",
    "one_step_agent",
]
