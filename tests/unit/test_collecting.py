"""Collecting a step's fields (core/collecting.py): a value is kept only if the person said it (a number
in digits or words, a text whose words and numbers they said), a turn is read for the missing fields (all
of them in a correction), and the extraction request holds those fields only, each nullable, after a
worked example whose JSON is JSON."""

from __future__ import annotations

import json

import jsonschema
import pytest

from core.collecting import _json, asked_fields, extraction_request, kept_values, said_value, spoken_digits
from core.flow import Field, Flow, FlowRun, Step

INTEGER = {"type": "integer", "minimum": 1}
TEXT = {"type": "string"}

FIELDS = {
    "name": Field("name", TEXT, "the name the table is under", "Under what name?", ("It's for Maria.", "Maria")),
    "party_size": Field("party_size", INTEGER, "how many people", "For how many people?", ("Three of us.", 3)),
    "date": Field("date", TEXT, "the day", "For which day?", ("Next Tuesday.", "Next Tuesday")),
    "time": Field("time", TEXT, "", None, None),
    "seating": Field("seating", {"enum": ["inside", "outside"]}, "where they sit"),
    "high_chair": Field("high_chair", {"type": "boolean"}),
}


def run(*collect: str) -> FlowRun:
    collect = collect or ("name", "party_size", "date", "time")
    steps = {"details": Step("details", collect=collect)}
    return FlowRun(Flow(role="You book tables.", steps=steps, start="details", fields=dict(FIELDS)))


# -- said_value --------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (4, "A table for four, please."),
        (4, "We are 4."),
        (4.0, "four of us"),
        (12, "twelve people"),
        (25, "twenty-five of us"),
        (2.5, "two and a half"),
    ],
)
def test_a_number_said_in_digits_or_words_is_kept(value, said):
    assert said_value(value, INTEGER, said)


@pytest.mark.parametrize(("value", "said"), [(5, "A table for four."), (12, "Hi, I'd like to book a table"), (4, "")])
def test_a_number_not_said_is_refused(value, said):
    assert not said_value(value, INTEGER, said)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("Maria", "It's for maria."),
        ("Maria Rossi", "Under Rossi, Maria Rossi."),
        ("next Friday", "Next Friday, please."),
        ("half past six", "At half past six."),
        ("It's me", "it's me"),
        ("8:00 PM", "At eight in the evening."),  # the numbers said; the am/pm is the model's form
        ("8 pm", "eight"),
        ("8 o'clock", "eight"),
        ("20:00", "At 20 please"),  # the 00 is form, not a number
        ("at seven", "at 7"),  # a number word for the digits Whisper wrote
        ("seven thirty", "At 7:30."),
    ],
)
def test_a_text_whose_words_and_numbers_were_all_said_is_kept(value, said):
    assert said_value(value, TEXT, said)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("2023-04-15", "Next Friday."),  # a date of the model's own
        ("Party Booking", "Hi, I'd like to book a table."),  # a name of the model's own
        ("Luigi's", "Hi, I'd like to book a table."),
        ("Maria Rossi", "It's for Maria."),  # a word not said
        ("9:00 PM", "At eight in the evening."),  # a number not said
        ("14:30", "In the afternoon."),
        ("", "anything"),
        ("   ", "   "),
        ("PM", "In the evening, pm."),  # nothing but form words: nothing said of its own
        ("at eight", "at 7"),  # a number word for a number not said
    ],
)
def test_a_made_up_text_is_refused(value, said):
    assert not said_value(value, TEXT, said)


def test_an_enum_or_a_bool_is_a_choice_and_kept():
    assert said_value("outside", {"enum": ["inside", "outside"]}, "On the terrace, if we can.")
    assert said_value(True, {"type": "boolean"}, "We have a baby with us.")
    assert said_value(False, {"type": "boolean"}, "")


@pytest.mark.parametrize(
    "said", ["It's 4-5-1-2.", "It's four five one two.", "My order is 4512.", "45 12", "Uh, four, five, one, two."]
)
def test_a_number_read_digit_by_digit_is_kept_as_its_digits(said):
    assert said_value("4512", TEXT, said)
    assert not said_value("4513", TEXT, said) and not said_value("451", TEXT, said)


def test_spoken_digits_are_the_runs_of_digits_read_one_by_one():
    assert spoken_digits("three oh one nine, and my phone is 555 0100") == ["3019", "5550100"]
    assert spoken_digits("A table for 4 at 8, please.") == ["4", "8"]
    assert spoken_digits("forty five twelve") == ["5"]  # numbers, not digits: said_value reads those


def test_a_value_of_another_kind_is_refused():
    assert not said_value(["Maria"], TEXT, "Maria")
    assert not said_value({"name": "Maria"}, TEXT, "Maria")


# -- asked_fields ------------------------------------------------------------


def test_a_turn_is_read_for_the_missing_fields_only():
    r = run()
    assert asked_fields(r, "For Maria.") == ["name", "party_size", "date", "time"]
    r.record({"name": "Maria", "date": "Friday"})
    assert asked_fields(r, "Four of us.") == ["party_size", "time"]


def test_a_correction_is_read_for_all_the_fields():
    r = run()
    r.record({"name": "Maria", "party_size": 4})
    assert asked_fields(r, "No, make it five people.") == ["name", "party_size", "date", "time"]
    assert asked_fields(r, "Actually, six.") == ["name", "party_size", "date", "time"]
    assert asked_fields(r, "Friday") == ["date", "time"]


def test_all_the_fields_are_read_when_none_is_missing():
    r = run()
    r.record({"name": "Maria", "party_size": 4, "date": "Friday", "time": "8 pm"})
    assert asked_fields(r, "Eight people.") == ["name", "party_size", "date", "time"]


# -- kept_values ---------------------------------------------------------------


def test_kept_values_keeps_what_was_said_and_drops_what_was_made_up():
    r = run()
    values = {"name": "Party Booking", "party_size": 4, "date": "2023-04-15", "time": None}
    kept, dropped = kept_values(r, values, "I'd like a table for four on Friday.")
    assert kept == {"party_size": 4}
    assert dropped == {"name": "Party Booking", "date": "2023-04-15"}  # null is neither


def test_kept_values_ignores_fields_the_turn_was_not_read_for():
    r = run()
    r.record({"name": "Maria"})
    kept, dropped = kept_values(r, {"name": "Rossi", "party_size": 4, "phone": "555"}, "Four, Rossi.")
    assert (kept, dropped) == ({"party_size": 4}, {})  # name is known and no correction was said
    kept, dropped = kept_values(r, {"name": "Rossi", "party_size": 5}, "No, make it Rossi, five.")
    assert (kept, dropped) == ({"name": "Rossi", "party_size": 5}, {})


def test_kept_values_of_nothing():
    assert kept_values(run(), {}, "Hello?") == ({}, {})


# -- extraction_request ------------------------------------------------------------


def test_the_request_holds_only_the_asked_fields_each_nullable():
    r = run()
    r.record({"name": "Maria", "date": "Friday"})
    messages, schema = extraction_request(r, "For how many people?", "Four of us.")
    assert schema == {
        "type": "object",
        "properties": {"party_size": {"type": ["integer", "null"], "minimum": 1}, "time": {"type": ["string", "null"]}},
        "required": ["party_size", "time"],
    }
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate({"party_size": None, "time": None}, schema)
    jsonschema.validate({"party_size": 4, "time": "8 pm"}, schema)
    assert messages[0]["role"] == "system"
    assert "Fields: party_size: how many people; time." in messages[0]["content"]
    assert "name" not in messages[0]["content"].split("Fields:")[1]
    assert messages[-2:] == [
        {"role": "assistant", "content": "For how many people?"},
        {"role": "user", "content": "Four of us."},
    ]
    assert FIELDS["party_size"].schema == INTEGER  # the field's own schema is left as it was


def test_an_enum_is_nullable_and_a_description_in_the_schema_is_left_out():
    r = run("seating", "high_chair")
    r.flow.fields["seating"] = Field("seating", {"enum": ["inside", "outside"], "description": "where"})
    _, schema = extraction_request(r, "", "Outside, please.")
    assert schema["properties"] == {
        "seating": {"enum": ["inside", "outside", None]},
        "high_chair": {"type": ["boolean", "null"]},
    }
    jsonschema.validate({"seating": None, "high_chair": True}, schema)


def test_the_worked_example_of_the_first_asked_field_comes_before_the_answer():
    r = run()
    messages, _ = extraction_request(r, "How can I help?", "A table for four, please.")
    assert [m["role"] for m in messages] == ["system", "assistant", "user", "assistant", "assistant", "user"]
    asked, answered, form = messages[1:4]
    assert asked == {"role": "assistant", "content": "Under what name?"}  # the field's own question
    assert answered == {"role": "user", "content": "It's for Maria."}
    assert json.loads(form["content"]) == {"name": "Maria", "party_size": None, "date": None, "time": None}
    assert messages[4:] == [
        {"role": "assistant", "content": "How can I help?"},
        {"role": "user", "content": "A table for four, please."},
    ]


def test_the_worked_example_is_of_the_first_asked_field_and_its_value_parses():
    r = run()
    r.record({"name": "Maria"})
    messages, _ = extraction_request(r, "For how many people?", "Three.")
    assert messages[1:4] == [
        {"role": "assistant", "content": "For how many people?"},
        {"role": "user", "content": "Three of us."},
        {"role": "assistant", "content": '{"party_size": 3, "date": null, "time": null}'},
    ]
    assert json.loads(messages[3]["content"]) == {"party_size": 3, "date": None, "time": None}


def test_no_example_without_one_and_a_question_of_its_own_when_the_field_has_none():
    r = run("time", "name")
    messages, _ = extraction_request(r, "", "At eight.")
    assert [m["role"] for m in messages] == ["system", "user"]  # time has no example; nothing asked before
    r = run("high_chair")
    r.flow.fields["high_chair"] = Field("high_chair", {"type": "boolean"}, example=("With a baby.", True))
    messages, _ = extraction_request(r, "", "Yes.")
    assert messages[1]["content"] == "What is the high_chair?"
    assert json.loads(messages[3]["content"]) == {"high_chair": True}


# -- _json ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -3,
        2.5,
        1e20,
        "",
        "plain",
        'say "hi"',
        "back\\slash",
        "\\u0041 is not A",
        "ends with a backslash \\",
        "new\nline\ttab\rreturn\x00nul\x1fus",
        "Café — ½ über 東京 🍝",
        "\x7f delete",
        "'single' quotes",
    ],
)
def test_json_is_read_back_by_json_loads(value):
    assert json.loads(_json(value)) == value


def test_a_worked_example_with_a_tricky_value_still_parses():
    r = run("name")
    tricky = 'Anna "the\\boss"\n O\'Neil'
    r.flow.fields["name"] = Field("name", TEXT, example=("Anna, the boss.", tricky))
    messages, _ = extraction_request(r, "", "Anna.")
    assert json.loads(messages[3]["content"]) == {"name": tricky}
