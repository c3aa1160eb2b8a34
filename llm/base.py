"""The LLM interface the pipeline talks to.

``stream(messages, request_id)`` is an async iterator of text deltas
(:class:`Delta`: a ``str`` that also says how many tokens it took). To cancel,
close it (``aclose()``) or cancel the task iterating it: the backend then
aborts the request inside the engine (embedded vLLM) or closes the HTTP stream
(a server), so no further token is generated for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from core.tool_calls import ToolCallDelta


@dataclass(frozen=True)
class GenerationConfig:
    max_tokens: int = 64  # a spoken reply is short; this bounds a runaway one
    temperature: float = 0.0  # greedy: replies are repeatable on virtual time
    top_p: float = 1.0
    repetition_penalty: float = 1.2  # small models loop on greedy decoding without it

    def penalty(self, messages: list[dict[str, Any]], tools: object = None) -> float:
        """The repetition penalty of a request: none with tools, or with a tool's result to
        answer with. It counts the prompt's tokens too, so it steers a call away from the tool
        names and JSON the prompt spells out (Qwen2.5-Coder-0.5B, with 1.2, called
        ``start_timer`` for ``set_timer`` and ``divide`` for ``calculate``, and wrote its calls
        pretty-printed in a code fence), and an answer away from the result it must repeat."""
        if tools or any(m.get("role") == "tool" for m in messages):
            return 1.0
        return self.repetition_penalty

    seed: int = 0


class Delta(str):
    """A piece of streamed reply text, and the number of tokens generated for it.

    vLLM says exactly (a delta may hold several tokens, or a token may hold
    no whole character yet); an OpenAI-compatible stream sends one token per
    event, so there it is 1.
    """

    tokens: int

    def __new__(cls, text: str, tokens: int = 1) -> Delta:
        delta = super().__new__(cls, text)
        delta.tokens = tokens
        return delta


# Next-token probabilities asked for: vLLM's default cap on logprobs (max_logprobs).
TOP_TOKENS = 20


class LLMError(RuntimeError):
    """The LLM failed mid-request (engine died, server gone, bad reply)."""


class LLM(Protocol):
    name: str

    def stream(
        self,
        messages: list[dict[str, Any]],
        request_id: str,
        tools: list[dict[str, Any]] | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> AsyncIterator[Delta | ToolCallDelta]:
        """The reply's text; with ``tools`` (OpenAI function specs) the model may call them, and
        its calls come as :class:`~core.tool_calls.ToolCallDelta` pieces, never as text; with
        ``json_schema`` (and no tools) the text is JSON held to that schema (structured output)."""
        ...

    async def next_token_probabilities(self, text: str, k: int = TOP_TOKENS) -> dict[str, float]:
        """The ``k`` likeliest tokens to follow ``text`` (plain text, no chat template), as
        the tokenizer spells them, with their probabilities: one prefill, no reply. The
        end-of-turn decision asks whether a transcript's sentence ends there."""
        ...

    async def close(self) -> None: ...
