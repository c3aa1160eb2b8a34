"""What the LLM pool's tests read of a vLLM server (the server and the proxy are voice/bench/vllm_server.py)."""

from __future__ import annotations

import asyncio
import re
import time

import httpx


def metric(url: str, name: str) -> float:
    """A Prometheus metric of the server, summed over its labels."""
    text = httpx.get(f"{url}/metrics", timeout=5, trust_env=False).text
    values = [float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)]
    return sum(values)


async def no_request_running(url: str, timeout_s: float = 5.0) -> bool:
    """Wait until the server runs no request (an aborted one may take a moment); True if so."""
    deadline = time.monotonic() + timeout_s
    while metric(url, "vllm:num_requests_running") > 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return metric(url, "vllm:num_requests_running") == 0


async def read_then_close(stream, n: int) -> None:
    """Read ``n`` deltas of a reply, then close its stream (what a barge-in does)."""
    got = 0
    async for _ in stream:
        got += 1
        if got == n:
            break
    await stream.aclose()
