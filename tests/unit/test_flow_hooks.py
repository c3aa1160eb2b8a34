"""An agent's hooks through the real Session, on virtual time, with the stand-in engines.

A hook is one of the agent's tools that the flow calls itself (core/steps.py): ``on_user_turn`` with
each finished turn of the person's (its ``Say`` is the answer without the model, its text what the
model reads first), ``on_enter`` and ``on_exit`` around a transition, the agent's ``on_tool_result``
with each tool's result. A hook that fails is a tool error the model answers, and the session goes
on. The helpers are test_flow_session.py's.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from test_flow_session import call, converse, make, names, of, replies_said, steps

from core.events import ResponseStart, ToolCallEnd, ToolCallStart
from core.flow import Flow, Step, Transition
from core.flow_graph import mermaid, problems
from core.tool_rounds import is_hook_call
from shell.tools import Tools, load_tools, tool
from voice.agent import Say, load_agent
from voice.tools import ToolContext

SEEN: list[tuple[str, str, str]] = []  # (hook, step it ran in, what it was given)


def opening_hours(context: ToolContext, text: str) -> Say | str | None:
    """Answers "when are you open" itself; adds the specials to anything about food; else nothing."""
    SEEN.append(("opening_hours", context.step, text))
    if "open" in text.lower():
        return Say("We open at noon.")
    if "eat" in text.lower():
        return "Today's specials: risotto and tiramisu."
    context.state["last_said"] = text
    return None


def broken(context: ToolContext, text: str) -> str:
    """Fails on every turn."""
    raise RuntimeError("the CRM is down")


def greet_booking(context: ToolContext) -> str:
    """Entering the booking step."""
    SEEN.append(("greet_booking", context.step, ""))
    context.state["booking_started"] = True
    return "Lovely."


def leave_chat(context: ToolContext) -> None:
    """Leaving the chat step."""
    SEEN.append(("leave_chat", context.step, ""))


def price_in_words(name: str, result: str) -> str:
    """Rewrites the clock's result."""
    return f"{name} said: {result}"


@tool(timeout_s=0.05)
async def slow(text: str) -> str:
    """Never answers in time."""
    await asyncio.sleep(5)
    return "too late"


def hooks() -> Tools:
    t = Tools()
    for f in (opening_hours, broken, greet_booking, leave_chat, price_in_words, slow):
        t.add(f)
    return t


def chat(**hooked: str) -> Flow:
    return Flow(
        role="You work at Luigi's.",
        steps={
            "chat": Step(
                "chat",
                "Chat with the caller.",
                transitions=(Transition("wants_booking", "book", "The caller wants a table."),),
                on_exit=hooked.get("on_exit"),
            ),
            "book": Step(
                "book",
                "Help them book a table.",
                say="For how many?",
                on_enter=hooked.get("on_enter"),
                transitions=(Transition("done", "bye", "Booked."),),
            ),
            "bye": Step("bye", say="Goodbye!", end=True),
        },
        start="chat",
        on_user_turn=hooked.get("on_user_turn"),
        on_tool_result=hooked.get("on_tool_result"),
    )


async def test_a_turn_hooks_say_is_the_answer_without_the_model():
    SEEN.clear()
    session, llm, events = make(chat(on_user_turn="opening_hours"), [], hooks())
    await converse(session, ["When are you open?"])
    assert replies_said(events) == ["We open at noon."]
    assert llm.requests == []  # the model was never asked
    assert SEEN == [("opening_hours", "chat", "When are you open?")]
    assert [t.role for t in session.history.turns] == ["user", "assistant"]  # the hook's words are the reply


async def test_a_turn_hooks_text_is_what_the_model_reads_before_it_answers():
    session, llm, events = make(chat(on_user_turn="opening_hours"), ["The risotto is lovely."], hooks())
    await converse(session, ["I want to eat something nice"])
    assert replies_said(events) == ["The risotto is lovely."]
    (request,) = llm.requests
    assert request[-1]["content"] == "Today's specials: risotto and tiramisu." and request[-1]["role"] == "tool"
    assert request[-3] == {"role": "user", "content": "I want to eat something nice"}
    assert names(llm.tools[0]) == ["wants_booking"]  # the step's own offer, as without the hook


async def test_a_turn_hook_that_returns_nothing_changes_nothing_the_model_reads_but_may_write_the_state():
    session, llm, _ = make(chat(on_user_turn="opening_hours"), ["Hello!"], hooks())
    await converse(session, ["Hi there"])
    assert llm.requests[0][-1] == {"role": "user", "content": "Hi there"}
    assert session.flow is not None and session.flow.state["last_said"] == "Hi there"
    assert [t.role for t in session.history.turns] == ["user", "assistant"]  # no tool turn for nothing


async def test_a_hook_that_raises_is_a_tool_error_the_model_answers_and_the_session_goes_on():
    replies = ["Sorry, something went wrong.", "Sorry again."]
    session, llm, events = make(chat(on_user_turn="broken"), replies, hooks())
    await converse(session, ["Hi there", "Hello?"])
    assert replies_said(events) == replies
    error = llm.requests[0][-1]
    assert error["role"] == "tool" and "the CRM is down" in error["content"]
    assert llm.tools[:2] == [None, None]  # it answers in words
    assert [e.status for e in of(events, ToolCallEnd)] == ["error", "error"]


async def test_a_hook_that_times_out_is_told_to_the_model_as_a_tools_timeout_is():
    session, _, events = make(chat(on_user_turn="slow"), ["Sorry, one moment."], hooks())
    await converse(session, ["Hi there"])
    (ended,) = of(events, ToolCallEnd)
    assert (ended.name, ended.status) == ("slow", "timeout")
    assert replies_said(events) == ["Sorry, one moment."]


async def test_on_exit_then_on_enter_run_at_a_transition_and_the_entered_steps_words_follow():
    SEEN.clear()
    session, llm, events = make(
        chat(on_enter="greet_booking", on_exit="leave_chat"), [[call("wants_booking")]], hooks()
    )
    await converse(session, ["A table please"])
    first = of(events, ResponseStart)[0].response
    assert steps(events) == [("chat", "", 0), ("book", "chat", first)]
    assert [name for name, _, _ in SEEN] == ["leave_chat", "greet_booking"]
    assert [e.name for e in of(events, ToolCallStart)] == ["wants_booking", "leave_chat", "greet_booking"]
    assert replies_said(events) == ["Lovely. For how many?"]  # on_enter's words, then the step's
    assert session.flow is not None and session.flow.state["booking_started"] is True
    assert len(llm.requests) == 1  # nothing more was asked of the model


async def test_on_tool_result_rewrites_what_the_model_is_told():
    replies = [[call("get_current_time")], "It is late."]
    t = hooks()
    for builtin in load_tools(["builtin"]):
        t.add(builtin)
    flow = chat(on_tool_result="price_in_words")
    flow = dataclasses.replace(flow, tools=("get_current_time",))
    session, llm, _ = make(flow, replies, t)
    await converse(session, ["What time is it?"])
    assert llm.requests[1][-1]["content"].startswith("get_current_time said: ")


def test_a_hook_naming_no_tool_is_a_problem_of_the_graph():
    found = problems(chat(on_enter="nothing_here", on_user_turn="opening_hours"), known_tools={"opening_hours"})
    assert found == ["step book: on_enter: no tool named 'nothing_here'"]


def test_a_python_agent_files_hook_functions_become_its_tools(tmp_path: Path):
    agent = tmp_path / "hooked.py"
    agent.write_text(
        "from voice.agent import Agent, Say, Step\n"
        "from voice.tools import ToolContext\n\n"
        "def hours(context: ToolContext, text: str):\n"
        '    """Opening hours."""\n'
        '    return Say("Noon.") if "open" in text else None\n\n'
        "agent = Agent(role='You work here.', steps=[Step('main', on_user_turn=hours)], on_tool_result='hours')\n"
    )
    loaded = load_agent(agent)
    assert loaded.flow.step("main").on_user_turn == "hours" and loaded.flow.on_tool_result == "hours"
    assert [t.name for t in loaded.tools] == ["hours"]


def test_a_yaml_agent_names_its_hooks_from_its_tools_file(tmp_path: Path):
    (tmp_path / "hooks.py").write_text(
        "from voice.tools import ToolContext\n\n"
        "__all__ = ['hours']\n\n"
        "def hours(context: ToolContext, text: str) -> str:\n"
        '    """Opening hours."""\n'
        "    return ''\n"
    )
    (tmp_path / "agent.yaml").write_text(
        "role: You work here.\ntools: hooks.py\non_user_turn: hours\nsteps:\n  main: {on_enter: hours}\n"
    )
    loaded = load_agent(tmp_path / "agent.yaml")
    assert loaded.flow.on_user_turn == "hours" and loaded.flow.step("main").on_enter == "hours"
    (tmp_path / "bad.yaml").write_text("role: You work here.\ntools: hooks.py\nsteps:\n  main: {on_exit: hour}\n")
    try:
        load_agent(tmp_path / "bad.yaml")
    except ValueError as e:
        assert str(e) == f"{tmp_path / 'bad.yaml'}: step main: on_exit: no tool named 'hour'"
    else:
        raise AssertionError("a hook naming no tool was loaded")


def test_the_graph_writes_each_steps_hooks_in_it():
    drawn = mermaid(chat(on_enter="greet_booking", on_exit="leave_chat"))
    assert '    chat["chat<br/>on_exit: leave_chat"]\n' in drawn
    assert '    book["book<br/>on_enter: greet_booking"]\n' in drawn


def test_a_hooks_call_is_told_from_the_turns_own_calls_by_its_id():
    assert is_hook_call("call_2_1_on_user_turn") and is_hook_call("call_5_3_on_enter")
    assert not is_hook_call("call_2_0_0") and not is_hook_call("call_4_1_step")


async def test_the_start_steps_on_enter_runs_as_the_conversation_opens_and_its_words_follow():
    SEEN.clear()
    flow = dataclasses.replace(chat(on_enter="greet_booking"), start="book")
    session, llm, events = make(flow, [], hooks())
    await converse(session, [])
    assert [(name, step) for name, step, _ in SEEN] == [("greet_booking", "book")]
    assert [e.name for e in of(events, ToolCallStart)] == ["greet_booking"]
    assert replies_said(events) == ["Lovely. For how many?"]  # on_enter's words, then the step's
    assert llm.requests == []  # the model was not asked
    assert session.flow is not None and session.flow.state["booking_started"] is True
    said = session.history.turns[-1]  # after the hook's result, as at a transition
    assert (said.role, said.text) == ("assistant", "Lovely. For how many?")


async def test_a_resumed_conversation_does_not_open_its_step_again():
    SEEN.clear()
    flow = dataclasses.replace(chat(on_enter="greet_booking"), start="book")
    first, _, _ = make(flow, [], hooks())
    await converse(first, [])
    again, _, events = make(flow, [], hooks(), history=first.history)
    await converse(again, [])
    assert [name for name, _, _ in SEEN] == ["greet_booking"]  # once, in the first
    assert replies_said(events) == []


async def test_a_start_steps_on_enter_that_fails_is_a_tool_error_the_model_answers():
    flow = dataclasses.replace(chat(on_enter="broken"), start="book")
    session, llm, events = make(flow, ["Sorry, our system is down. How can I help?"], hooks())
    await converse(session, [])
    assert replies_said(events) == ["Sorry, our system is down. How can I help?"]
    (request,) = llm.requests
    assert request[-1]["role"] == "tool" and request[0]["role"] == "system"
    assert [e.status for e in of(events, ToolCallEnd)] == ["error"]
