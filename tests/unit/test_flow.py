"""One conversation's place in a flow (core/flow.py FlowRun): what the model reads in a step, the
functions it is offered (the transitions, not the automatic ones), the fields recorded (a correction
overwrites), transitions refused until what they need is known, taken by the flow itself (``auto``) or
by the person's words (``when``), the context a step starts with, the text said on entry and the
questions asked with the state's values filled in, and a snapshot resumed."""

from __future__ import annotations

import dataclasses

from core.flow import Field, Flow, FlowRun, Step, Transition
from core.language import ENGLISH, language

FIELDS = {
    "name": Field("name", {"type": "string"}, "the name the table is under", ask="Under what name, {who}?"),
    "size": Field("size", {"type": "integer", "minimum": 1}, ask="For how many people?"),
}


def flow(context: object = "all") -> Flow:
    return Flow(
        role="You book tables at Luigi's.",
        steps={
            "ask": Step(
                "ask",
                "Ask one thing at a time.",
                collect=("name", "size"),
                transitions=(Transition("done", "confirm", "You have both.", needs=("name", "size")),),
            ),
            "confirm": Step(
                "confirm",
                say="A table for {size} under {name}, on {date}?",
                context=context,  # type: ignore[arg-type]
                transitions=(Transition("yes", "bye", "They agree."), Transition("change", "ask", "Change it.")),
            ),
            "bye": Step("bye", say="Goodbye!", end=True),
        },
        start="ask",
        fields=dict(FIELDS),
        tools=("get_time",),
    )


def with_step(f: Flow, step: Step) -> Flow:
    return dataclasses.replace(f, steps={**f.steps, step.name: step})


def test_a_run_starts_in_the_start_step():
    run = FlowRun(flow())
    assert run.step_name == "ask" and run.step.collect == ("name", "size")
    assert run.state == {} and run.context_from == 0 and run.entered == 0 and run.previous == ""
    assert FlowRun(flow(), step_name="confirm").step.name == "confirm"


def test_instructions_hold_the_role_the_step_and_what_is_known_and_missing():
    run = FlowRun(flow())
    text = run.instructions()
    assert text.startswith("You book tables at Luigi's. Ask one thing at a time.")
    assert "Still to ask for: name, size. Ask for name now, in one short question." in text
    assert "Known so far" not in text
    run.record({"name": "Rossi"})
    text = run.instructions()
    assert "Known so far: name: Rossi." in text
    assert "Still to ask for: size. Ask for size now" in text
    run.record({"size": 4})
    assert "Still to ask for" not in run.instructions()


def test_the_transitions_are_offered_as_functions_without_arguments():
    run = FlowRun(flow())
    (spec,) = run.function_specs()
    assert spec == {
        "type": "function",
        "function": {
            "name": "done",
            "description": "You have both.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    assert run.owns("done") and not run.owns("yes") and not run.owns("get_time")
    assert run.tool_names() == ["get_time"]


def test_an_automatic_transition_is_never_offered_to_the_model():
    auto = Transition("details_complete", "confirm", "All known.", needs=("name", "size"), auto=True)
    step = Step("ask", collect=("name", "size"), transitions=(auto, Transition("help", "bye", "A person.")))
    run = FlowRun(with_step(flow(), step))
    assert [s["function"]["name"] for s in run.function_specs()] == ["help"]
    assert step.function_names() == ["help"]
    assert not run.owns("details_complete") and run.owns("help")


def test_tool_names_are_every_steps_then_the_steps_own_each_once():
    step = Step("ask", tools=("book_table", "get_time", "book_table"), transitions=(Transition("x", "bye", ""),))
    run = FlowRun(with_step(flow(), step))
    assert run.tool_names() == ["get_time", "book_table"]


def test_record_overwrites_a_correction_and_returns_nothing():
    run = FlowRun(flow())
    assert run.record({"name": "Rossi", "size": 4}) is None
    assert run.state == {"name": "Rossi", "size": 4}
    run.record({"size": 6})
    assert run.state == {"name": "Rossi", "size": 6}


def test_record_keeps_only_the_steps_fields_and_no_empty_value():
    run = FlowRun(flow())
    run.record({"phone": "555", "name": None})
    assert run.state == {}
    run.enter("confirm", history_len=0)  # collects nothing: nothing is recorded there
    run.record({"name": "Rossi"})
    assert run.state == {}


def test_move_refuses_while_needs_are_missing():
    run = FlowRun(flow())
    run.record({"name": "Rossi"})
    answer = run.move("done", history_len=3)
    assert not answer.ok and answer.entered is None
    assert answer.result == "Not yet: ask the person for size first."
    assert run.step_name == "ask" and run.entered == 0


def test_move_enters_the_step_once_its_needs_are_known():
    run = FlowRun(flow())
    run.record({"name": "Rossi", "size": 4})
    answer = run.move("done", history_len=3)
    assert answer.ok and answer.entered is not None and answer.entered.name == "confirm"
    assert run.step_name == "confirm" and run.entered == 1 and run.previous == "ask"
    assert answer.result == "Now in step confirm."


def test_move_refuses_a_function_the_step_does_not_offer():
    run = FlowRun(flow())
    answer = run.move("yes", history_len=0)
    assert not answer.ok and answer.result == "yes cannot be called in step ask"


def test_auto_transition_is_the_first_automatic_one_whose_needs_are_known():
    first = Transition("complete", "confirm", "", needs=("name", "size"), auto=True)
    second = Transition("named", "bye", "", needs=("name",), auto=True)
    by_model = Transition("done", "confirm", "")  # needs nothing, but is the model's to call
    step = Step("ask", collect=("name", "size"), transitions=(by_model, first, second))
    run = FlowRun(with_step(flow(), step))
    assert run.auto_transition() is None
    run.record({"name": "Rossi"})
    assert run.auto_transition() is second
    run.record({"size": 2})
    assert run.auto_transition() is first  # listed first
    assert FlowRun(flow()).auto_transition() is None  # a step with no automatic transition


def test_an_automatic_transition_that_needs_nothing_is_taken_at_once():
    step = Step("book", call="book_table", transitions=(Transition("done", "bye", "", auto=True),))
    run = FlowRun(with_step(flow(), step), step_name="book")
    assert run.auto_transition() is not None and run.auto_transition().to == "bye"  # type: ignore[union-attr]
    assert run.move("done", history_len=0).ok and run.step_name == "bye"


def heard_flow() -> Flow:
    step = Step(
        "confirm",
        transitions=(
            Transition("change", "ask", "", when=("no", "make it")),
            Transition("yes", "bye", "", when=("yes", "go ahead", "sure")),
            Transition("later", "bye", "", needs=("size",), when=("sure", "later")),
            Transition("other", "ask", ""),  # no phrases: the model's to call
        ),
    )
    return with_step(flow(), step)


def test_heard_transition_takes_the_first_listed_whose_phrase_is_said():
    run = FlowRun(heard_flow(), step_name="confirm")
    assert run.heard_transition("Yes, please.", ENGLISH).function == "yes"  # type: ignore[union-attr]
    assert run.heard_transition("Sure, go ahead.", ENGLISH).function == "yes"  # type: ignore[union-attr]
    assert run.heard_transition("Go ahead and book it", ENGLISH).function == "yes"  # type: ignore[union-attr]
    # Both "no" and "yes" are said: the transition listed first wins.
    assert run.heard_transition("Yes, no, make it six", ENGLISH).function == "change"  # type: ignore[union-attr]
    assert run.heard_transition("I'll call back", ENGLISH) is None


def test_heard_transition_holds_phrases_on_whole_words():
    run = FlowRun(heard_flow(), step_name="confirm")
    assert run.heard_transition("yesterday was nice", ENGLISH) is None
    assert run.heard_transition("Nobody knows", ENGLISH) is None  # "no" inside a word
    assert run.heard_transition("go on ahead", ENGLISH) is None  # a phrase's words in a row, not apart
    assert run.heard_transition("YES!", ENGLISH).function == "yes"  # type: ignore[union-attr]


def test_heard_transition_respects_what_a_transition_needs():
    run = FlowRun(heard_flow(), step_name="confirm")
    assert run.heard_transition("Later, maybe", ENGLISH) is None  # size is not known yet
    run.state["size"] = 4
    assert run.heard_transition("Later, maybe", ENGLISH).function == "later"  # type: ignore[union-attr]
    assert run.heard_transition("Sure", ENGLISH).function == "yes"  # type: ignore[union-attr]


def test_heard_transition_in_a_language_without_spaces():
    step = Step("confirm", transitions=(Transition("yes", "bye", "", when=("はい",)),))
    run = FlowRun(with_step(flow(), step), step_name="confirm")
    assert run.heard_transition("はい、お願いします", language("ja")).function == "yes"  # type: ignore[union-attr]
    assert run.heard_transition("いいえ", language("ja")) is None


def test_enter_starts_the_context_as_the_step_says():
    cases = [("all", 0, None), ("none", 10, None), ("summary", 8, "They want a table."), (4, 6, None), (20, 0, None)]
    for context, context_from, summary in cases:
        run = FlowRun(flow(context))
        run.context_from = 7
        run.prepare_summary(8, "They want a table.")
        run.enter("confirm", history_len=10)
        assert (run.context_from, run.summary) == (context_from, summary), context
    run = FlowRun(flow("summary"))
    run.prepare_summary(8, "They want a table.")
    run.enter("confirm", history_len=10)
    assert run.instructions().endswith("Earlier in the conversation: They want a table.")
    run.enter("ask", history_len=12)  # context all: the whole history again, no summary
    assert (run.context_from, run.summary) == (0, None)
    assert run.entered == 2 and run.previous == "confirm"


def test_a_summary_context_starts_after_the_newest_summary_ready_and_reads_every_turn_before_one_is():
    run = FlowRun(flow("summary"))
    run.enter("confirm", history_len=10)  # none ready yet: every turn
    assert (run.context_from, run.summary) == (0, None)
    run.prepare_summary(6, "They want a table for four.")
    run.prepare_summary(4, "They want a table.")  # older than the one kept: dropped
    run.prepare_summary(9, "")  # nothing written: dropped
    run.enter("confirm", history_len=10)
    assert (run.context_from, run.summary) == (6, "They want a table for four.")  # turns 6.. word for word
    run.prepare_summary(12, "They want a table for four on Friday.")
    run.enter("confirm", history_len=10)  # the turn that led here is held whatever the summary covers
    assert run.context_from == 10


def test_entry_text_fills_in_the_fields_known():
    run = FlowRun(flow())
    assert run.entry_text() is None  # the step says nothing on entry
    run.record({"name": "Rossi", "size": 4})
    run.move("done", history_len=2)
    assert run.entry_text() == "A table for 4 under Rossi, on {date}?"


def test_fill_puts_the_states_values_in_and_leaves_the_unknown_as_written():
    run = FlowRun(flow())
    assert run.fill(None) is None
    assert run.fill("No fields here.") == "No fields here."
    run.state.update({"size": 4, "name": "Rossi"})
    assert run.fill("{size} for {name} ({size}), {date}, {not a field}") == "4 for Rossi (4), {date}, {not a field}"
    run.state["name"] = None  # cleared (a tool may write the state): not known, so left as written
    assert run.fill("{size} for {name}") == "4 for {name}" and run.missing(["name"]) == ["name"]
    run.state["size"] = 0  # a value, if a falsy one
    assert run.fill("{size}") == "0"


def test_a_value_that_starts_with_the_word_before_it_says_that_word_once():
    run = FlowRun(flow())
    run.state.update({"time": "At 8", "name": "Under Patel", "date": "Friday"})
    assert run.fill("{date} at {time}, under {name}.") == "Friday at 8, under Patel."
    assert run.fill("at {date}") == "at Friday"  # no word to drop
    run.state["time"] = "attic time"  # a word, not its first letters
    assert run.fill("at {time}") == "at attic time"


def test_next_question_is_the_first_missing_fields_own():
    run = FlowRun(flow())
    assert run.next_question() == "Under what name, {who}?"  # filled, a field not known left as written
    run.record({"name": "Rossi"})
    assert run.next_question() == "For how many people?"
    run.record({"size": 4})
    assert run.next_question() is None  # nothing missing
    run.enter("confirm", history_len=0)
    assert run.next_question() is None  # a step that collects nothing


def test_next_question_is_none_when_the_field_has_no_question_of_its_own():
    run = FlowRun(dataclasses.replace(flow(), fields={**FIELDS, "name": Field("name", {"type": "string"})}))
    assert run.next_question() is None  # the model asks in its own words
    run.record({"name": "Rossi"})
    assert run.next_question() == "For how many people?"


def test_snapshot_and_resume():
    run = FlowRun(flow())
    run.record({"name": "Rossi", "size": 4})
    run.move("done", history_len=2)
    stored = run.snapshot()
    assert stored == {"step": "confirm", "state": {"name": "Rossi", "size": 4}}
    run.state["name"] = "Bianchi"
    assert stored["state"]["name"] == "Rossi"  # a copy
    again = FlowRun(flow())
    held = again.state  # the tools' context holds this dict: resumed in place
    again.resume(stored)
    assert again.step_name == "confirm" and again.state == {"name": "Rossi", "size": 4}
    assert again.state is held
    again.resume({"step": "gone", "state": "nonsense"})
    assert again.step_name == "ask" and again.state == {} and again.state is held


def test_the_one_step_flow():
    f = Flow.one_step("You are helpful.", ("get_time",))
    run = FlowRun(f)
    assert run.step_name == "main" and run.instructions() == "You are helpful."
    assert run.function_specs() == [] and run.tool_names() == ["get_time"]
    assert run.auto_transition() is None and run.heard_transition("yes", ENGLISH) is None
    assert run.next_question() is None and run.entry_text() is None
