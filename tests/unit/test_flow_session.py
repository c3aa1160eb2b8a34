"""An agent's flow through the real Session, on virtual time, with the stand-in engines.

The person's turns are typed (``Session.user_text``), each once the reply before it has been played;
the stand-in LLM's replies are scripted: text, a transition's call, or the JSON an extraction request
(a ``json_schema`` request) is answered with. What is checked is the wiring of core/steps.py and
core/asking.py through the shell: the start step's text said first, transitions taken by the person's
words, by the model's call and by the flow itself, the fields read by extraction (made-up values
dropped, the field's own question said), a step's tool called by the flow, the end of the call, and a
conversation resumed at the step and with the state its history stored. The real model in a flow is
scenarios/restaurant_booking.yaml.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest
from stand_in_engines import StandInEngines, StandInLLM, StandInRecognizer, silence, tone
from test_session import QUESTION_HZ, WORDS, run

from core.audio import ASR_BLOCK, BLOCK_S
from core.events import (
    Collected,
    Error,
    Event,
    LlmDone,
    ResponseStart,
    SpeculativeCommit,
    StepEntered,
    ToolCallEnd,
    ToolCallStart,
    Transfer,
    TtsChunk,
    TurnEnd,
)
from core.flow import Field, Flow, Step, Transition
from core.history import History, Turn
from core.tool_calls import ToolCallDelta
from shell.clock import VirtualClock
from shell.config import SessionConfig
from shell.pump import Pump
from shell.session import Session
from shell.tools import Tools, load_tools
from transport.replay import ReplayDevice
from voice.agent import load_agent

ROOT = Path(__file__).resolve().parents[2]
RESTAURANT = ROOT / "agents" / "restaurant.yaml"
GREETING = "Luigi's, good evening. How can I help?"

E = TypeVar("E", bound=Event)


def make(
    flow: Flow, replies: list, tools: Tools | None = None, history: History | None = None, speculate: bool = False
) -> tuple[Session, StandInLLM, list[Event]]:
    llm = StandInLLM(replies)
    engines = StandInEngines(StandInRecognizer(WORDS), llm)
    events: list[Event] = []
    cfg = SessionConfig(echo_cancel=False, end_of_turn=None, speculate=speculate, flow=flow)
    session = Session(engines, VirtualClock(), cfg, events.append, history=history, lockstep=True, tools=tools)  # type: ignore[arg-type]
    return session, llm, events


def restaurant(
    replies: list, history: History | None = None, speculate: bool = False
) -> tuple[Session, StandInLLM, list[Event]]:
    agent = load_agent(RESTAURANT)
    return make(agent.flow, replies, agent.tools, history, speculate)


async def converse(session: Session, texts: list[str], max_s: float = 60.0) -> None:
    """Type each of ``texts`` once the session is idle (the reply before it played), then run until idle
    again, the session ends, or ``max_s`` of virtual time has passed."""
    texts = list(texts)
    quiet = np.zeros(ASR_BLOCK, dtype=np.float32)

    def source(i: int) -> np.ndarray | None:
        if i > 2 and session.idle:  # after the first block: a step's text on entry is said then
            if not texts:
                return None
            session.user_text(texts.pop(0))
        return quiet

    device = ReplayDevice(source, session.output_rate)
    await Pump(session, device, settle=True).run(max_ticks=round(max_s / BLOCK_S))
    await session.aclose()
    assert not texts, f"not typed: {texts}"


def of(events: list[Event], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


def replies_said(events: list[Event]) -> list[str]:
    """Each reply as it was heard whole (its turn's text)."""
    return [e.text for e in of(events, TurnEnd)]


def calls_but_hooks(events: list[Event], kind: type[E]) -> list[E]:
    """The tool calls' events but those of the greeting step's hook (agents/greetings.py)."""
    return [e for e in of(events, kind) if getattr(e, "name", "") != "greeted_back"]


def steps(events: list[Event]) -> list[tuple[str, str, int]]:
    return [(e.step, e.previous, e.response) for e in of(events, StepEntered)]


def call(name: str, arguments: str = "{}") -> ToolCallDelta:
    return ToolCallDelta(0, id="c0", name=name, arguments=arguments)


def form(**values: object) -> str:
    """What the model answers an extraction request with: the fields as JSON."""
    return json.dumps(values)


# -- the restaurant ----------------------------------------------------------------------


async def test_the_start_steps_text_is_said_first_without_the_model():
    session, llm, events = restaurant([])
    await converse(session, [], max_s=5)
    assert isinstance(events[0], StepEntered) and steps(events) == [("greeting", "", 0)]
    assert replies_said(events) == [GREETING]
    assert " ".join(e.text for e in of(events, TtsChunk)) == GREETING
    assert llm.requests == []  # said word for word: the model was not asked
    assert [(t.role, t.text) for t in session.history.turns] == [("assistant", GREETING)]


async def test_a_when_phrase_takes_its_transition_without_asking_the_model():
    session, llm, events = restaurant([])
    await converse(session, ["Can I speak to the manager, please?"])
    greeting, start = of(events, ResponseStart)  # the greeting is a reply of its own
    assert greeting.text == "" and start.text == "Can I speak to the manager, please?"
    assert steps(events) == [("greeting", "", 0), ("handover", "greeting", start.response)]
    assert llm.requests == []
    assert replies_said(events) == [GREETING, "Let me put you through to a colleague."]
    (transfer,) = of(events, Transfer)
    assert (transfer.to, transfer.response) == ("+15550100", start.response)
    assert session.ended.is_set()  # once the handover was heard
    assert session.flow is not None and session.flow.step_name == "handover"


async def test_a_collecting_step_reads_the_turn_by_extraction_and_asks_for_what_was_made_up():
    # "book" and "table" take the greeting's transition; the turn that led there is read for the fields.
    made_up = form(name="Party Booking", party_size=4, date="2023-04-15", time=None)
    session, llm, events = restaurant([made_up, form(name="Maria", date=None, time=None)])
    await converse(session, ["I'd like to book a table for four", "It's Maria"])
    assert [name for name, _, _ in steps(events)] == ["greeting", "details"]
    # Two requests, both extractions: the model never answered in its own words.
    assert len(llm.requests) == 2 and all(s is not None for s in llm.schemas)
    assert llm.tools == [None, None]
    first, second = llm.schemas
    assert first is not None and first["required"] == ["name", "party_size", "date", "time"]
    assert first["properties"]["party_size"] == {"type": ["integer", "null"], "minimum": 1, "maximum": 12}
    assert second is not None and second["required"] == ["name", "date", "time"]  # the missing ones
    # The worked example of the first field asked for comes first, then the person's words after the
    # question they answer.
    assert llm.requests[0][1:3] == [
        {"role": "assistant", "content": "Under what name shall I book it?"},
        {"role": "user", "content": "It's for Maria."},
    ]
    assert json.loads(llm.requests[0][3]["content"]) == {
        "name": "Maria",
        "party_size": None,
        "date": None,
        "time": None,
    }
    assert llm.requests[0][-2:] == [
        {"role": "assistant", "content": GREETING},
        {"role": "user", "content": "I'd like to book a table for four"},
    ]
    assert llm.requests[1][-2:] == [
        {"role": "assistant", "content": "Under what name shall I book it?"},
        {"role": "user", "content": "It's Maria"},
    ]
    collected = of(events, Collected)
    assert [(c.values, c.dropped) for c in collected] == [
        ({"party_size": 4}, {"name": "Party Booking", "date": "2023-04-15"}),
        ({"name": "Maria"}, {}),
    ]
    # The flow's own questions, word for word, for the first field still missing.
    assert replies_said(events) == [GREETING, "Under what name shall I book it?", "For which day?"]
    assert session.flow is not None and session.flow.state == {"party_size": 4, "name": "Maria"}
    assert not session.errors


async def test_an_extraction_that_fails_keeps_nothing_and_the_question_is_asked():
    session, _llm, events = restaurant(["Sure! A table for four."])  # not the JSON asked for
    await converse(session, ["I'd like to book a table for four"])
    (collected,) = of(events, Collected)
    assert (collected.values, collected.dropped) == ({}, {})
    assert any("the fields of reply" in e for e in session.errors) and of(events, Error)
    assert replies_said(events)[-1] == "Under what name shall I book it?"
    assert session.flow is not None and session.flow.state == {}


BOOKING = [
    form(name=None, party_size=4, date=None, time=None),
    form(name="Maria", date=None, time=None),
    form(date="Friday", time="8 pm"),
]
TURNS = ["I'd like to book a table for four", "It's Maria", "Friday at eight in the evening"]
CONFIRM = "A table for 4 under Maria, Friday at 8 pm. Shall I book it?"


async def test_once_every_field_is_known_the_auto_transition_says_the_new_steps_text_filled_in():
    session, llm, events = restaurant(list(BOOKING))
    await converse(session, TURNS)
    (*_, last) = of(events, ResponseStart)
    assert steps(events)[-1] == ("confirm", "details", last.response)
    assert replies_said(events)[-1] == CONFIRM
    assert len(llm.requests) == 3  # the three extractions, and nothing else
    assert session.flow is not None and session.flow.state == {
        "party_size": 4,
        "name": "Maria",
        "date": "Friday",
        "time": "8 pm",
    }
    assert not session.ended.is_set()


async def test_the_booking_is_made_by_the_flow_its_result_said_and_the_call_ends_with_goodbye():
    session, llm, events = restaurant(list(BOOKING))
    await converse(session, [*TURNS, "Yes please"])
    assert [name for name, _, _ in steps(events)] == ["greeting", "details", "confirm", "book", "goodbye"]
    assert len(llm.requests) == 3  # "yes" is the confirmation's phrase; the booking is the flow's
    (started,) = calls_but_hooks(events, ToolCallStart)
    (ended,) = calls_but_hooks(events, ToolCallEnd)
    assert (started.name, started.arguments, ended.status) == ("book_table", "{}", "ok")
    # The tool read the state the flow collected, and its result is said word for word, then goodbye.
    assert ended.result.startswith("Booked: a table for 4 under Maria on Friday at 8 pm, reference LU-")
    assert replies_said(events)[-1] == f"{ended.result} Thank you for calling Luigi's. Goodbye!"
    assert [e.text for e in of(events, TtsChunk)][-2:] == [ended.result, "Thank you for calling Luigi's. Goodbye!"]
    last = of(events, ResponseStart)[-1].response
    assert all(s[2] == last for s in steps(events)[-2:])  # one reply: the booking and the goodbye
    assert of(events, LlmDone)[-1].response == last
    assert session.ended.is_set()  # once the goodbye was heard
    assert [t.role for t in session.history.turns][-2:] == ["tool", "assistant"]


async def test_a_correction_at_the_confirmation_goes_back_and_reads_every_field():
    session, llm, events = restaurant([*BOOKING, form(name=None, party_size=5, date=None, time=None)])
    await converse(session, [*TURNS, "No, make it five people"])
    assert [name for name, _, _ in steps(events)][-3:] == ["confirm", "details", "confirm"]
    assert llm.schemas[-1] is not None and llm.schemas[-1]["required"] == ["name", "party_size", "date", "time"]
    assert of(events, Collected)[-1].values == {"party_size": 5}
    assert replies_said(events)[-1] == "A table for 5 under Maria, Friday at 8 pm. Shall I book it?"
    assert not calls_but_hooks(events, ToolCallStart)


async def test_a_bare_no_to_the_read_back_is_asked_what_to_change_and_the_change_read_back():
    nothing = form(name=None, party_size=None, date=None, time=None)
    session, _llm, events = restaurant([*BOOKING, nothing, form(name="Rossi", party_size=None, date=None, time=None)])
    await converse(session, [*TURNS, "No", "The name is Rossi"])
    assert [name for name, _, _ in steps(events)][-3:] == ["confirm", "details", "confirm"]
    # Not the same read-back again: the flow's own question, then the read-back with the change.
    assert replies_said(events)[-2:] == [
        "What would you like to change?",
        "A table for 4 under Rossi, Friday at 8 pm. Shall I book it?",
    ]
    assert not calls_but_hooks(events, ToolCallStart)


async def test_the_step_and_state_are_stored_with_each_turn_and_a_new_session_resumes_there():
    session, _llm, _events = restaurant(list(BOOKING[:2]))
    await converse(session, TURNS[:2])
    user_turns = [t for t in session.history.turns if t.role == "user"]
    # Each turn keeps the step and the state it was said in, and where its reply took them (left_at).
    assert [t.extra for t in user_turns] == [
        {"step": "greeting", "state": {}, "left_at": {"step": "details", "state": {"party_size": 4}}},
        {
            "step": "details",
            "state": {"party_size": 4},
            "left_at": {"step": "details", "state": {"party_size": 4, "name": "Maria"}},
        },
    ]
    stored = History()
    for t in session.history.turns:  # as a store keeps them: the extra as JSON
        stored.add(
            Turn(
                t.role,
                t.text,
                t.t_start,
                t.t_end,
                response=t.response,
                extra=json.loads(json.dumps(t.extra)),
                tool=t.tool,
            )
        )

    # The reply to the last turn stored where that turn left the conversation: the name it gave is kept.
    assert session.history.turns[-1].role == "assistant"
    assert session.history.turns[-1].extra == {"step": "details", "state": {"party_size": 4, "name": "Maria"}}
    again, llm, events = restaurant([form(date="Friday", time=None)], history=stored)
    assert again.flow is not None and again.flow.step_name == "details"
    assert again.flow.state == {"party_size": 4, "name": "Maria"}
    await converse(again, ["On Friday"])
    assert steps(events) == [("details", "", 0)]
    assert GREETING not in replies_said(events)  # not said again
    assert llm.schemas[0] is not None and llm.schemas[0]["required"] == ["date", "time"]
    assert replies_said(events) == ["At what time?"]
    assert again.flow.state == {"party_size": 4, "name": "Maria", "date": "Friday"}


@pytest.mark.parametrize("speculate", [False, True])
async def test_a_spoken_turn_the_model_moves_on_is_read_for_the_new_steps_fields(speculate):
    # Spoken, not typed, and maybe answered speculatively: a speculative reply's call waits for the commit.
    nothing = form(name=None, party_size=None, date=None, time=None)
    # Without the greeting's hook, which reads each turn first (no speculative reply in its step).
    agent = load_agent(RESTAURANT)
    greeting = dataclasses.replace(agent.flow.steps["greeting"], on_user_turn=None)
    flow = dataclasses.replace(agent.flow, steps={**agent.flow.steps, "greeting": greeting})
    session, llm, events = make(flow, [[call("wants_booking")], nothing], agent.tools, speculate=speculate)
    await run(session, np.concatenate([silence(2.5), tone(1.2, hz=QUESTION_HZ), silence(0.3)]), tail_s=10)
    # No phrase of the greeting's in "what time is it": the model is asked, offered the step's transitions.
    assert llm.requests[0][-1] == {"role": "user", "content": "what time is it"}
    assert names(llm.tools[0]) == ["wants_person", "wants_booking"] and llm.schemas[0] is None
    assert llm.schemas[1] is not None and llm.schemas[1]["required"] == ["name", "party_size", "date", "time"]
    assert len(llm.requests) == 2 and len(of(events, SpeculativeCommit)) == int(speculate)
    assert [name for name, _, _ in steps(events)] == ["greeting", "details"]
    assert replies_said(events) == [GREETING, "Under what name shall I book it?"]


async def test_a_history_without_a_stored_step_starts_at_the_start():
    history = History()
    history.add(Turn("user", "Hello?"))
    history.add(Turn("assistant", "Hi."))
    session, _llm, events = restaurant([], history=history)
    await converse(session, [], max_s=3)
    assert steps(events) == [("greeting", "", 0)] and replies_said(events) == [GREETING]


# -- a flow of its own: the model's transitions -----------------------------------------------


def chat_flow() -> Flow:
    return Flow(
        role="You work at Luigi's.",
        steps={
            "chat": Step(
                "chat",
                "Chat with the caller.",
                transitions=(Transition("wants_booking", "book", "The caller wants a table."),),
            ),
            "book": Step(
                "book",
                "Help them book a table.",
                tools=("get_current_time",),
                transitions=(
                    Transition("booked", "bye", "The table is booked.", needs=("size",)),
                    Transition("never", "bye", "Taken by the flow itself.", auto=True, needs=("name",)),
                ),
            ),
            "bye": Step("bye", say="Goodbye!", end=True),
        },
        start="chat",
        fields={"size": Field("size", {"type": "integer"}), "name": Field("name", {"type": "string"})},
    )


def names(tools: list[dict] | None) -> list[str]:
    return [t["function"]["name"] for t in tools or []]


async def test_the_models_transition_enters_the_new_step_whose_request_offers_no_transition():
    replies = [[call("wants_booking")], "Sure, for when?", "What time would you like?"]
    session, llm, events = make(chat_flow(), replies, load_tools(["builtin"]))
    await converse(session, ["I want to eat at your place", "What time is it?"])
    first = of(events, ResponseStart)[0].response  # no text on entry: the first reply is the person's
    assert steps(events) == [("chat", "", 0), ("book", "chat", first)]
    # Asked in the start step: its instructions and its transition (no tool of the agent's there).
    assert llm.requests[0][0]["content"].startswith("You work at Luigi's. Chat with the caller.")
    assert names(llm.tools[0]) == ["wants_booking"] and llm.schemas == [None, None, None]
    (ended,) = of(events, ToolCallEnd)
    assert (ended.name, ended.status, ended.result) == ("wants_booking", "ok", "Now in step book.")
    # The same reply goes on in the new step: its instructions, its tools, not its transitions.
    assert llm.requests[1][0]["content"].startswith("You work at Luigi's. Help them book a table.")
    assert names(llm.tools[1]) == ["get_current_time"]
    assert replies_said(events) == ["Sure, for when?", "What time would you like?"]
    # The person's next turn is offered the step's transitions, but not the automatic one.
    assert names(llm.tools[2]) == ["get_current_time", "booked"]
    assert session.flow is not None and session.flow.step_name == "book"


async def test_a_transition_whose_needs_are_missing_moves_nothing_and_the_model_is_told():
    chat = Step("chat", transitions=(Transition("wants_booking", "book", "", needs=("size",)),))
    flow = dataclasses.replace(chat_flow(), steps={**chat_flow().steps, "chat": chat})
    session, llm, events = make(flow, [[call("wants_booking")], "How many of you?"])
    await converse(session, ["A table please"])
    assert steps(events) == [("chat", "", 0)]
    (ended,) = of(events, ToolCallEnd)
    assert (ended.status, ended.result) == ("error", "Not yet: ask the person for size first.")
    assert llm.requests[1][-1] == {
        "role": "tool",
        "tool_call_id": "c0",
        "name": "wants_booking",
        "content": ended.result,
    }
    assert names(llm.tools[1]) == ["wants_booking"]  # told why, it may try again
    assert replies_said(events) == ["How many of you?"]


async def test_a_collecting_step_without_questions_of_its_own_lets_the_model_ask():
    flow = Flow(
        role="You book tables.",
        steps={
            "ask": Step(
                "ask",
                "Ask for what is missing.",
                collect=("size", "name"),
                transitions=(Transition("done", "bye", "", needs=("size", "name"), auto=True),),
            ),
            "bye": Step("bye", say="Booked for {size} under {name}. Goodbye!", end=True),
        },
        start="ask",
        fields={"size": Field("size", {"type": "integer"}), "name": Field("name", {"type": "string"})},
    )
    replies = [form(size=3, name=None), "Under what name?", form(name="Rossi"), "never asked"]
    session, llm, events = make(flow, replies)
    await converse(session, ["Three of us", "Rossi"])
    assert llm.schemas[0] is not None and llm.schemas[2] is not None and llm.schemas[1] is None
    # After the extraction the model answers, told what is known and what is still missing.
    assert "Known so far: size: 3. Still to ask for: name." in llm.requests[1][0]["content"]
    assert llm.tools[1] is None  # the step offers no tool, and its only transition is automatic
    assert replies_said(events) == ["Under what name?", "Booked for 3 under Rossi. Goodbye!"]
    assert steps(events)[-1][:2] == ("bye", "ask") and session.ended.is_set()
    assert len(llm.requests) == 3


async def test_a_collecting_step_entered_mid_reply_says_its_words_then_reads_the_turn_for_its_fields():
    # A step that collects and has words of its own: they are said on entry, then the turn that led
    # there is read for its fields, and the field's question follows, all in one reply.
    agent = load_agent(RESTAURANT)
    details = dataclasses.replace(agent.flow.steps["details"], say="Happy to help.")
    flow = dataclasses.replace(agent.flow, steps={**agent.flow.steps, "details": details})
    session, llm, events = make(flow, [form(name=None, party_size=2, date=None, time=None)], agent.tools)
    await converse(session, ["A table for two, please"])
    assert [name for name, _, _ in steps(events)] == ["greeting", "details"]  # "table": the phrase took it
    assert llm.schemas[0] is not None and of(events, Collected)[0].values == {"party_size": 2}
    assert replies_said(events)[-1] == "Happy to help. Under what name shall I book it?"


# -- the support line ----------------------------------------------------------------------

SUPPORT = ROOT / "agents" / "support.yaml"


async def test_the_support_line_reads_the_order_number_digit_by_digit_looks_it_up_and_says_goodbye():
    agent = load_agent(SUPPORT)
    extractions = [form(order=None), form(order="4512")]
    session, llm, events = make(agent.flow, extractions, agent.tools)
    await converse(session, ["Hi, I'm calling about my order.", "It's 4-5-1-2.", "No, that's all. Thanks!"])
    assert [name for name, _, _ in steps(events)] == ["greeting", "order", "lookup", "anything_else", "goodbye"]
    assert [e.via for e in of(events, StepEntered)] == ["", "about_order", "order_known", "looked_up", "done"]
    assert len(llm.requests) == 2  # the two readings of the order number; the rest is the flow's own
    order = "Order 4 5 1 2 shipped on Monday and arrives tomorrow before noon."
    assert replies_said(events)[1:] == [
        "What is your order number?",
        f"{order} Is there anything else I can help with?",
        "Thank you for calling Parcel and Co. Goodbye!",
    ]
    assert session.flow is not None and session.flow.state == {"order": "4512"}
    assert session.ended.is_set()


async def test_a_process_killed_before_the_replys_turn_is_stored_resumes_where_the_reply_took_the_flow():
    """What a store holds when the process dies right after a transition: the person's turn, amended
    with where its reply took the flow, and not the reply's own turn."""
    session, _llm, events = restaurant(list(BOOKING))
    await converse(session, TURNS)
    assert steps(events)[-1][0] == "confirm"
    stored = History()
    for t in session.history.turns[:-1]:  # the last reply's turn was never stored
        stored.add(Turn(t.role, t.text, t.t_start, t.t_end, response=t.response, extra=json.loads(json.dumps(t.extra))))
    again, _llm, _events = restaurant([], history=stored)
    assert again.flow is not None and again.flow.step_name == "confirm"
    assert again.flow.state == {"party_size": 4, "name": "Maria", "date": "Friday", "time": "8 pm"}


async def test_the_order_number_keyed_on_the_keypad_fills_the_field_as_if_said():
    agent = load_agent(SUPPORT)
    session, llm, events = make(agent.flow, [form(order=None), form(order="4512")], agent.tools)
    session.user_text("It's about my order.")
    quiet = np.zeros(ASR_BLOCK, dtype=np.float32)
    keys = iter("4512")

    def source(i: int) -> np.ndarray | None:
        if i > 150 and i % 10 == 0 and session.idle:  # after the question: one key every 0.2 s
            key = next(keys, None)
            if key is not None:
                session.key_pressed(key)
        return quiet if i < 600 else None

    await Pump(session, ReplayDevice(source, session.output_rate), settle=True).run(max_ticks=600)
    await session.aclose()
    keyed = [t.text for t in session.history.turns if t.role == "user"][-1]
    assert keyed == "(Keyed on the phone's keypad: 4 5 1 2)"  # one turn, 2 s after the last key
    assert "4 5 1 2" in json.dumps(llm.requests[-1])  # read for the field like the spoken digits
    assert session.flow is not None and session.flow.state == {"order": "4512"}
    assert steps(events)[-1][0] == "anything_else"


async def test_a_handover_the_person_speaks_over_goes_back_to_the_step_before_and_the_call_stays_up():
    session, _llm, events = restaurant([])
    quiet = np.zeros(ASR_BLOCK, dtype=np.float32)
    said = cut = False

    def source(i: int) -> np.ndarray | None:
        nonlocal said, cut
        if i > 2 and session.idle and not said:
            session.user_text("Can I speak to the manager, please?")
            said = True
        elif said and not cut and of(events, Transfer) and of(events, TtsChunk)[-1].text.startswith("Let me"):
            session.cancel_response()  # the person stops it: "no wait, sorry, I'd like a table"
            cut = True
        return quiet if i < 300 else None

    await Pump(session, ReplayDevice(source, session.output_rate), settle=True).run(max_ticks=300)
    await session.aclose()
    assert cut and [s[:2] for s in steps(events)][-2:] == [("handover", "greeting"), ("greeting", "handover")]
    assert session.flow is not None and session.flow.step_name == "greeting"
    assert not session.ended.is_set()
    user = [t for t in session.history.turns if t.role == "user"][-1]
    assert user.extra["left_at"]["step"] == "greeting"  # a process killed now resumes there too
