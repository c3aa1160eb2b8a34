"""The summary a step's context may start from (``context: summary``), prepared ahead.

A step with ``context: summary`` gives the model a summary of the conversation before it instead
of every turn. Writing one is an LLM request of a few seconds on a CPU, so it is never written at
a transition: after each reply of a flow that has such a step, the conversation so far is
summarized in the background (``Summarize``, at the engine's lowest priority), and the newest
summary that has come back is the one a transition uses. The turns it does not cover yet (those
after it) stay in the context word for word, so nothing said is lost to a summary one turn old;
before the first one is in, the step reads every turn.
"""

from __future__ import annotations

import re

from core.flow import Flow
from core.history import Turn

SUMMARY_INSTRUCTIONS = (
    "Summarize this phone conversation for the colleague who takes it over, in at most two short "
    "sentences: who the caller is, what they want, and every name, number, date and time they gave. "
    "Write only the summary."
)
MAX_SUMMARY_SENTENCES = 2
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def wants_summaries(flow: Flow | None) -> bool:
    """Whether a step of ``flow`` starts its context from a summary (then one is kept ready)."""
    return flow is not None and any(s.context == "summary" for s in flow.steps.values())


def summary_request(turns: list[Turn]) -> list[dict[str, str]]:
    """The request that summarizes ``turns``: the person's and the assistant's words as a transcript."""
    said = {"user": "Caller", "assistant": "Agent"}
    lines = [f"{said[t.role]}: {t.text.strip()}" for t in turns if t.role in said and t.text.strip()]
    return [{"role": "system", "content": SUMMARY_INSTRUCTIONS}, {"role": "user", "content": "\n".join(lines)}]


def summary_text(written: str) -> str:
    """What the model wrote, as the summary: its first sentences, on one line ("": nothing usable)."""
    sentences = _SENTENCE_END.split(" ".join(written.split()))
    return " ".join(sentences[:MAX_SUMMARY_SENTENCES]).strip()
