"""The built-in tools (``--tools builtin``): the time, a timer, a calculator, and hanging up."""

from __future__ import annotations

import ast
import math
import operator

from shell.tools.registry import ToolContext, tool

__all__ = ["calculate", "end_conversation", "get_current_time", "set_timer"]


def get_current_time(context: ToolContext) -> str:
    """The current date, time and time zone where the assistant runs."""
    now = context.now()
    return now.strftime("%A, %d %B %Y, %H:%M (%Z, UTC%z)")


@tool(cancel_on_barge_in=False)  # a timer that was set stays set
def set_timer(context: ToolContext, minutes: float = 0, seconds: float = 0, label: str = "") -> str:
    """Set a timer that says so aloud when it goes off, minutes and/or seconds from now (24 hours at most).
    label: what it is for."""
    total = round(minutes * 60 + seconds)
    if not 1 <= total <= 86_400:
        raise ValueError("a timer runs from 1 second to 24 hours")
    what = f"Your {label} timer" if label else "Your timer"
    context.say_later(total, f"{what} is done.")
    m, s = divmod(total, 60)
    span = f"{m} min {s} s" if m and s else (f"{m} min" if m else f"{s} s")
    return f"timer set for {span}" + (f" ({label})" if label else "")


@tool(grounded=True)  # its numbers are the person's: "100 + 200" for a quotation is not run
def calculate(expression: str) -> str:
    """Work out the arithmetic the person asks for, written with the numbers they said: + - * / // % ** and
    parentheses, sqrt, sin, cos, tan, log, log10, exp, abs, round, pi, e."""
    # "^" is a power as people (and models) write one, never an exclusive or.
    value = _evaluate(ast.parse(expression.replace("^", "**"), mode="eval").body)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return f"{value:.10g}" if isinstance(value, float) else str(value)


@tool(cancel_on_barge_in=False)
def end_conversation(context: ToolContext) -> str:
    """End the conversation (hang up) once the goodbye has been said. Only when the person wants to end it."""
    context.end_conversation()
    return "The conversation ends after this reply: say goodbye."


_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS = {
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "abs": abs,
    "round": round,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}


def _evaluate(node: ast.AST) -> float | int:
    """Arithmetic only: no names but the constants and functions above, no attributes, no calls of anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 1000:
            raise ValueError("that power is too large")
        return _OPERATORS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return _FUNCTIONS[node.func.id](*(_evaluate(a) for a in node.args))
    raise ValueError(f"not arithmetic: {ast.unparse(node)!r}")
