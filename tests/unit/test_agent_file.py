"""Agent files (voice/agent): YAML and Python read into the same flow and tools; every mistake one
line naming the file, the place in it and the problem; the restaurant example; the command line."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

import voice.agent
from core.flow import Field, Flow, Step, Transition
from shell.tools import Tools, load_tools
from voice.agent import AgentFile, AgentFileError, load_agent, one_step_agent

ROOT = Path(__file__).resolve().parents[2]
RESTAURANT = ROOT / "agents" / "restaurant.yaml"

TOOLS_FILE = '''
__all__ = ["book_table"]

def book_table(name: str, party_size: int) -> str:
    """Book a table."""
    return f"Booked for {party_size} under {name}."
'''

AGENT_YAML = """
role: You book tables.
tools: [builtin, my_tools.py]
everywhere: [get_current_time]
fields:
  name: {type: string, description: the name the table is under}
  party_size: {type: integer, minimum: 1, maximum: 12}
steps:
  ask:
    instructions: Ask for the name and the party size.
    collect: [name, party_size]
    context: 6
    next:
      done: {to: book, description: You know both., needs: [name, party_size]}
      person: help
  book:
    tools: [book_table]
    respond: speak
    next: {booked: bye}
  bye: {say: Goodbye!, end: true}
  help: {say: One moment., transfer: "+15550100"}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(path: Path) -> str:
    with pytest.raises(AgentFileError) as info:
        load_agent(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}")
    return message


# -- YAML ---------------------------------------------------------------------


def test_a_yaml_agent_file(tmp_path):
    write(tmp_path, "my_tools.py", TOOLS_FILE)
    agent = load_agent(write(tmp_path, "booking.yaml", AGENT_YAML))
    flow = agent.flow
    assert isinstance(agent, AgentFile) and agent.path == tmp_path / "booking.yaml"
    assert flow.name == "booking"  # the file's stem
    assert flow.role == "You book tables." and flow.start == "ask"  # the first step listed
    assert flow.tools == ("get_current_time",)
    assert flow.fields["name"] == Field("name", {"type": "string"}, "the name the table is under")
    assert flow.fields["party_size"] == Field("party_size", {"type": "integer", "minimum": 1, "maximum": 12})
    ask = flow.steps["ask"]
    assert ask.collect == ("name", "party_size") and ask.context == 6 and ask.respond == "wait"
    assert ask.transitions == (
        Transition("done", "book", "You know both.", ("name", "party_size")),
        Transition("person", "help", "Go on to step help."),
    )
    assert flow.steps["book"] == Step(
        "book", tools=("book_table",), respond="speak", transitions=(Transition("booked", "bye", "Go on to step bye."),)
    )
    assert flow.steps["bye"] == Step("bye", say="Goodbye!", end=True)
    assert flow.steps["help"].transfer == "+15550100"
    assert "book_table" in agent.tools and "calculate" in agent.tools
    assert agent.tools["book_table"].source == str(tmp_path / "my_tools.py")


def test_name_start_and_a_single_tools_source(tmp_path):
    text = """
    name: luigi
    role: You book tables.
    tools: builtin
    start: b
    steps:
      a: {say: Bye., end: true}
      b: {next: {leave: a}}
    """
    agent = load_agent(write(tmp_path, "x.yml", text))
    assert agent.flow.name == "luigi" and agent.flow.start == "b"
    assert "calculate" in agent.tools


FLOW_YAML = """
role: You book tables.
tools: my_tools.py
fields:
  name:
    type: string
    description: the name the table is under
    ask: Under what name?
    example: {said: "It's for Maria.", value: Maria}
  party_size:
    type: integer
    minimum: 1
    example: {said: Just me., value: 1}
  outside: {type: boolean, example: {said: Inside please., value: false}}
  note: {type: string, example: {said: Nothing else., value: null}}
steps:
  greeting:
    say: Hello!
    next:
      wants_booking: {to: details, when: [book, a table]}
      wants_person: {to: bye, when: a person}
  details:
    collect: [name, party_size]
    next:
      complete: {to: book, needs: [name, party_size], auto: true}
  book:
    call: book_table
    next: {done: {to: bye, auto: true}}
  bye: {say: Goodbye!, end: true}
"""


def test_when_auto_call_ask_and_example_are_read(tmp_path):
    write(tmp_path, "my_tools.py", TOOLS_FILE)
    flow = load_agent(write(tmp_path, "booking.yaml", FLOW_YAML)).flow
    assert flow.fields["name"] == Field(
        "name", {"type": "string"}, "the name the table is under", "Under what name?", ("It's for Maria.", "Maria")
    )
    assert flow.fields["party_size"] == Field(
        "party_size", {"type": "integer", "minimum": 1}, "", None, ("Just me.", 1)
    )
    assert flow.fields["outside"].example == ("Inside please.", False)
    assert flow.fields["note"].example == ("Nothing else.", None)  # a value of null is a value given
    assert flow.steps["greeting"].transitions == (
        Transition("wants_booking", "details", "Go on to step details.", when=("book", "a table")),
        Transition("wants_person", "bye", "Go on to step bye.", when=("a person",)),  # one phrase: a text
    )
    assert flow.steps["details"].transitions == (
        Transition("complete", "book", "Go on to step book.", ("name", "party_size"), auto=True),
    )
    assert flow.steps["book"] == Step(
        "book", call="book_table", transitions=(Transition("done", "bye", "Go on to step bye.", auto=True),)
    )


def test_a_call_of_a_tool_no_one_defined_is_a_problem_of_the_flow(tmp_path):
    write(tmp_path, "my_tools.py", TOOLS_FILE)
    path = write(tmp_path, "booking.yaml", FLOW_YAML.replace("call: book_table", "call: book_tabel"))
    assert error_of(path) == f"{path}: step book: call: no tool named 'book_tabel'"
    assert load_agent(path, other_tools=["book_tabel"]).flow.steps["book"].call == "book_tabel"


def test_phrases_are_stripped_of_the_spaces_around_them(tmp_path):
    text = "role: r\nsteps:\n  a: {next: {go: {to: b, when: ['  yes ', go ahead]}}}\n  b: {say: hi, end: true}\n"
    (go,) = load_agent(write(tmp_path, "agent.yaml", text)).flow.steps["a"].transitions
    assert go.when == ("yes", "go ahead")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("role: r\nsteps: {a: {end: true, say: hi}}\nvoices: [x]\n", "unknown key 'voices'"),
        ("role: r\nsteps: {a: {end: true, say: hi, mood: calm}}\n", "steps.a: unknown key 'mood'"),
        ("role: r\nsteps: {a: {next: {b: {to: a, if: now}}}}\n", "steps.a.next.b: unknown key 'if'"),
        ("role: r\nsteps: {a: {next: {b: {to: a, when: [1]}}}}\n", "steps.a.next.b.when: a list of phrases is needed"),
        ("role: r\nsteps: {a: {next: {b: {to: a, when: ['']}}}}\n", "steps.a.next.b.when: a list of phrases"),
        ("role: r\nsteps: {a: {next: {b: {to: a, when: {x: 1}}}}}\n", "steps.a.next.b.when: a list of phrases"),
        ("role: r\nsteps: {a: {next: {b: {to: a, auto: 'yes'}}}}\n", "steps.a.next.b.auto: true or false is needed"),
        ("role: r\nsteps: {a: {say: hi, end: true, call: [f]}}\n", "steps.a.call: text is needed, not a list"),
        (
            "role: r\nsteps: {a: {say: hi, end: true}}\nfields: {n: {type: string, ask: [x]}}\n",
            "fields.n.ask: text is needed, not a list",
        ),
        (
            "role: r\nsteps: {a: {say: hi, end: true}}\nfields: {n: {type: string, example: {said: x}}}\n",
            "fields.n.example.value: the value the example answer gives is needed",
        ),
        (
            "role: r\nsteps: {a: {say: hi, end: true}}\nfields: {n: {type: string, example: {value: x}}}\n",
            "fields.n.example.said: is needed",
        ),
        (
            "role: r\nsteps: {a: {say: hi, end: true}}\nfields: {n: {type: string, example: Maria}}\n",
            "fields.n.example: a mapping is needed, not str 'Maria'",
        ),
        (
            "role: r\nsteps: {a: {say: hi, end: true}}\n"
            "fields: {n: {type: string, example: {said: x, value: x, y: 1}}}\n",
            "fields.n.example: unknown key 'y'",
        ),
        ("steps: {a: {end: true, say: hi}}\n", "role: is needed"),
        ("role: [r]\nsteps: {a: {end: true, say: hi}}\n", "role: text is needed, not a list"),
        ("role: r\n", "steps: an agent needs at least one step"),
        ("role: r\nsteps: [a, b]\n", "steps: a mapping is needed, not a list"),
        ("role: r\nsteps: {a: {end: 'yes', say: hi}}\n", "steps.a.end: true or false is needed"),
        (
            "role: r\nsteps: {a: {end: true, say: hi, transfer: +15550100}}\n",
            "steps.a.transfer: text is needed, not the number 15550100 (quote it)",
        ),
        ("role: r\nsteps: {a: {end: true, say: hi, collect: name}}\n", "steps.a.collect: a list of names is needed"),
        (
            "role: r\nsteps: {a: {end: true, say: hi, context: 2.5}}\n",
            "steps.a.context: all, none, summary or a number",
        ),
        ("role: r\nsteps: {a: {next: {b: [a]}}}\n", "steps.a.next.b: a step's name or {to: STEP, description: ...}"),
        ("role: r\nsteps: {a: {next: {b: {description: x}}}}\n", "steps.a.next.b.to: is needed"),
        ("role: r\nsteps: {a: {next: {b: {to: a, needs: [1]}}}}\n", "steps.a.next.b.needs[0]: text is needed"),
        (
            "role: r\nsteps: {a: {next: {yes: a}}}\n",
            "steps.a.next: a function's name is text, not true (a yes/no): quote it",
        ),
        ("role: r\nsteps: {a: {say: hi, end: true}}\nfields: {n: integer}\n", "fields.n: a mapping is needed"),
        ("role: r\nsteps: {a: {say: hi, end: true}}\nfields: {n: {}}\n", "fields.n: a JSON schema is needed"),
        ("role: r\nsteps: {a: {say: hi, end: true}}\neverywhere: get_time\n", "everywhere: a list of names is needed"),
        ("role: r\nsteps: {a: {say: hi, end: true}}\ntools: [nowhere.py]\n", "tools: "),
    ],
)
def test_yaml_mistakes_are_one_line_naming_the_place(tmp_path, text, expected):
    path = write(tmp_path, "agent.yaml", text)
    assert error_of(path).startswith(f"{path}: {expected}")


def test_a_file_that_is_not_yaml_names_the_line(tmp_path):
    path = write(tmp_path, "agent.yaml", "role: r\nsteps:\n  a: {say: hi\n  b: 1\n")
    assert error_of(path).startswith(f"{path}:4: not YAML: ")


def test_a_step_given_twice_is_refused(tmp_path):
    path = write(tmp_path, "agent.yaml", "role: r\nsteps:\n  a: {say: hi, end: true}\n  a: {say: ho, end: true}\n")
    assert error_of(path) == f"{path}:4: not YAML: 'a' is given twice in one mapping"


def test_a_step_may_build_on_another_with_a_yaml_merge(tmp_path):
    text = """
    role: r
    steps:
      a: &polite {say: Hello., next: {go: b}}
      b: {<<: *polite, say: Bye., end: true, next: {}}
    """
    steps = load_agent(write(tmp_path, "agent.yaml", text)).flow.steps
    assert steps["b"] == Step("b", say="Bye.", end=True)


def test_a_file_that_cannot_be_read_or_is_no_agent_file(tmp_path):
    assert (
        error_of(tmp_path / "missing.yaml")
        == f"{tmp_path / 'missing.yaml'}: cannot be read (No such file or directory)"
    )
    assert error_of(tmp_path / "missing.py") == f"{tmp_path / 'missing.py'}: no such agent file"
    assert error_of(write(tmp_path, "a.json", "{}")).endswith("an agent file is a .yaml or a .py file")


def test_a_tools_file_with_a_syntax_error(tmp_path):
    write(tmp_path, "broken.py", "__all__ = ['f']\ndef f(:\n")
    path = write(tmp_path, "agent.yaml", "role: r\ntools: broken.py\nsteps: {a: {say: hi, end: true}}\n")
    assert error_of(path) == f"{path}: tools: {tmp_path / 'broken.py'}:2: syntax error: invalid syntax"


def test_the_flows_problems_are_each_a_line(tmp_path):
    text = """
    role: r
    fields: {n: {type: object}}
    steps:
      a: {collect: [n, m], tools: [nope], next: {go: b}}
      c: {say: hi, end: true}
    """
    path = write(tmp_path, "agent.yaml", text)
    with pytest.raises(AgentFileError) as info:
        load_agent(path)
    assert info.value.lines == (
        f"{path}: fields.n: type 'object': one of boolean, integer, number, string (or an enum)",
        f"{path}: step a: go goes to 'b', which is no step",
        f"{path}: step a: collects 'm', which is no field of the agent (fields: n)",
        f"{path}: step a: tools: no tool named 'nope'",
        f"{path}: step c: no path from the start (a) reaches it",
    )
    assert str(info.value) == f"{path}: " + "; ".join(line.removeprefix(f"{path}: ") for line in info.value.lines)


def test_tools_from_elsewhere_may_be_named(tmp_path):
    path = write(tmp_path, "agent.yaml", "role: r\neverywhere: [lookup]\nsteps: {a: {say: hi, end: true}}\n")
    assert error_of(path) == f"{path}: tools: no tool named 'lookup'"
    assert load_agent(path, other_tools=["lookup"]).flow.tools == ("lookup",)


# -- Python -------------------------------------------------------------------

AGENT_PY = '''
from voice.agent import Agent, Field, Step, Transition
from voice.tools import tool


@tool(cancel_on_barge_in=False)
def book_table(name: str) -> str:
    """Book a table under a name."""
    return f"Booked under {name}."


agent = Agent(
    role="You book tables.",
    fields=[Field("name", {"type": "string"}, "the name")],
    tools=[book_table, "builtin"],
    everywhere=["get_current_time"],
    steps=[
        Step("ask", collect=["name"], transitions=[Transition("done", "book", "Known.", needs=["name"])]),
        Step("book", tools=["book_table"], respond="speak", transitions=[Transition("booked", "bye", "")]),
        Step("bye", say="Goodbye!", end=True),
    ],
)
'''


def test_a_python_agent_file(tmp_path):
    agent = load_agent(write(tmp_path, "booking.py", AGENT_PY))
    flow = agent.flow
    assert flow.name == "booking" and flow.start == "ask" and flow.tools == ("get_current_time",)
    assert flow.fields == {"name": Field("name", {"type": "string"}, "the name")}
    assert flow.steps["ask"] == Step(
        "ask", collect=("name",), transitions=(Transition("done", "book", "Known.", ("name",)),)
    )
    assert flow.steps["book"].tools == ("book_table",)
    assert flow.steps["book"].transitions == (Transition("booked", "bye", "Go on to step bye."),)
    assert agent.tools["book_table"].options.cancel_on_barge_in is False
    assert agent.tools["book_table"].source == str(tmp_path / "booking.py")
    assert "calculate" in agent.tools
    hash(flow.steps["ask"])  # tuples, not the lists written: a Step stays hashable


def test_python_and_yaml_come_to_the_same_flow_with_when_auto_call_ask_and_example(tmp_path):
    py = """
    from voice.agent import Agent, Field, Step, Transition
    from voice.tools import ToolContext

    def book_table(context: ToolContext) -> str:
        \"\"\"Book it.\"\"\"
        return "Booked."

    agent = Agent(
        role="r",
        tools=[book_table],
        fields=[Field("n", {"type": "integer"}, "how many", ask="How many?", example=("Two of us.", 2))],
        steps=[Step("a", say="Hi.", transitions=[Transition("go", "b", "", when=["yes", "book"])]),
               Step("b", collect=["n"], transitions=[Transition("known", "c", "", needs=["n"], auto=True)]),
               Step("c", call="book_table", transitions=[Transition("done", "d", "", auto=True)]),
               Step("d", say="Bye.", end=True)],
    )
    """
    yml = """
    role: r
    tools: tools.py
    fields:
      n: {type: integer, description: how many, ask: "How many?", example: {said: Two of us., value: 2}}
    steps:
      a: {say: Hi., next: {go: {to: b, when: ["yes", book]}}}
      b: {collect: [n], next: {known: {to: c, needs: [n], auto: true}}}
      c: {call: book_table, next: {done: {to: d, auto: true}}}
      d: {say: Bye., end: true}
    """
    tools_py = """
    from voice.tools import ToolContext
    __all__ = ["book_table"]

    def book_table(context: ToolContext) -> str:
        \"\"\"Book it.\"\"\"
        return "Booked."
    """
    write(tmp_path, "tools.py", tools_py)
    from_python = load_agent(write(tmp_path, "same.py", py)).flow
    from_yaml = load_agent(write(tmp_path, "same.yaml", yml)).flow
    assert from_python == from_yaml
    assert from_yaml.fields["n"] == Field("n", {"type": "integer"}, "how many", "How many?", ("Two of us.", 2))
    assert from_yaml.steps["a"].transitions[0].when == ("yes", "book")
    assert from_yaml.steps["b"].transitions[0].auto and from_yaml.steps["c"].call == "book_table"
    listed = py.replace('example=("Two of us.", 2)', 'example=["Two of us.", 2]')
    assert listed != py
    assert load_agent(write(tmp_path, "listed.py", listed)).flow.fields["n"].example == ("Two of us.", 2)


def test_python_and_yaml_come_to_the_same_flow(tmp_path):
    py = """
    from voice.agent import Agent, Step, Transition
    agent = Agent(
        role="r",
        fields={"n": {"type": "integer", "description": "how many"}},
        steps=[Step("a", collect=("n",), transitions=(Transition("go", "b", "Go on to step b."),)),
               Step("b", say="Bye.", end=True)],
    )
    """
    yml = """
    role: r
    fields: {n: {type: integer, description: how many}}
    steps:
      a: {collect: [n], next: {go: b}}
      b: {say: Bye., end: true}
    """
    assert load_agent(write(tmp_path, "same.py", py)).flow == load_agent(write(tmp_path, "same.yaml", yml)).flow


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = 1\n", "agent: `agent = Agent(...)` is needed (voice.agent.Agent), it is nothing"),
        ("agent = {'role': 'r'}\n", "agent: `agent = Agent(...)` is needed (voice.agent.Agent), it is dict"),
        ("import nowhere_at_all\n", "importing it failed: ModuleNotFoundError: No module named 'nowhere_at_all'"),
        (
            "from voice.agent import Agent\nagent = Agent(role='r', steps=[])\n",
            "steps: a list of Step objects is needed",
        ),
        ("from voice.agent import Agent\nagent = Agent(role='r', steps=['a'])\n", "steps[0]: a Step is needed"),
        (
            "from voice.agent import Agent, Step\nagent = Agent(role='', steps=[Step('a', say='x', end=True)])\n",
            "role: is needed",
        ),
        (
            "from voice.agent import Agent, Step\nagent = Agent(role='r', steps=[Step('a', collect='n')])\n",
            "steps.a.collect: a list of names is needed",
        ),
        (
            "from voice.agent import Agent, Step\nagent = Agent(role='r', steps=[Step('a', end='yes')])\n",
            "steps.a.end: true or false is needed",
        ),
        (
            "from voice.agent import Agent, Step\nagent = Agent(role='r', steps=[Step('a', transitions=['b'])])\n",
            "steps.a.transitions[0]: a Transition is needed",
        ),
        (
            "from voice.agent import Agent, Step\n"
            "agent = Agent(role='r', steps=[Step('a', say='x', end=True), Step('a', say='y', end=True)])\n",
            "steps[1]: a step named 'a' comes before it",
        ),
        (
            "from voice.agent import Agent, Step\n"
            "def f(x: int) -> int:\n    return x\n"
            "agent = Agent(role='r', tools=[f], steps=[Step('a', say='x', end=True)])\n",
            "tools[0]: tool f has no docstring",
        ),
        (
            "from voice.agent import Agent, Step\nagent = Agent(role='r', steps=[Step('a')], fields={'n': 'int'})\n",
            "fields.n: a mapping is needed",
        ),
        (
            "from voice.agent import Agent, Field, Step\n"
            "agent = Agent(role='r', steps=[Step('a')], fields=[Field('n', {'type': 'integer'}, example=3)])\n",
            'fields[0].example: (said, value) is needed, e.g. ("Three of us.", 3), not the number 3',
        ),
        (
            "from voice.agent import Agent, Field, Step\n"
            "agent = Agent(role='r', steps=[Step('a')],\n"
            "              fields=[Field('n', {'type': 'integer'}, example={'said': 'Two.', 'value': 2})])\n",
            'fields[0].example: (said, value) is needed, e.g. ("Three of us.", 3), not a mapping',
        ),
        (
            "from voice.agent import Agent, Field, Step\n"
            "agent = Agent(role='r', steps=[Step('a')], fields=[Field('n', {'type': 'integer'}, example=(2, 2))])\n",
            "fields[0].example[0]: text is needed, not the number 2",
        ),
        (
            "from voice.agent import Agent, Field, Step\n"
            "agent = Agent(role='r', steps=[Step('a')], fields=[Field('n', {'type': 'integer'}, ask=['How many?'])])\n",
            "fields[0].ask: text is needed, not a list",
        ),
        (
            "from voice.agent import Agent, Step\nagent = Agent(role='r', steps=[Step('a', transitions=[])])\n",
            "",  # a one-step agent: nothing wrong with it
        ),
    ],
)
def test_python_mistakes_are_one_line_naming_the_place(tmp_path, text, expected):
    path = write(tmp_path, "agent.py", text)
    if not expected:
        assert load_agent(path).flow.steps["a"] == Step("a")
        return
    assert error_of(path).startswith(f"{path}: {expected}")


def test_a_python_file_with_a_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "agent.py", "from voice.agent import Agent\n\nagent = Agent(\n  role='r',,\n)\n")
    assert error_of(path).startswith(f"{path}:4: syntax error: ")


def test_the_example_of_the_packages_docstring_works(tmp_path):
    doc = voice.agent.__doc__ or ""
    code = doc.split("::\n", 1)[1].split("\n\n``python", 1)[0]
    agent = load_agent(write(tmp_path, "example.py", code))
    assert list(agent.flow.steps) == ["details", "book", "goodbye"]
    assert "book_table" in agent.tools


def test_the_public_names():
    assert sorted(voice.agent.__all__) == sorted(
        ["Agent", "Say", "Step", "Transition", "Field", "AgentFile", "AgentFileError", "load_agent", "one_step_agent"]
    )
    assert voice.agent.Step is Step and issubclass(AgentFileError, ValueError)


def test_one_step_agent():
    tools = load_tools(["builtin"])
    agent = one_step_agent("You are helpful.", tools)
    assert agent.path is None and agent.tools is tools
    assert agent.flow == Flow.one_step(
        "You are helpful.", ("calculate", "end_conversation", "get_current_time", "set_timer")
    )
    assert one_step_agent("Hi.", Tools()).flow.steps == {"main": Step("main")}


# -- The restaurant example ---------------------------------------------------


def test_the_restaurant_example_loads_and_checks():
    agent = load_agent(RESTAURANT)
    flow = agent.flow
    assert flow.name == "luigi" and flow.start == "greeting"
    assert list(flow.steps) == ["greeting", "details", "confirm", "book", "goodbye", "handover"]
    assert flow.steps["greeting"].say == "Luigi's, good evening. How can I help?"
    assert flow.steps["details"].collect == ("name", "party_size", "date", "time")
    for name in flow.steps["details"].collect:
        f = flow.fields[name]
        assert f.ask and f.ask.endswith("?") and f.example is not None and "ask" not in f.schema
    assert flow.fields["party_size"] == Field(
        "party_size",
        {"type": "integer", "minimum": 1, "maximum": 12},
        "how many people",
        "For how many people?",
        ("Three of us.", 3),
    )
    (complete,) = [t for t in flow.steps["details"].transitions if t.function == "details_complete"]
    assert complete.to == "confirm" and complete.needs == ("name", "party_size", "date", "time") and complete.auto
    assert {t.function: t.to for t in flow.steps["confirm"].transitions} == {
        "confirmed": "book",
        "change_details": "details",
    }
    confirmed = flow.steps["confirm"].transitions[1]
    assert confirmed.function == "confirmed" and "yes" in confirmed.when and not confirmed.auto
    book = flow.steps["book"]
    assert book.call == "book_table" and book.tools == () and book.respond == "wait"
    assert book.transitions == (Transition("done", "goodbye", "Go on to step goodbye.", auto=True),)
    assert flow.steps["goodbye"].end and flow.steps["goodbye"].say == "Thank you for calling Luigi's. Goodbye!"
    assert flow.steps["handover"].transfer == "+15550100"
    for step in ("greeting", "details"):
        assert ("wants_person", "handover") in [(t.function, t.to) for t in flow.steps[step].transitions]
    assert "book_table" in agent.tools


def test_the_restaurant_books_from_the_state_with_a_reference_from_the_details():
    book = load_agent(RESTAURANT).tools["book_table"]
    details = {"name": "Rossi", "party_size": 4, "date": "Friday", "time": "8 pm"}
    first = book.function(SimpleNamespace(state=details))
    assert first.startswith("Booked: a table for 4 under Rossi on Friday at 8 pm, reference LU-")
    assert book.function(SimpleNamespace(state=dict(details))) == first
    assert book.function(SimpleNamespace(state={**details, "party_size": 5})) != first
    assert book.function(SimpleNamespace(state={**details, "party_size": 1})).startswith("Booked: a table for 1 person")
    missing = book.function(SimpleNamespace(state={"name": "Rossi", "party_size": 4, "date": ""}))
    assert missing == "Not booked: the date, time is still missing."
    assert book.options.cancel_on_barge_in is False
    assert book.parameters.get("properties", {}) == {}  # the model gives it nothing: it reads the state


# -- The command line ---------------------------------------------------------


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voice.agent", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_check_says_ok():
    done = cli("check", "agents/restaurant.yaml")
    assert (done.returncode, done.stdout) == (0, "agents/restaurant.yaml: ok (6 steps, 7 transitions)\n")


def test_check_prints_every_problem(tmp_path):
    path = write(tmp_path, "agent.yaml", "role: r\nsteps:\n  a: {next: {go: b}}\n  details: {say: hi}\n")
    done = cli("check", path)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"{path}: step a: go goes to 'b', which is no step",
        f"{path}: step details: no way on: no transition, and it neither ends the conversation nor transfers it",
        f"{path}: step details: no path from the start (a) reaches it",
    ]
    broken = write(tmp_path, "broken.yaml", "role: r\nsteps: {a: {end: maybe}}\n")
    done = cli("check", broken)
    assert (done.returncode, done.stdout) == (1, f"{broken}: steps.a.end: true or false is needed, not str 'maybe'\n")


def test_graph_prints_the_mermaid_flowchart():
    done = cli("graph", RESTAURANT)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("flowchart TD\n") and "    confirm -->|confirmed| book\n" in done.stdout


def test_graph_draws_a_flow_with_problems_and_says_them(tmp_path):
    path = write(tmp_path, "agent.yaml", "role: r\nsteps:\n  a: {next: {go: b}}\n")
    done = cli("graph", path)
    assert done.returncode == 1 and "    a -->|go| b\n" in done.stdout
    assert done.stderr == f"{path}: step a: go goes to 'b', which is no step\n"
    done = cli("graph", tmp_path / "missing.yaml")
    assert (done.returncode, done.stdout) == (1, "") and "cannot be read" in done.stderr


def test_check_reads_a_python_agent_file(tmp_path):
    path = write(tmp_path, "booking.py", AGENT_PY)
    done = cli("check", path)
    assert (done.returncode, done.stdout) == (0, f"{path}: ok (3 steps, 2 transitions)\n")


def test_bad_usage_exits_2():
    for args in ((), ("draw", "agents/restaurant.yaml"), ("check",)):
        done = cli(*args)
        assert done.returncode == 2 and "usage: python -m voice.agent" in done.stderr


def test_a_step_may_name_a_tool_an_mcp_server_will_list(tmp_path):
    # With MCP servers given, their tools are listed only once they start: the names are not checked.
    text = "role: r\nsteps:\n  only:\n    tools: [look_up_order]\n"
    path = write(tmp_path, "shop.yaml", text)
    with pytest.raises(AgentFileError, match="no tool named 'look_up_order'"):
        load_agent(path)
    assert load_agent(path, other_tools=None).flow.steps["only"].tools == ("look_up_order",)
