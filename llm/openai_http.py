"""The remote backend: any OpenAI-compatible streaming chat endpoint.

Works with a vLLM server (``python -m vllm.entrypoints.openai.api_server``) and
anything else that speaks ``POST /v1/chat/completions`` with ``stream: true``
(server-sent events). Cancelling closes the HTTP stream, which makes vLLM drop
the request.

``stream(..., prefix=TEXT)`` continues a partial assistant reply instead of
starting one (vLLM's ``continue_final_message``): :class:`llm.pool.LLMPool`
uses it to finish, on another server, a reply whose server died mid-stream.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from typing import Any

import httpx

from core.tool_calls import ToolCallDelta
from llm.base import TOP_TOKENS, Delta, GenerationConfig, LLMError
from llm.context import approx_tokens, fit_to_context


class LLMStatusError(LLMError):
    """The server answered with an HTTP error status (kept: a 4xx is the request's fault, a 5xx the server's)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class OpenAIChatClient:
    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        generation: GenerationConfig | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        context_tokens: int = 2048,
    ) -> None:
        self.context_tokens = context_tokens
        base = base_url.rstrip("/")
        if not base.endswith("/v1"):
            base += "/v1"
        self.base_url = base
        self.model = model
        self.generation = generation or GenerationConfig()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.name = f"http:{self.base_url}"
        # trust_env=False: a proxy from the environment must not capture loopback traffic.
        self._client = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(timeout_s, connect=5.0), trust_env=False
        )

    async def _model_name(self) -> str:
        if self.model is None:
            r = await self._client.get(f"{self.base_url}/models")
            r.raise_for_status()
            self.model = r.json()["data"][0]["id"]
        return self.model

    async def stream(
        self,
        messages: list[dict[str, str]],
        request_id: str | None = None,
        *,
        prefix: str | None = None,
        max_tokens: int | None = None,
        tools: list[dict[str, Any]] | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> AsyncIterator[Delta | ToolCallDelta]:
        """Stream the reply to ``messages``; with ``prefix``, only what follows that partial reply.

        ``tools`` (OpenAI's function specs) are offered to the model; its calls come as
        :class:`~core.tool_calls.ToolCallDelta` pieces (``delta.tool_calls``; a vLLM
        server parses them from the model's text when started with
        ``--enable-auto-tool-choice --tool-call-parser NAME``).

        The history is cut to the context as for the whole reply (the prefix
        is part of the reply's ``max_tokens``), so a continuation sees exactly
        the prompt the reply started from. ``max_tokens`` (default: the
        generation config's) is what is left of the reply.
        """
        g = self.generation
        try:
            fitted = fit_to_context(messages, approx_tokens, self.context_tokens - g.max_tokens)
            body = {
                "model": await self._model_name(),
                "messages": fitted,
                "stream": True,
                "max_tokens": g.max_tokens if max_tokens is None else max_tokens,
                "temperature": g.temperature,
                "top_p": g.top_p,
                "seed": g.seed,
                # Not in OpenAI's API; vLLM and llama.cpp servers take it, others ignore it.
                "repetition_penalty": g.penalty(messages, tools),
            }
            if tools:
                body["tools"] = tools
                body["tool_choice"] = "auto"
            if json_schema is not None:  # OpenAI's structured output, which vLLM servers take too
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "fields", "schema": json_schema},
                }
            if prefix:
                # vLLM renders the final assistant message open-ended (no end-of-turn
                # token) and generates its continuation; the stream holds only the new text.
                body["messages"] = [*fitted, {"role": "assistant", "content": prefix}]
                body["continue_final_message"] = True
                body["add_generation_prompt"] = False
            async with self._client.stream("POST", f"{self.base_url}/chat/completions", json=body) as r:
                if r.status_code != 200:
                    detail = (await r.aread()).decode(errors="replace")[:200]
                    raise LLMStatusError(f"{self.base_url}: HTTP {r.status_code}: {detail}", r.status_code)
                async for line in r.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    try:
                        event = json.loads(data)
                    except json.JSONDecodeError as e:
                        raise LLMError(f"{self.base_url}: malformed stream event: {data[:80]!r}") from e
                    if "error" in event:
                        raise LLMError(f"{self.base_url}: {event['error']}")
                    for choice in event.get("choices", []):
                        delta = choice.get("delta") or {}
                        if delta.get("content"):
                            yield Delta(delta["content"])
                        for call in delta.get("tool_calls") or []:
                            yield _tool_call_delta(call, self.base_url)
            raise LLMError(f"{self.base_url}: the stream ended without [DONE]")
        except httpx.HTTPError as e:
            raise LLMError(f"{self.base_url}: {type(e).__name__}: {e}") from e

    async def next_token_probabilities(self, text: str, k: int = TOP_TOKENS) -> dict[str, float]:
        """With the completions API (``logprobs``: vLLM serves up to its ``--max-logprobs``, 20
        by default)."""
        try:
            body = {
                "model": await self._model_name(),
                "prompt": text,
                "max_tokens": 1,
                "temperature": 0.0,
                "logprobs": k,
            }
            r = await self._client.post(f"{self.base_url}/completions", json=body)
        except httpx.HTTPError as e:
            raise LLMError(f"{self.base_url}: {type(e).__name__}: {e}") from e
        if r.status_code != 200:
            raise LLMStatusError(f"{self.base_url}: HTTP {r.status_code}: {r.text[:200]}", r.status_code)
        try:
            top = r.json()["choices"][0]["logprobs"]["top_logprobs"][0]
            return {str(token): math.exp(float(lp)) for token, lp in top.items()}
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise LLMError(f"{self.base_url}: malformed completion: {r.text[:80]!r}") from e

    async def close(self) -> None:
        await self._client.aclose()


def _tool_call_delta(call: Any, where: str) -> ToolCallDelta:
    """One entry of ``delta.tool_calls``: ``{"index", "id"?, "function": {"name"?, "arguments"?}}``. The
    server's id is left out: it is random, and the conversation names its calls itself (core/tool_calls.py),
    so that a conversation on virtual time repeats exactly."""
    try:
        function = call.get("function") or {}
        return ToolCallDelta(
            index=int(call["index"]),
            id=None,
            name=function.get("name") or None,
            arguments=function.get("arguments") or "",
        )
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise LLMError(f"{where}: malformed tool call in the stream: {str(call)[:80]!r}") from e
