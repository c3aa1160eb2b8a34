"""Several OpenAI-compatible vLLM servers behind one :class:`llm.base.LLM`.

Each reply (one ``stream()`` call) goes to the replica that holds its
conversation's prefix in its cache: a conversation's replies all go to one
replica, chosen by rendezvous hashing of the conversation's opening messages
(its system prompt and first question: what every request of it begins
with), so vLLM's prefix cache there already holds the history and the next
request prefills only the new turn. The failover bench measured what this is
worth: a replica with a 12-turn history cached answered in ~109 ms, one
without in ~1.1 s. Conversations spread over the replicas by their hash. A
replica that is unhealthy, or holds ``max_imbalance`` more requests in flight
than the least-loaded one, is passed over for the next in the conversation's
order (so when a replica goes, only its conversations move, and they come
back when it does). Without affinity (``affinity=False``) each reply goes to
the healthy replica with the fewest requests in flight, ties taken in turn.

A replica that refuses the connection, answers a 5xx or whose stream dies
is marked unhealthy and skipped until ``GET /health`` answers 200 again
(probed in the background every few seconds; when every replica is
unhealthy they are tried anyway, rather than failing on stale news).

A reply whose replica fails before its first delta is sent again to the next
one, unseen by the caller. One that fails mid-reply (its first words may
already be spoken) is continued on another replica from exactly the text
yielded so far (vLLM's ``continue_final_message``), and only the continuation
is yielded; greedy decoding makes the joined reply the one a single server
would have given. Each replica is tried at most once per reply; when none can
serve it, :class:`llm.base.LLMError` names every replica tried and why.

The routing rules live in :class:`Router` (pure: no I/O, no clock); the
pool is the I/O around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from core.tool_calls import ToolCallDelta
from llm.base import TOP_TOKENS, Delta, GenerationConfig, LLMError
from llm.openai_http import LLMStatusError, OpenAIChatClient

log = logging.getLogger(__name__)


@dataclass
class ReplicaState:
    url: str
    healthy: bool = True
    in_flight: int = 0  # requests from this pool running there now
    served: int = 0  # requests that ended there without the replica failing (done, cancelled, or a 4xx)
    failures: int = 0  # requests the replica failed (refused, 5xx, stream died)


class Router:
    """Which replica takes the next request, and what is known of each.

    Pure bookkeeping, fed by the pool: ``acquire``/``release`` around every
    request, ``mark_failed``/``mark_healthy`` from requests and probes.
    """

    def __init__(self, urls: Sequence[str], max_imbalance: int = 4) -> None:
        if not urls:
            raise ValueError("a pool needs at least one replica")
        self.replicas = [ReplicaState(u) for u in urls]
        self.max_imbalance = max_imbalance  # a conversation's replica may hold this many more than the least
        self._next = 0  # round-robin cursor: where the search for a tie starts

    def order(self, key: str) -> list[int]:
        """The replicas in ``key``'s order of preference (rendezvous hashing: stable per key and
        replica, so a replica that goes or comes moves only the keys it comes first for)."""

        def weight(i: int) -> bytes:
            return hashlib.blake2b(f"{key}\0{self.replicas[i].url}".encode(), digest_size=8).digest()

        return sorted(range(len(self.replicas)), key=weight, reverse=True)

    def pick(self, tried: Collection[int] = (), key: str | None = None) -> int | None:
        """The replica for the next request not in ``tried``; None when all were tried.

        With ``key`` (a conversation's), the first healthy replica in its
        order that is not overloaded (``max_imbalance`` more in flight than
        the least-loaded healthy one). Without, or when none qualifies, the
        least-loaded healthy replica. When every untried replica is unhealthy,
        the least loaded of them: health is only known from the last failure
        or probe, and trying costs a refused connection, while giving up costs
        the reply.
        """
        n = len(self.replicas)
        untried = [i for i in range(n) if i not in tried]
        if not untried:
            return None
        candidates = [i for i in untried if self.replicas[i].healthy] or untried
        least = min(self.replicas[i].in_flight for i in candidates)
        if key is not None:
            for i in self.order(key):
                if i in candidates and self.replicas[i].in_flight - least < self.max_imbalance:
                    return i
        ties = [i for i in candidates if self.replicas[i].in_flight == least]
        chosen = min(ties, key=lambda i: (i - self._next) % n)
        self._next = (chosen + 1) % n
        return chosen

    def acquire(self, i: int) -> None:
        self.replicas[i].in_flight += 1

    def release(self, i: int, failed: bool) -> None:
        r = self.replicas[i]
        r.in_flight -= 1
        if failed:
            r.failures += 1
            r.healthy = False
        else:
            r.served += 1

    def mark_failed(self, i: int) -> None:
        self.replicas[i].healthy = False

    def mark_healthy(self, i: int) -> None:
        self.replicas[i].healthy = True

    def unhealthy(self) -> list[int]:
        return [i for i, r in enumerate(self.replicas) if not r.healthy]


def conversation_key(messages: Sequence[dict[str, Any]]) -> str:
    """What names a conversation for routing: its opening, up to and with its first question,
    which every request of it begins with (the first one included).

    Two conversations that open alike share that prefix in the cache too, so sharing a replica
    costs nothing. Once the history is cut to fit the context its opening changes, and so does
    its key: its old prefix is of no use anywhere by then.
    """
    first = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages) - 1)
    head = json.dumps(list(messages[: first + 1]), sort_keys=True, default=str)
    return hashlib.blake2b(head.encode(), digest_size=16).hexdigest()


def is_replica_failure(error: LLMError) -> bool:
    """Whether another replica may succeed where this one failed.

    An HTTP 4xx is the request's own fault (bad body, unknown model) and would
    fail everywhere; 429 (overloaded) and anything else (refused, 5xx, a dead
    or malformed stream, an error event) is the server's.
    """
    return not isinstance(error, LLMStatusError) or error.status >= 500 or error.status == 429


class LLMPool:
    """An LLM over several OpenAI-compatible servers that serve the same model."""

    def __init__(
        self,
        urls: Sequence[str],
        model: str | None = None,
        generation: GenerationConfig | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        context_tokens: int = 2048,
        probe_interval_s: float = 2.0,
        probe_timeout_s: float = 2.0,
        affinity: bool = True,
        max_imbalance: int = 4,
    ) -> None:
        """``affinity``: a conversation's replies go to the replica that holds its prefix (see the module)."""
        self.generation = generation or GenerationConfig()
        self.clients = [OpenAIChatClient(u, model, self.generation, api_key, timeout_s, context_tokens) for u in urls]
        self.router = Router([u.rstrip("/") for u in urls], max_imbalance)
        self.affinity = affinity
        self.name = "pool:" + ",".join(c.base_url for c in self.clients)
        self.probe_interval_s = probe_interval_s
        self._health = httpx.AsyncClient(timeout=probe_timeout_s, trust_env=False)
        self._prober: asyncio.Task | None = None

    def replicas_state(self) -> list[dict[str, Any]]:
        """Each replica's url, health, requests in flight, served and failed, for logs and metrics."""
        return [dataclasses.asdict(r) for r in self.router.replicas]

    async def stream(
        self,
        messages: list[dict[str, Any]],
        request_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> AsyncIterator[Delta | ToolCallDelta]:
        """One reply, on the least-loaded healthy replica; finished on another if that one fails
        (not once it has begun a tool call: a call's pieces cannot be continued elsewhere, and
        the reply fails instead, its unfinished call never run)."""
        self._start_prober()
        g = self.generation
        said = ""  # what this reply has yielded so far, over every replica
        tokens = 0
        tried: list[int] = []
        errors: list[str] = []
        calling = False  # a tool call's pieces have been given out
        key = conversation_key(messages) if self.affinity else None
        while True:
            i = self.router.pick(tried, key)
            if i is None:
                raise LLMError(f"no LLM replica could serve the request; tried {len(tried)}: " + "; ".join(errors))
            tried.append(i)
            client = self.clients[i]
            if said:
                log.warning("continuing a reply on %s after %d tokens", client.base_url, tokens)
                inner = client.stream(
                    messages,
                    request_id,
                    prefix=said,
                    max_tokens=g.max_tokens - tokens,
                    tools=tools,
                    json_schema=json_schema,
                )
            else:
                inner = client.stream(messages, request_id, tools=tools, json_schema=json_schema)
            self.router.acquire(i)
            failed = False
            try:
                # aclosing: a cancelled or closed reply closes the HTTP stream now, so vLLM aborts it.
                async with contextlib.aclosing(inner):
                    async for delta in inner:
                        self.router.mark_healthy(i)  # it may have been tried while marked unhealthy
                        if isinstance(delta, ToolCallDelta):
                            calling = True
                        else:
                            said += delta
                            tokens += delta.tokens
                        yield delta
                self.router.mark_healthy(i)
                return
            except LLMError as e:
                if not is_replica_failure(e):
                    raise
                failed = True
                errors.append(str(e))
                log.warning("LLM replica failed (%s); %d tokens said", e, tokens)
                if calling:
                    raise LLMError(f"the LLM replica failed in the middle of a tool call: {e}") from e
            finally:
                self.router.release(i, failed)
            if tokens >= g.max_tokens:
                return  # the reply had all its tokens; only the end of its stream was lost

    async def next_token_probabilities(self, text: str, k: int = TOP_TOKENS) -> dict[str, float]:
        """On the least-loaded healthy replica; on another if that one fails."""
        self._start_prober()
        tried: list[int] = []
        errors: list[str] = []
        while (i := self.router.pick(tried)) is not None:
            tried.append(i)
            self.router.acquire(i)
            failed = False
            try:
                top = await self.clients[i].next_token_probabilities(text, k)
                self.router.mark_healthy(i)
                return top
            except LLMError as e:
                if not is_replica_failure(e):
                    raise
                failed = True
                errors.append(str(e))
            finally:
                self.router.release(i, failed)
        raise LLMError(f"no LLM replica could serve the request; tried {len(tried)}: " + "; ".join(errors))

    def _start_prober(self) -> None:
        """Start the health prober on the running loop (the pool may be built before there is one)."""
        loop = asyncio.get_running_loop()
        if self._prober is None or self._prober.done() or self._prober.get_loop() is not loop:
            self._prober = loop.create_task(self._probe_forever(), name="llm-pool-prober")

    async def _probe_forever(self) -> None:
        while True:
            await asyncio.sleep(self.probe_interval_s)
            try:
                await self.probe()
            except Exception:  # a probe must never end the prober
                log.exception("LLM replica probe failed")

    async def probe(self) -> None:
        """Probe the unhealthy replicas once; those that answer 200 serve again."""
        down = self.router.unhealthy()
        answers = await asyncio.gather(*(self._is_healthy(i) for i in down))
        for i, ok in zip(down, answers, strict=True):
            if ok:
                log.warning("LLM replica %s is healthy again", self.clients[i].base_url)
                self.router.mark_healthy(i)

    async def _is_healthy(self, i: int) -> bool:
        # vLLM serves /health beside /v1, not under it.
        url = self.clients[i].base_url.removesuffix("/v1") + "/health"
        try:
            return (await self._health.get(url)).status_code == 200
        except httpx.HTTPError:
            return False

    async def close(self) -> None:
        if self._prober is not None:
            self._prober.cancel()
            with contextlib.suppress(asyncio.CancelledError, RuntimeError):
                await self._prober
            self._prober = None
        for c in self.clients:
            await c.close()
        await self._health.aclose()
