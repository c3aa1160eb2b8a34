"""A flow read as a graph (core/flow_graph.py): each kind of problem found, one line naming its step;
a good flow and today's one-step agent have none; the flow drawn as Mermaid."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from core.flow import Field, Flow, Step, Transition
from core.flow_graph import mermaid, problems, reachable
from voice.agent import load_agent

ROOT = Path(__file__).resolve().parents[2]

FIELDS = {"name": Field("name", {"type": "string"}), "size": Field("size", {"type": "integer", "minimum": 1})}


def go(function: str, to: str, needs: tuple[str, ...] = (), auto: bool = False) -> Transition:
    return Transition(function, to, f"Go on to {to}.", needs, auto)


def good() -> Flow:
    """Ask, confirm, book: every step reached, each with a way on."""
    return Flow(
        role="You book tables.",
        steps={
            "ask": Step("ask", "Ask for the name and size.", collect=("name", "size"),
                        transitions=(go("done", "book", ("name", "size")),)),
            "book": Step("book", tools=("book_table",), respond="speak", context=4,
                         transitions=(go("booked", "bye"),)),
            "bye": Step("bye", say="Goodbye {name}!", end=True),
        },
        start="ask",
        fields=dict(FIELDS),
        tools=("get_time",),
    )  # fmt: skip


def with_step(flow: Flow, step: Step) -> Flow:
    return dataclasses.replace(flow, steps={**flow.steps, step.name: step})


def test_a_good_flow_has_no_problems():
    assert problems(good(), known_tools={"book_table", "get_time"}) == []
    assert reachable(good()) == {"ask", "book", "bye"}


def test_the_one_step_flow_has_no_problems():
    flow = Flow.one_step("You are helpful.", ("get_time",))
    assert problems(flow, known_tools={"get_time"}) == []
    assert problems(Flow.one_step("You are helpful.")) == []


def test_a_transition_to_no_step():
    flow = with_step(good(), Step("book", transitions=(go("booked", "byebye"),)))
    assert problems(flow) == [
        "step book: booked goes to 'byebye', which is no step",
        "step bye: no path from the start (ask) reaches it",
    ]


def test_a_step_no_path_reaches():
    flow = with_step(good(), Step("lost", say="Hm.", end=True))
    assert problems(flow) == ["step lost: no path from the start (ask) reaches it"]


def test_a_start_that_is_no_step():
    assert problems(dataclasses.replace(good(), start="hello")) == ["start: no step named 'hello'"]


def test_a_step_with_no_way_on():
    flow = with_step(good(), Step("book", "Book it."))
    found = problems(flow)
    assert "step book: no way on: no transition, and it neither ends the conversation nor transfers it" in found


def test_a_name_offered_twice():
    # A transition named as a tool offered in the step.
    flow = with_step(good(), Step("book", tools=("book_table",), transitions=(go("book_table", "bye"),)))
    assert problems(flow) == ["step book: offers book_table twice (a tool and a function of the flow share a name)"]
    # Collecting offers no function (the fields are read by extraction): a transition may be named `record`.
    flow = with_step(good(), Step("ask", collect=("name",), transitions=(go("record", "book"),)))
    assert problems(flow) == []
    # An automatic transition is never offered to the model: it may share a tool's name.
    auto = Transition("book_table", "bye", "Booked.", auto=True)
    flow = with_step(good(), Step("book", tools=("book_table",), transitions=(auto,)))
    assert problems(flow) == []
    # A tool offered everywhere and named in a step again is offered once.
    flow = with_step(good(), Step("book", tools=("get_time",), transitions=(go("booked", "bye"),)))
    assert problems(flow) == []


def test_a_collected_field_the_agent_does_not_declare():
    flow = with_step(good(), Step("ask", collect=("name", "phone"), transitions=(go("done", "book"),)))
    assert problems(flow) == ["step ask: collects 'phone', which is no field of the agent (fields: name, size)"]


def test_an_ask_change_where_nothing_is_collected():
    flow = with_step(good(), Step("ask", ask_change="What should change?", transitions=(go("done", "book"),)))
    assert problems(flow) == ["step ask: ask_change: the step collects nothing, so it is never said"]


def test_a_transition_that_needs_no_field():
    flow = with_step(good(), Step("ask", collect=("name",), transitions=(go("done", "book", ("phone",)),)))
    assert problems(flow) == ["step ask: done needs 'phone', which is no field of the agent"]


def test_a_bad_field_schema():
    bad = {
        "when": Field("when", {"type": "object"}),
        "who": Field("who", "a string"),  # type: ignore[arg-type]
        "pick": Field("pick", {"enum": []}),
    }
    flow = dataclasses.replace(good(), fields={**FIELDS, **bad})
    assert problems(flow) == [
        "fields.when: type 'object': one of boolean, integer, number, string (or an enum)",
        "fields.who: its schema is not a mapping (e.g. {type: integer, minimum: 1})",
        "fields.pick: enum: a list of plain values",
    ]
    ok = {"pick": Field("pick", {"enum": ["inside", "outside"]}), "yes": Field("yes", {"type": "boolean"})}
    assert problems(dataclasses.replace(good(), fields={**FIELDS, **ok})) == []


def test_a_bad_context():
    for context in ("most", 0, -2, True, 2.5):
        flow = with_step(good(), Step("book", context=context, transitions=(go("booked", "bye"),)))  # type: ignore[arg-type]
        assert problems(flow) == [f"step book: context {context!r}: all, none, summary or a number of turns"]
    for context in ("all", "none", "summary", 1, 10):
        flow = with_step(good(), Step("book", context=context, transitions=(go("booked", "bye"),)))  # type: ignore[arg-type]
        assert problems(flow) == []


def test_a_bad_respond():
    flow = with_step(good(), Step("book", respond="talk", transitions=(go("booked", "bye"),)))  # type: ignore[arg-type]
    assert problems(flow) == ["step book: respond 'talk': wait or speak"]


def test_tools_no_one_defined():
    assert problems(good(), known_tools={"book_table"}) == ["tools: no tool named 'get_time'"]
    assert problems(good(), known_tools={"get_time"}) == ["step book: tools: no tool named 'book_table'"]
    assert problems(good()) == []  # None: not checked


def test_an_end_that_says_nothing_or_has_transitions():
    flow = with_step(good(), Step("bye", end=True, transitions=(go("again", "ask"),)))
    assert problems(flow) == [
        "step bye: ends the conversation on entry, so its transitions are never taken",
        "step bye: ends or transfers the call without saying anything first (say: ..., or respond: speak)",
    ]
    flow = with_step(good(), Step("bye", transfer="+15550100"))
    assert problems(flow) == [
        "step bye: ends or transfers the call without saying anything first (say: ..., or respond: speak)"
    ]
    # The model speaking on entry, or a tool called on entry whose result is said, says something.
    assert problems(with_step(good(), Step("bye", transfer="+15550100", respond="speak"))) == []
    assert problems(with_step(good(), Step("bye", end=True, call="book_table"))) == []


def test_names_a_model_cannot_call():
    flow = with_step(good(), Step("book", transitions=(go("book it", "bye"),)))
    assert problems(flow) == ["step book: 'book it' cannot be a function's name (letters, digits and _)"]


def test_mermaid_draws_every_step_and_transition_of_the_restaurant():
    flow = load_agent(ROOT / "agents" / "restaurant.yaml").flow
    drawn = mermaid(flow)
    assert drawn.startswith("flowchart TD\n")
    assert "start(( )) --> greeting" in drawn
    for step in flow.steps.values():
        for t in step.transitions:
            assert f"    {step.name} -->|{t.function}| {t.to}\n" in drawn
    assert 'goodbye(["goodbye<br/>ends the call"])' in drawn
    assert 'handover[/"handover<br/>transfers to +15550100"/]' in drawn
    assert 'details["details<br/>collects name, party_size, date, time"]' in drawn


def test_mermaid_names_no_node_end_and_keeps_the_start_marker_apart():
    """Mermaid reads ``end`` as the end of a subgraph; a step named ``start`` is not the marker."""
    flow = Flow(
        role="r",
        steps={"start": Step("start", transitions=(go("finish", "end"),)), "end": Step("end", say="Bye.", end=True)},
        start="start",
    )
    drawn = mermaid(flow)
    assert "start_(( )) --> start\n" in drawn
    assert "start -->|finish| end_\n" in drawn
    assert "\n    end" not in drawn.replace("end_", "")


def test_a_call_names_a_tool_that_must_exist():
    flow = with_step(good(), Step("book", call="book_table", transitions=(go("booked", "bye", auto=True),)))
    assert problems(flow, known_tools={"book_table", "get_time"}) == []
    misspelt = with_step(good(), Step("book", call="book_tabel", transitions=(go("booked", "bye", auto=True),)))
    assert problems(misspelt, known_tools={"book_table", "get_time"}) == ["step book: call: no tool named 'book_tabel'"]
    assert problems(misspelt) == []  # None: not checked


def test_automatic_and_heard_transitions_are_edges_of_the_graph():
    flow = Flow(
        role="r",
        steps={
            "a": Step("a", transitions=(Transition("yes", "b", "", when=("yes",)),)),
            "b": Step("b", call="book", transitions=(go("done", "c", auto=True),)),
            "c": Step("c", say="Bye.", end=True),
        },
        start="a",
    )
    assert problems(flow, known_tools={"book"}) == []
    assert reachable(flow) == {"a", "b", "c"}
    drawn = mermaid(flow)
    assert "    a -->|yes| b\n" in drawn and "    b -->|done| c\n" in drawn


def test_an_automatic_transition_to_no_step_or_needing_no_field():
    flow = with_step(good(), Step("book", transitions=(go("booked", "byebye", ("phone",), auto=True),)))
    assert problems(flow) == [
        "step book: booked goes to 'byebye', which is no step",
        "step book: booked needs 'phone', which is no field of the agent",
        "step bye: no path from the start (ask) reaches it",
    ]
