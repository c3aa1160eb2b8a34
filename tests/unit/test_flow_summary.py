"""A step whose context is a summary (core/summary.py), through the real Session on virtual time
with the stand-in engines: the summary is written in the background after each reply, and a
transition uses the newest one ready, with the turns after it word for word. The helpers are
test_flow_session.py's."""

from __future__ import annotations

from test_flow_session import call, converse, make, replies_said, steps

from core.flow import Flow, Step, Transition
from core.history import Turn
from core.summary import SUMMARY_INSTRUCTIONS, summary_request, summary_text


def flow() -> Flow:
    return Flow(
        role="You work at Luigi's.",
        steps={
            "chat": Step("chat", "Chat.", transitions=(Transition("wants_booking", "book", "A table."),)),
            "book": Step("book", "Book a table.", context="summary", transitions=(Transition("done", "bye", ""),)),
            "bye": Step("bye", say="Goodbye!", end=True),
        },
        start="chat",
    )


async def test_a_summary_step_reads_the_summary_prepared_after_the_reply_before_and_the_turns_since():
    summary = "Maria called to say hello. Nothing else."
    replies = [
        "Hello Maria!",
        summary,
        [call("wants_booking")],
        "For how many?",
        "-",
    ]
    session, llm, events = make(flow(), replies)
    await converse(session, ["Hi, I'm Maria.", "I want a table."])
    assert replies_said(events) == ["Hello Maria!", "For how many?"]
    assert [name for name, _, _ in steps(events)] == ["chat", "book"]
    summarize = llm.requests[1]
    assert summarize == summary_request([Turn("user", "Hi, I'm Maria."), Turn("assistant", "Hello Maria!")])
    entered = llm.requests[3]  # the reply goes on in the new step
    assert f"Book a table. Earlier in the conversation: {summary}" in entered[0]["content"]
    assert [m["content"] for m in entered[1:2]] == ["I want a table."]  # the turns before it: summarized
    assert session.flow is not None and session.flow.prepared is not None  # the next is on its way, or in


def test_the_summary_request_is_the_words_said_as_a_transcript_and_its_answer_two_sentences():
    turns = [Turn("user", "Hi."), Turn("tool", "x"), Turn("assistant", "Hello! "), Turn("user", " ")]
    assert summary_request(turns) == [
        {"role": "system", "content": SUMMARY_INSTRUCTIONS},
        {"role": "user", "content": "Caller: Hi.\nAgent: Hello!"},
    ]
    assert (
        summary_text(" Maria wants a table.\n She is four.  Friday at eight. ") == "Maria wants a table. She is four."
    )
    assert summary_text("") == ""
