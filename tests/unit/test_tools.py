"""Tools from Python functions (``shell/tools``): schemas from annotations, calls checked
before they run, timeouts and failures as results, tool files and their mistakes, the built-ins."""

from __future__ import annotations

import asyncio
import enum
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from typing import Literal

import pytest

from core.tool_calls import ToolCall
from shell.tools import Tool, ToolContext, ToolDefinitionError, Tools, load_tools, tool


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


def get_weather(city: str, unit: Unit = Unit.CELSIUS, days: int = 1, detail: Literal["short", "long"] = "short"):
    """The weather forecast for a city."""
    return {"city": city, "unit": unit.value, "days": days, "detail": detail}


class FakeContext:
    def __init__(self) -> None:
        self.said: list[tuple[float, str]] = []
        self.ended = False

    def now(self) -> datetime:
        return datetime(2026, 12, 2, 20, 15, tzinfo=timezone(timedelta(hours=1), "CET"))

    def say_later(self, delay_s: float, text: str) -> None:
        self.said.append((delay_s, text))

    def end_conversation(self) -> None:
        self.ended = True


def call(name: str, arguments: str) -> ToolCall:
    return ToolCall(0, "call_0", name, arguments)


def test_the_schema_comes_from_the_annotations_and_the_docstring():
    t = Tool.from_function(get_weather)
    assert t.spec()["function"]["name"] == "get_weather"
    assert t.spec()["function"]["description"] == "The weather forecast for a city."
    params = t.parameters
    assert params["required"] == ["city"] and "additionalProperties" not in params
    assert params["properties"]["city"] == {"type": "string"}
    assert params["properties"]["days"] == {"type": "integer", "default": 1}
    assert params["properties"]["detail"]["enum"] == ["short", "long"]
    assert "celsius" in str(params) and "title" not in str(params)


def test_a_context_parameter_is_not_shown_to_the_model():
    def remind(text: str, context: ToolContext, minutes: float = 5.0) -> str:
        """Remind me."""
        return text

    t = Tool.from_function(remind)
    assert set(t.parameters["properties"]) == {"text", "minutes"}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"city": "Paris"', "not valid JSON"),
        ("", "the arguments are missing"),
        ("[1, 2]", "must be a JSON object"),
        ('{"city": "Paris", "days": "many"}', "days: Input should be a valid integer"),
        ('{"days": 2}', "city: Field required"),
        ('{"city": "Paris", "umbrella": true}', "umbrella: Extra inputs are not permitted"),
        ('{"city": "Paris", "detail": "medium"}', "detail: Input should be 'short' or 'long'"),
    ],
)
def test_a_call_that_does_not_fit_is_refused_with_what_the_model_got_wrong(arguments, problem):
    tools = Tools([Tool.from_function(get_weather)])
    why = tools.check(call("get_weather", arguments))
    assert isinstance(why, str) and problem in why, why


def test_a_call_that_fits_gets_its_arguments_with_defaults_and_types():
    tools = Tools([Tool.from_function(get_weather)])
    t, args = tools.check(call("get_weather", '{"city": "Oslo", "unit": "fahrenheit", "days": "3"}'))
    assert args == {"city": "Oslo", "unit": Unit.FAHRENHEIT, "days": 3, "detail": "short"}
    result = asyncio.run(t.run(args, None))
    assert result.status == "ok" and '"unit": "fahrenheit"' in result.content and '"days": 3' in result.content


def test_a_tool_without_parameters_ignores_what_came_as_arguments():
    def now() -> str:
        """Now."""
        return "now"

    tools = Tools([Tool.from_function(now)])
    assert tools.check(call("now", '{"properties": {}, "type": "object"}'))[1] == {}
    assert tools.check(call("now", ""))[1] == {}
    assert isinstance(tools.check(call("now", "[]")), str)


def test_an_unknown_tool_is_refused_naming_the_ones_there_are():
    why = Tools([Tool.from_function(get_weather)]).check(call("get_time", "{}"))
    assert why == "there is no tool named 'get_time' (the tools are: get_weather)"


def test_timeouts_failures_and_cancellation():
    @tool(timeout_s=0.05)
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(5)
        return "late"

    def broken(n: int) -> int:
        """Broken."""
        return 1 // n

    async def main():
        timeout = await Tool.from_function(slow).run({}, None)
        failed = await Tool.from_function(broken).run({"n": 0}, None)
        task = asyncio.create_task(Tool.from_function(slow).run({}, None))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return timeout, failed

    timeout, failed = asyncio.run(main())
    assert timeout.status == "timeout" and "did not finish within 0.05 s" in timeout.content
    assert failed.status == "error" and "ZeroDivisionError" in failed.content


def test_tool_options():
    @tool(timeout_s=3, cancel_on_barge_in=False)
    def book(seat: str) -> str:
        """Book a seat."""
        return seat

    def plain(x: int) -> int:
        """Plain."""
        return x

    assert Tool.from_function(book).options.timeout_s == 3
    assert not Tool.from_function(book).options.cancel_on_barge_in
    assert Tool.from_function(plain).options.cancel_on_barge_in


def write(tmp_path, name: str, body: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_a_tools_file_offers_the_functions_in_its_all(tmp_path):
    path = write(
        tmp_path,
        "shop.py",
        '''
        from voice.tools import tool

        __all__ = ["order_status", "cancel_order"]

        def helper():
            pass

        async def order_status(order_id: str) -> str:
            """Where an order is."""
            return "shipped"

        @tool(cancel_on_barge_in=False)
        def cancel_order(order_id: str, reason: str = "") -> str:
            """Cancel an order."""
            return "cancelled"
        ''',
    )
    tools = load_tools([path, "builtin"])
    assert [t.name for t in tools] == [
        "order_status",
        "cancel_order",
        "calculate",
        "end_conversation",
        "get_current_time",
        "set_timer",
    ]
    assert tools["order_status"].source == path and not tools["cancel_order"].options.cancel_on_barge_in


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("__all__ = ['f']\ndef f(x: int) -> int\n    return x\n", ":2: syntax error"),
        ("__all__ = ['f']\ndef f(x):\n    'Doc.'\n    return x\n", "tool f: parameter x has no type annotation"),
        ("def f(x: int):\n    'Doc.'\n", "lists no tools: name its tool functions in __all__"),
        ("__all__ = ['g']\n", "__all__ names g, which is not a function in it"),
        ("__all__ = ['f']\ndef f(x: int):\n    return x\n", "tool f has no docstring"),
        ("import no_such_module_here\n", "importing it failed: ModuleNotFoundError"),
        ("__all__ = ['f']\ndef f(*xs: int):\n    'Doc.'\n", "*xs cannot be described"),
    ],
    ids=["syntax", "no-annotation", "no-all", "not-a-function", "no-docstring", "import-error", "varargs"],
)
def test_a_bad_tools_file_is_one_line_that_names_it(tmp_path, body, message):
    path = write(tmp_path, "bad.py", body)
    with pytest.raises(ToolDefinitionError) as e:
        load_tools([path])
    assert str(e.value).startswith(path) and message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_two_tools_of_one_name_are_refused(tmp_path):
    path = write(tmp_path, "clock.py", "__all__ = ['calculate']\ndef calculate(x: str) -> str:\n    'Mine.'\n")
    with pytest.raises(ToolDefinitionError, match="a tool named calculate is already defined in builtin"):
        load_tools(["builtin", path])


def test_a_missing_tools_file():
    with pytest.raises(ToolDefinitionError, match="no such tools file"):
        load_tools(["/nonexistent/tools.py"])


# -- the built-ins ---------------------------------------------------------------------------


def run_builtin(name: str, arguments: str, context: FakeContext | None = None):
    tools = load_tools(["builtin"])
    checked = tools.check(call(name, arguments))
    assert not isinstance(checked, str), checked
    t, args = checked
    return asyncio.run(t.run(args, context or FakeContext()))


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("12 * 7", "84"),
        ("sqrt(2) * (3 + 4.5)", "10.60660172"),
        ("2 ** 10 / 4", "256"),
        ("-7 // 2 % 5", "1"),
        ("13^2", "169"),  # a power, as people write one
    ],
)
def test_calculate(expression, value):
    assert run_builtin("calculate", f'{{"expression": "{expression}"}}').content == value


@pytest.mark.parametrize("expression", ["__import__('os').system('true')", "().__class__", "9 ** 9 ** 9", "1 / 0"])
def test_calculate_refuses_what_is_not_arithmetic(expression):
    result = run_builtin("calculate", f'{{"expression": "{expression}"}}')
    assert result.status == "error"


def test_the_time_the_timer_and_hanging_up_go_through_the_session():
    context = FakeContext()
    assert (
        run_builtin("get_current_time", "{}", context).content == "Wednesday, 02 December 2026, 20:15 (CET, UTC+0100)"
    )
    timer = run_builtin("set_timer", '{"minutes": 10, "label": "tea"}', context)
    assert timer.content == "timer set for 10 min (tea)" and context.said == [(600, "Your tea timer is done.")]
    assert run_builtin("set_timer", '{"seconds": 0}', context).status == "error"
    assert run_builtin("set_timer", '{"minutes": 1, "seconds": 30}', context).content == "timer set for 1 min 30 s"
    assert not context.ended
    assert run_builtin("end_conversation", "{}", context).status == "ok" and context.ended


def test_the_wall_clock_has_a_time_zone():
    assert FakeContext().now().tzinfo is not None and datetime.now(UTC).tzinfo is not None


# -- the one argument checker (shell/tools/arguments.py) --------------------------


def test_a_client_tools_arguments_are_checked_against_its_json_schema():
    from shell.tools.arguments import SchemaArguments, schema_problem

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    checker = SchemaArguments(schema)
    assert checker.check('{"city": "Oslo"}') == {"city": "Oslo"}
    with pytest.raises(ValueError, match=r"not valid JSON \(Expecting value at character 0\)"):
        checker.check("nope")
    with pytest.raises(ValueError, match=r"do not fit the tool's parameters \(city: 3 is not of type 'string'\)"):
        checker.check('{"city": 3}')
    with pytest.raises(ValueError, match=r"\(arguments: 'city' is a required property\)"):
        checker.check("")  # empty: {} as the arguments
    assert schema_problem(schema) is None
    assert "is not valid under any of the given schemas" in (schema_problem({"type": 7}) or "")
