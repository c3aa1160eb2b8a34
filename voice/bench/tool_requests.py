"""The spoken requests of the tool benchmarks (``python -m voice.bench tools``, ``python -m voice.bench tool_turns``):
what the person says, the built-in tool it needs (None: none), and what the call's arguments
must mean to be right. Written for these benchmarks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _timer(seconds: int) -> Callable[[dict[str, Any]], bool]:
    return lambda a: round(a.get("minutes", 0) * 60 + a.get("seconds", 0)) == seconds


def _equals(value: float) -> Callable[[dict[str, Any]], bool]:
    def check(a: dict[str, Any]) -> bool:
        from shell.tools.builtin import calculate

        try:
            return abs(float(calculate(a["expression"])) - value) < 1e-6
        except Exception:
            return False

    return check


def _anything(a: dict[str, Any]) -> bool:
    return True


# (what the person says, the tool it needs or None, what its arguments must mean)
REQUESTS: list[tuple[str, str | None, Callable[[dict[str, Any]], bool] | None]] = [
    ("What time is it?", "get_current_time", _anything),
    ("Do you know what today's date is?", "get_current_time", _anything),
    ("Can you tell me the time, please?", "get_current_time", _anything),
    ("Set a timer for ten minutes.", "set_timer", _timer(600)),
    ("Please start a five minute timer for the pasta.", "set_timer", _timer(300)),
    ("Remind me in thirty seconds.", "set_timer", _timer(30)),
    ("What is twelve times seven?", "calculate", _equals(84)),
    ("How much is one hundred and twenty divided by eight?", "calculate", _equals(15)),
    ("What's the square root of one hundred and forty four?", "calculate", _equals(12)),
    ("Goodbye, that's all for today.", "end_conversation", _anything),
    ("Thanks, you can hang up now.", "end_conversation", _anything),
    ("Tell me a joke about cats.", None, None),
    ("How are you today?", None, None),
    ("What is the capital of France?", None, None),
    ("Can you recommend a good book?", None, None),
    ("How do I boil an egg?", None, None),
    ("Who wrote Romeo and Juliet?", None, None),
    ("Say something nice.", None, None),
]
