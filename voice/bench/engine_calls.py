"""Every engine call of a process, timed: what ran beside what at a pause (python -m voice.bench trace).

:func:`timed` wraps the engines' entry points in place (instance attributes: the
pipeline's code does not change) and returns the :class:`CallLog` they write to.
Each call is kept with its kind, its start and end on ``time.monotonic`` (the
clock :class:`~shell.clock.MonotonicClock` follows) and what it was given,
so that :func:`run_alone` can run the very same call again on a quiet machine:
a call's time beside the others over its time alone is what sharing the CPU
cost it.

Kinds: ``partial`` (the partial model, Whisper tiny.en), ``final`` (Whisper
base: the early final, the endpoint's pass, interruption checks),
``smart_turn``, ``reading`` (the LLM's next-token probabilities of a
transcript), ``llm`` (a reply's request; ``tokens`` holds when each delta came)
and ``tts`` (piper on one chunk).
"""

from __future__ import annotations

import functools
import itertools
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from shell.engines import Engines

FIRST_TOKENS = 12  # deltas read when an LLM request is run again alone


@dataclass
class Call:
    kind: str
    start: float
    end: float = float("nan")
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    tokens: list[float] = field(default_factory=list)  # llm: the time of each delta

    @property
    def duration(self) -> float:
        return self.end - self.start


class CallLog:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.originals: dict[str, Callable] = {}  # kind -> the engine's own method, unwrapped

    def clear(self) -> None:
        self.calls.clear()

    def since(self, t: float) -> list[Call]:
        """The calls that ended after ``t`` (monotonic), in the order they started."""
        return sorted((c for c in self.calls if not c.end < t), key=lambda c: c.start)


def timed(engines: Engines) -> CallLog:
    log = CallLog()
    if engines.asr_partial is not None:
        _wrap(log, engines.asr_partial, "recognize", "partial")
    _wrap(log, engines.asr_final, "recognize", "final")
    if engines.smart_turn is not None:
        _wrap(log, engines.smart_turn, "probability", "smart_turn")
    _wrap_async(log, engines.llm, "next_token_probabilities", "reading")
    _wrap_stream(log, engines.llm, "stream", "llm")
    _wrap_iter(log, engines.tts, "synthesize", "tts")
    return log


def _wrap(log: CallLog, obj: Any, name: str, kind: str) -> None:
    f = log.originals[kind] = getattr(obj, name)

    @functools.wraps(f)
    def call(*args, **kwargs):
        c = Call(kind, time.monotonic(), args=args, kwargs=kwargs)
        log.calls.append(c)
        try:
            return f(*args, **kwargs)
        finally:
            c.end = time.monotonic()

    setattr(obj, name, call)


def _wrap_async(log: CallLog, obj: Any, name: str, kind: str) -> None:
    f = log.originals[kind] = getattr(obj, name)

    @functools.wraps(f)
    async def call(*args, **kwargs):
        c = Call(kind, time.monotonic(), args=args, kwargs=kwargs)
        log.calls.append(c)
        try:
            return await f(*args, **kwargs)
        finally:
            c.end = time.monotonic()

    setattr(obj, name, call)


def _wrap_stream(log: CallLog, obj: Any, name: str, kind: str) -> None:
    f = log.originals[kind] = getattr(obj, name)

    @functools.wraps(f)
    async def call(*args, **kwargs) -> AsyncIterator:
        c = Call(kind, time.monotonic(), args=args, kwargs=kwargs)
        log.calls.append(c)
        stream = f(*args, **kwargs)
        try:
            async for piece in stream:
                c.tokens.append(time.monotonic())
                yield piece
        finally:
            await stream.aclose()
            c.end = time.monotonic()

    setattr(obj, name, call)


def _wrap_iter(log: CallLog, obj: Any, name: str, kind: str) -> None:
    f = log.originals[kind] = getattr(obj, name)

    @functools.wraps(f)
    def call(*args, **kwargs) -> Iterator:
        c = Call(kind, time.monotonic(), args=args, kwargs=kwargs)
        log.calls.append(c)
        try:
            yield from f(*args, **kwargs)
        finally:
            c.end = time.monotonic()

    setattr(obj, name, call)


async def run_alone(log: CallLog, call: Call) -> dict[str, float]:
    """``call`` again, with nothing else running: its ``duration`` (s); for ``llm``, also its
    time to first token ``ttft`` and the median ``per_token`` over its first deltas."""
    f = log.originals[call.kind]
    start = time.monotonic()
    if call.kind == "reading":
        await f(*call.args, **call.kwargs)
    elif call.kind == "llm":
        messages, *_ = call.args
        stamps: list[float] = []
        stream = f(messages, f"alone-{uuid.uuid4().hex[:8]}", **call.kwargs)
        try:
            async for _ in stream:
                stamps.append(time.monotonic())
                if len(stamps) >= FIRST_TOKENS:
                    break
        finally:
            await stream.aclose()
        gaps = sorted(b - a for a, b in itertools.pairwise(stamps))
        return {
            "duration": time.monotonic() - start,
            "ttft": stamps[0] - start if stamps else float("nan"),
            "per_token": gaps[len(gaps) // 2] if gaps else float("nan"),
        }
    elif call.kind == "tts":
        for _ in f(call.args[0]):
            pass
    else:
        f(*call.args, **call.kwargs)
    return {"duration": time.monotonic() - start}
