"""Tools in the shell: Session + Pump on virtual time, with stand-in engines and real tools.

The stand-in LLM makes scripted calls; the tools are real ``shell.tools`` tools
(the built-ins, and slow ones defined here), run by the session as it would
run any. The real model making real calls is tests/integration/test_llm_tools.py
and test_tools_voice.py.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from stand_in_engines import StandInEngines, StandInLLM, StandInRecognizer, silence, tone
from test_session import INTERRUPTION_HZ, QUESTION_HZ, WORDS, run

from core.events import BargeIn, Event, ToolCallEnd, ToolCallStart, TtsChunk, TurnEnd
from core.tool_calls import ToolCallDelta
from shell.clock import VirtualClock
from shell.config import SessionConfig
from shell.session import Session
from shell.tools import Tools, load_tools, tool


def call(name: str, arguments: str = "{}", index: int = 0) -> ToolCallDelta:
    return ToolCallDelta(index, id=f"c{index}", name=name, arguments=arguments)


def make(replies: list, tools: Tools, **config) -> tuple[Session, StandInLLM, list[Event]]:
    llm = StandInLLM(replies)
    engines = StandInEngines(StandInRecognizer(WORDS), llm)
    events: list[Event] = []
    cfg = SessionConfig(**{"echo_cancel": False, "end_of_turn": None, "speculate": False, **config})
    session = Session(engines, VirtualClock(), cfg, events.append, lockstep=True, tools=tools)  # type: ignore[arg-type]
    return session, llm, events


def kinds(events: list[Event], kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


QUESTION = np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)])


async def test_a_call_runs_and_the_answer_is_asked_with_its_result():
    session, llm, events = make([[call("get_current_time")], "It is noon."], load_tools(["builtin"]))
    await run(session, QUESTION)
    (started,) = kinds(events, ToolCallStart)
    (ended,) = kinds(events, ToolCallEnd)
    assert (started.name, ended.status) == ("get_current_time", "ok")
    # Asked again with the result, without tools (one round, the default): it answers in words.
    assert llm.tools == [session.tools.specs(), None]  # type: ignore[union-attr]
    tool_message = llm.requests[1][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == ended.result
    assert [t.role for t in session.history.turns] == ["user", "tool", "assistant"]
    assert session.history.turns[-1].text == "It is noon."


@pytest.mark.parametrize("speculate", [False, True])
async def test_a_grounded_call_with_numbers_nobody_said_is_never_run(speculate):
    # The person asked "what time is it"; a calculation of numbers nobody said was made up. A
    # speculative reply's made-up call is dropped at its commit, as a held call would run then.
    replies = [[call("calculate", '{"expression": "12 * 7"}')], "It is noon."]
    session, llm, events = make(replies, load_tools(["builtin"]), speculate=speculate)
    await run(session, QUESTION)
    assert not kinds(events, ToolCallStart) and not kinds(events, ToolCallEnd)
    # Asked again as it was, without tools, it answers in words; the history holds no call.
    assert llm.tools == [session.tools.specs(), None]  # type: ignore[union-attr]
    assert llm.requests[1] == llm.requests[0]
    assert [t.role for t in session.history.turns] == ["user", "assistant"]
    assert session.history.turns[-1].text == "It is noon."


async def test_a_made_up_call_beside_a_real_one_is_dropped_and_the_answer_ends_the_reply():
    # The clock runs; the calculation nobody's numbers are in does not, and is not carried into the
    # round after: the answer with the clock's result is the reply's last request.
    replies = [[call("get_current_time"), call("calculate", '{"expression": "12 * 7"}', index=1)], "It is noon."]
    session, llm, events = make(replies, load_tools(["builtin"]))
    await run(session, QUESTION)
    (ended,) = kinds(events, ToolCallEnd)
    assert ended.call_id and kinds(events, ToolCallStart)[0].name == "get_current_time"
    assert len(llm.requests) == 2 and session.history.turns[-1].text == "It is noon."


async def test_a_call_that_does_not_fit_is_never_run_and_the_model_is_told_why():
    ran = []

    def book_table(people: int) -> str:
        """Book a table."""
        ran.append(people)
        return "booked"

    tools = Tools()
    tools.add(book_table)
    replies = [[call("book_table", '{"people": "many"}')], [call("make_coffee")], "Sorry, I could not."]
    session, llm, events = make(replies, tools, max_tool_rounds=2)
    await run(session, QUESTION)
    assert ran == []
    results = kinds(events, ToolCallEnd)
    assert [r.status for r in results] == ["error", "error"]
    assert "people" in results[0].result and "no tool named 'make_coffee'" in results[1].result
    assert llm.requests[1][-1]["content"] == results[0].result


def slow_tools(cancel: bool) -> tuple[Tools, list[str]]:
    done: list[str] = []

    @tool(timeout_s=30, cancel_on_barge_in=cancel)
    async def look_up_order(order: str) -> str:
        """The state of an order."""
        await asyncio.sleep(3.0)
        done.append(order)
        return "shipped"

    tools = Tools()
    tools.add(look_up_order)
    return tools, done


INTERRUPTED = np.concatenate([QUESTION, silence(1.0), tone(1.0, hz=INTERRUPTION_HZ), silence(0.3)])


async def test_a_barge_in_cancels_a_slow_tool_whose_policy_says_so():
    tools, done = slow_tools(cancel=True)
    session, _llm, events = make([["One moment.", call("look_up_order", '{"order": "A1"}')], "Sure."], tools)
    await run(session, INTERRUPTED, tail_s=10)
    assert kinds(events, BargeIn)
    (ended,) = kinds(events, ToolCallEnd)
    assert ended.status == "cancelled" and done == []
    tool_turns = [t for t in session.history.turns if t.role == "tool"]
    assert [t.tool.status for t in tool_turns] == ["cancelled"]  # type: ignore[union-attr]
    roles = [m["role"] for m in session.history.messages(None)]
    assert roles.count("tool") == 1 and roles[roles.index("tool") - 1] == "assistant"


async def test_a_tool_that_a_barge_in_does_not_cancel_finishes_and_its_result_is_kept():
    tools, done = slow_tools(cancel=False)
    session, llm, events = make([["One moment.", call("look_up_order", '{"order": "A1"}')], "Sure."], tools)
    await run(session, INTERRUPTED, tail_s=10)
    assert kinds(events, BargeIn)
    assert done == ["A1"]  # aclose gave it its time
    (ended,) = kinds(events, ToolCallEnd)
    assert (ended.status, ended.result) == ("ok", "shipped")
    assert any(t.role == "tool" and t.text == "shipped" for t in session.history.turns)
    # It was cut: the model is not asked again with the result of a reply nobody waits for.
    assert all(m["role"] != "tool" for m in llm.requests[1])


async def test_a_slow_tool_gets_one_filler():
    tools, _ = slow_tools(cancel=True)
    session, _llm, events = make([[call("look_up_order", '{"order": "A1"}')], "It has shipped."], tools)
    await run(session, np.concatenate([QUESTION, silence(0.5)]), tail_s=30)
    said = [e.text for e in kinds(events, TtsChunk)]
    assert said == ["One moment.", "It has shipped."]
    (turn,) = kinds(events, TurnEnd)
    assert turn.text == "One moment. It has shipped."


async def test_a_timer_speaks_when_it_goes_off_and_end_conversation_ends_the_session():
    replies = [[call("set_timer", '{"seconds": 3, "label": "tea"}')], "Timer set.", [call("end_conversation")], "Bye."]
    session, _llm, events = make(replies, load_tools(["builtin"]))
    audio = np.concatenate([QUESTION, silence(5.0), tone(1.2, hz=QUESTION_HZ), silence(0.3)])
    await run(session, audio, tail_s=10)
    said = [e.text for e in kinds(events, TtsChunk)]
    assert said == ["Timer set.", "Your tea timer is done.", "Bye."]
    assert session.ended.is_set()


CLIENT_TOOL = {
    "type": "function",
    "function": {
        "name": "look_up_order",
        "description": "The state of an order.",
        "parameters": {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]},
    },
}


async def test_a_client_tool_waits_for_the_clients_output_and_the_reply_goes_on_with_it():
    replies = [[call("look_up_order", '{"order": "A1"}')], "It has shipped."]
    llm = StandInLLM(replies)
    events: list[Event] = []
    answered: list[bool] = []

    def client() -> None:  # answers the call as a Realtime client would, once it sees it
        answered.append(session.client_tool_output("c0", "shipped on Monday"))
        answered.append(session.client_tool_output("c0", "again"))  # answered once

    def sink(e: Event) -> None:
        # At the loop's next turn after the call is seen, before the session's task that waits for
        # it has run: an answer that quick was lost once. (Polling the wall clock, as this test did,
        # was sometimes too late for the call's timeout on virtual time.)
        events.append(e)
        if isinstance(e, ToolCallStart):
            asyncio.get_running_loop().call_soon(client)

    cfg = SessionConfig(echo_cancel=False, end_of_turn=None, speculate=False)
    engines = StandInEngines(StandInRecognizer(WORDS), llm)
    session = Session(engines, VirtualClock(), cfg, sink, lockstep=True, tools=Tools())  # type: ignore[arg-type]
    session.set_client_tools([CLIENT_TOOL])
    await run(session, QUESTION, tail_s=10)
    assert answered == [True, False]
    assert llm.tools[0] == [CLIENT_TOOL]
    (ended,) = kinds(events, ToolCallEnd)
    assert (ended.status, ended.result) == ("ok", "shipped on Monday")
    assert llm.requests[1][-1]["content"] == "shipped on Monday"
    assert session.history.turns[-1].text == "It has shipped."


async def test_a_client_tool_call_that_does_not_fit_its_schema_is_refused():
    session, _llm, events = make([[call("look_up_order", '{"order": 7}')], "Sorry."], Tools())
    session.set_client_tools([CLIENT_TOOL])
    await run(session, QUESTION)
    (ended,) = kinds(events, ToolCallEnd)
    assert ended.status == "error" and "order" in ended.result


async def test_a_typed_turn_is_answered_like_a_spoken_one():
    session, _llm, _events = make(["Hello there."], Tools())

    async def type_it() -> None:
        await asyncio.sleep(0)
        session.user_text("Hi, who are you?")

    typing = asyncio.ensure_future(type_it())
    await run(session, silence(2.0), tail_s=10)
    await typing
    assert [(t.role, t.text) for t in session.history.turns] == [
        ("user", "Hi, who are you?"),
        ("assistant", "Hello there."),
    ]


async def test_a_goodbye_the_person_speaks_over_keeps_the_conversation_up():
    goodbye = "Thank you for calling, it was a pleasure to help you today. Goodbye and have a lovely evening."
    replies = [[call("end_conversation")], goodbye, "Of course, what else?"]
    session, _llm, events = make(replies, load_tools(["builtin"]))
    # "stop wait a moment" 1.2 s into the goodbye: the person has one more thing to say.
    audio = np.concatenate([QUESTION, silence(1.9), tone(1.5, hz=INTERRUPTION_HZ), silence(0.3)])
    await run(session, audio, tail_s=10)
    assert len(kinds(events, BargeIn)) == 1
    assert [e.text for e in kinds(events, TurnEnd)][-1] == "Of course, what else?"
    assert not session.ended.is_set()  # the goodbye was not heard whole: the call stays up


async def test_a_goodbye_heard_whole_ends_the_conversation():
    session, _llm, events = make([[call("end_conversation")], "Goodbye."], load_tools(["builtin"]))
    await run(session, np.concatenate([QUESTION, silence(0.3)]), tail_s=10)
    assert kinds(events, BargeIn) == [] and session.ended.is_set()
