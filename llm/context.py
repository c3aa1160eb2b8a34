"""Fitting a conversation to the model's context without losing the engine's prefix cache.

A long conversation forgets its beginning rather than failing the request. How it forgets
decides what the next turn costs: vLLM (embedded or a server) keeps the KV cache of a
prompt's prefix, so a turn whose prompt starts like the last one's prefills only what is new.
Dropping the oldest turn one at a time, once the conversation is full, changes the prompt
right after the system message at every turn: the cache then holds the system prompt alone
and every request prefills the whole context again (issue 32).

So the conversation is cut only at marks fixed on its own length: the first message that
starts at or after each ``step`` tokens of it. The cut is the earliest mark from which the
rest fits. As the conversation grows the same mark keeps fitting, and the prompt's start
stays the same, turn after turn, until the rest outgrows the budget and the cut moves to the
next mark, dropping about ``step`` tokens at once: one full prefill in that many tokens of
conversation, instead of one every turn. Where the marks fall is counted with a cheap,
stable estimate (:func:`approx_tokens`); whether the rest fits, with the caller's count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Messages = list[dict[str, Any]]


def approx_tokens(messages: Messages) -> int:
    """A tokenizer-free upper estimate (English text is ~4 characters a token)."""
    return sum(len(str(m.get("content") or "")) // 3 + len(str(m.get("tool_calls") or "")) // 3 + 4 for m in messages)


def fit_to_context(
    messages: Messages, n_tokens: Callable[[Messages], int], budget: int, step: int | None = None
) -> Messages:
    """The conversation cut so that ``n_tokens(result) <= budget``, at the earliest mark that fits.

    ``step``: the marks' spacing in (estimated) tokens; by default half the budget, so a cut
    keeps at least about half of it. Measured over 50 turns (``python -m voice.bench
    long_conversation``): with half, a full prefill every ~8 turns and a mean first token over
    turns 21-50 of 0.34 s; with a quarter, every ~4 turns and 0.49 s; one message at a time,
    every turn and 1.72 s. The system prompt and the newest message
    are always kept; a tool result is never kept without the call it answers (the conversation
    left never begins with one).
    """
    system = [m for m in messages[:1] if m["role"] == "system"]
    rest = messages[len(system) :]
    if len(rest) <= 1 or n_tokens(system + rest) <= budget:
        return system + rest
    cuts = _marks(rest, step or max(1, budget // 2))
    # Fewer tokens the later the cut: the earliest that fits, by bisection.
    lo, hi = 0, len(cuts)
    while lo < hi:
        mid = (lo + hi) // 2
        if n_tokens(system + rest[cuts[mid] :]) <= budget:
            hi = mid
        else:
            lo = mid + 1
    return system + rest[cuts[lo] :] if lo < len(cuts) else system + rest[-1:]


def _marks(rest: Messages, step: int) -> list[int]:
    """Where ``rest`` may be cut: the first message at or after each multiple of ``step``
    (estimated tokens from its start), moved past tool results; never the last message."""
    cuts: list[int] = []
    start = previous = 0  # where message i starts, and where the one before it did
    for i, m in enumerate(rest):
        if i and start // step > previous // step:  # a mark fell inside the message before
            j = i
            while j < len(rest) - 1 and rest[j]["role"] == "tool":
                j += 1
            if j < len(rest) - 1 and (not cuts or j > cuts[-1]):
                cuts.append(j)
        previous, start = start, start + approx_tokens([m])
    return cuts
