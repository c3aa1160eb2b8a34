"""Collecting a step's fields: asked of the model as JSON held to their schema, kept only if said.

Offered a function to record what the person said, Qwen2.5-Coder-0.5B made the values up
("Luigi's" as the name, 12 people, "2023-04-15") for "Hi, I'd like to book a table", and asked
for the fields as JSON held to their schema it still filled every one ("Party Booking",
"14:30"; docs/bench/flows.md). So in a step that collects, each turn of the person's is first
read by an extraction request (:class:`~core.commands.Extract`: the person's words and the
question before them, the fields as a JSON schema where each may be null), and a value is
kept only if the person said it (:func:`said_value`): a number they said in digits or words,
a text whose words and numbers they said. What is kept overwrites what was there (a
correction); what was made up is dropped and asked for again in words. Then the flow goes on
by itself if a transition marked ``auto`` has all it needs, else the model answers, told what
is known and what is still missing.
"""

from __future__ import annotations

import re
from typing import Any

from core.faithful import given, numbers_in
from core.flow import Field, FlowRun
from core.grounded import UNIT_WORDS, said_numbers

_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
# Words a model writes for a time or an amount the person said otherwise ("8 pm" for "eight in
# the evening"): not evidence of a made-up value on their own.
_FORM_WORDS = {"am", "pm", "o'clock", "oclock"}


def said_value(value: Any, schema: dict[str, Any], said: str) -> bool:
    """Whether ``value`` for a field of ``schema`` is something the person said in ``said``."""
    if isinstance(value, bool) or "enum" in schema:
        return True  # a choice among the schema's own values: nothing to make up
    numbers = said_numbers([said])
    if isinstance(value, int | float):
        return given(f"{value:g}", numbers)
    if not isinstance(value, str) or not value.strip():
        return False
    if value.isdigit() and value in spoken_digits(said):  # a number read digit by digit
        return True
    words = {w.lower() for w in _WORD.findall(said)}
    own_numbers = [n for n in numbers_in(value) if float(n) != 0]  # "8:00": the 00 is form, not a number
    own_words = [w.lower() for w in _WORD.findall(value) if w.lower() not in _FORM_WORDS]
    if not own_numbers and not own_words:
        return False
    return all(given(n, numbers) for n in own_numbers) and all(_said_word(w, words, numbers) for w in own_words)


def _said_word(word: str, words: set[str], numbers: list[str]) -> bool:
    """Whether ``word`` of a value was said: as a word, or a number word as its number in digits
    (the model wrote "at seven" for Whisper's "at 7", and the time was refused nine times)."""
    return word in words or (word in UNIT_WORDS and given(str(UNIT_WORDS[word]), numbers))


_DIGIT_WORDS = {**{w: str(v) for w, v in UNIT_WORDS.items() if v < 10}, "o": "0"}  # "zero" to "nine", "oh"
_DIGIT_TOKEN = re.compile(r"\d+|[^\W\d_]+")


def spoken_digits(said: str) -> list[str]:
    """The runs of digits ``said`` reads one by one, joined ("4-5-1-2", "four five one two", "45 12"
    and "three oh one nine" give "4512", "4512", "4512", "3019"): an order or a phone number, which
    Whisper writes with dashes or spaces, or in words, between its digits."""
    runs, run = [], ""
    for token in _DIGIT_TOKEN.findall(said.lower()):
        digit = token if token.isdigit() else _DIGIT_WORDS.get(token)
        if digit is not None:
            run += digit
        elif run:
            runs.append(run)
            run = ""
    return [*runs, run] if run else runs


# Words with which a person changes what they said before ("No, make it five people."): then the
# fields already known are asked for again too; otherwise only the missing ones.
_CORRECTION = re.compile(r"\b(no|not|actually|make it|change|instead|sorry|wrong|rather)\b", re.IGNORECASE)


def asked_fields(run: FlowRun, said: str) -> list[str]:
    """The fields a turn is read for: those still missing, or all the step's in a correction."""
    missing = run.missing(run.step.collect)
    return list(run.step.collect) if not missing or _CORRECTION.search(said) else missing


def extraction_request(run: FlowRun, asked: str, said: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The messages and the JSON schema that ask the model what ``said`` (the person's answer to
    ``asked``) holds of the fields it is read for. Measured on 15 answers to the restaurant's
    questions with the 0.5B model (docs/guide/agents.md): read for all four fields, 10 right (told
    "At what time?", "At eight." was a party of 8); for the missing ones only, 11 and 12 in two
    runs; with the first one's example too, 14. Told to copy the person's words, it wrote "Friday"
    where it had written a date of its own ("2023-10-04")."""
    fields = [run.flow.fields[n] for n in asked_fields(run, said)]
    described = "; ".join(f"{f.name}: {f.description}" if f.description else f.name for f in fields)
    system = (
        "Fill in the form from the person's answer. For text, copy the person's own words exactly; for a"
        f" number, the number they said. Fields: {described}. Use null for anything the person did not say"
        " in this answer."
    )
    messages = [{"role": "system", "content": system}, *_worked_example(fields)]
    if asked:
        messages.append({"role": "assistant", "content": asked})
    messages.append({"role": "user", "content": said})
    properties = {}
    for f in fields:
        schema = {k: v for k, v in f.schema.items() if k != "description"}
        if "type" in schema:
            schema["type"] = [schema["type"], "null"]
        elif "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
        properties[f.name] = schema
    return messages, {"type": "object", "properties": properties, "required": list(properties)}


def _worked_example(fields: list[Field]) -> list[dict[str, Any]]:
    """The first field's example answer (the field the flow asks for next), and the form filled from it,
    every other field null: shown one, the 0.5B model read 14 of 15 answers right, against 11-12
    (time "10pm" for "8 in the evening")."""
    first = fields[0]
    if first.example is None:
        return []
    said, value = first.example
    form = ", ".join(f"{_json(f.name)}: {_json(value if f is first else None)}" for f in fields)
    return [
        {"role": "assistant", "content": first.ask or f"What is the {first.name}?"},
        {"role": "user", "content": said},
        {"role": "assistant", "content": "{" + form + "}"},
    ]


def _json(value: Any) -> str:
    """``value`` (None, a bool, a number or a text) as JSON (the core writes no files and imports no json)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c >= " " else f"\\u{ord(c):04x}" for c in text) + '"'


def kept_values(run: FlowRun, values: dict[str, Any], said: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Of ``values`` (the extraction's, checked against its schema), those the person said, and those
    they did not (dropped: made up)."""
    kept: dict[str, Any] = {}
    dropped: dict[str, Any] = {}
    asked = asked_fields(run, said)  # once: it reads the turn for a correction
    for name, value in values.items():
        if value is None or name not in asked:
            continue
        if said_value(value, run.flow.fields[name].schema, said):
            kept[name] = value
        else:
            dropped[name] = value
    return kept, dropped
