"""The one checker of a tool call's arguments, whoever runs the tool.

A call's arguments come from the model as JSON text. They are checked against
the tool's parameters before anything runs, and a call that does not fit is
answered with why, in words the model can act on. Two kinds of tool share the
checker: the session's own (:class:`shell.tools.Tool`, whose parameters are a
pydantic model made from the function's signature) and the client's
(Realtime's function tools, whose parameters are a JSON schema the client
sent). A client's schema is checked once, when it is offered
(:func:`schema_problem`), so that a bad one is refused at once rather than at
its first call.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` is not a JSON schema (draft 2020-12) that arguments can be checked against; None: it is."""
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        return e.message
    return None


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"the arguments are not valid JSON ({e.msg} at character {e.pos})") from e


class SchemaArguments:
    """Arguments checked against a JSON schema (a tool the client runs)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        """Raises ``jsonschema.SchemaError`` if ``schema`` is not a JSON schema (see :func:`schema_problem`)."""
        import jsonschema

        jsonschema.Draft202012Validator.check_schema(schema)
        self._validator = jsonschema.Draft202012Validator(schema)

    def check(self, text: str) -> Any:
        """The arguments of ``text`` (JSON; empty: ``{}``), parsed and checked; raises ValueError with
        what the model got wrong."""
        value = _parse(text or "{}")
        error = next(iter(self._validator.iter_errors(value)), None)
        if error is not None:
            where = ".".join(map(str, error.absolute_path)) or "arguments"
            raise ValueError(f"the arguments do not fit the tool's parameters ({where}: {error.message})")
        return value


class ModelArguments:
    """Arguments checked against a pydantic model (a tool of the session's own, named ``name``)."""

    def __init__(self, name: str, model: type[pydantic.BaseModel]) -> None:
        self.name = name
        self.model = model

    def check(self, text: str) -> dict[str, Any]:
        """The arguments of ``text`` (a JSON object), parsed and validated; raises ValueError with
        what the model got wrong."""
        if not text.strip():
            if self.model.model_fields:  # not "all defaults": a call cut off after its name looks so
                raise ValueError("the arguments are missing")
            return {}
        parsed = _parse(text)
        if not isinstance(parsed, dict):
            raise ValueError("the arguments must be a JSON object")
        if not self.model.model_fields:
            # A tool without parameters: whatever object came is ignored (a 0.5B model
            # sent its schema back, {"properties": {}, "type": "object"}, as the arguments).
            return {}
        try:
            validated = self.model.model_validate(parsed)
        except pydantic.ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors())
            raise ValueError(f"the arguments do not fit {self.name}'s parameters ({problems})") from e
        return {k: getattr(validated, k) for k in type(validated).model_fields}
