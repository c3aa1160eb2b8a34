"""What an MCP server adds to a tool call: the same tool as our own function, over stdio and over
streamable HTTP (python -m voice.bench tools --part mcp).

The tool is the shop's ``get_order_status`` (tests/fixtures/mcp/shop_server.py, a server written
with the official SDK); the local tool is the same lookup as a function of ours. Each call goes
the way the pipeline's does: its arguments are checked against the tool's schema, then it runs
(``tool.run``). Calls are made one after another, ``calls`` of each kind, after ``warm`` that
are not counted; the wall clock times them.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from typing import Any

from core.tool_calls import ToolCall
from shell.mcp import McpServers, parse_mcp
from shell.tools import Tools
from voice.bench.common import ROOT

SERVER = ROOT / "tests" / "fixtures" / "mcp" / "shop_server.py"
ORDERS = {"4512": "Order 4512 was shipped on Monday and arrives tomorrow before noon."}


async def get_order_status(order_id: str) -> str:
    """The delivery status of a shop order, by its order number."""
    digits = "".join(c for c in order_id if c.isdigit())
    return ORDERS.get(digits, f"There is no order {order_id}.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_server(port: int):
    """The shop server on streamable HTTP at ``port``, until the block ends."""
    process = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:  # uvicorn waits for the clients' open streams
            process.kill()
            process.wait()


async def _times(tools: Tools, name: str, calls: int, warm: int) -> list[float]:
    call = ToolCall(0, "call_0", name, '{"order_id": "4512"}')
    out = []
    for i in range(warm + calls):
        start = time.perf_counter()
        checked = tools.check(call)
        assert not isinstance(checked, str), checked
        result = await checked[0].run(checked[1], None)
        took = time.perf_counter() - start
        assert result.status == "ok" and "4512" in result.content, result
        if i >= warm:
            out.append(took)
    return out


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


async def measure(calls: int = 200, warm: int = 20) -> dict[str, Any]:
    local = Tools()
    local.add(get_order_status, "bench")
    rows: dict[str, list[float]] = {"local": await _times(local, "get_order_status", calls, warm)}
    start = time.perf_counter()
    stdio = parse_mcp(f"name=shop {sys.executable} {SERVER}")
    async with McpServers(stdio, Tools()) as servers:
        cold_stdio = time.perf_counter() - start
        rows["mcp stdio"] = await _times(servers.tools, "get_order_status", calls, warm)
    with http_server(free_port()) as url:
        start = time.perf_counter()
        http = parse_mcp(f"name=shop header='Authorization: Bearer shop-token' {url}")
        async with McpServers(http, Tools()) as servers:
            cold_http = time.perf_counter() - start
            rows["mcp http"] = await _times(servers.tools, "get_order_status", calls, warm)
    base = _ms(rows["local"], 0.5)
    table = {
        kind: {"p50_ms": _ms(t, 0.5), "p95_ms": _ms(t, 0.95), "added_p50_ms": round(_ms(t, 0.5) - base, 3)}
        for kind, t in rows.items()
    }
    return {"calls": calls, "warm": warm, "latency": table, "connect_s": {"stdio": round(cold_stdio, 3),
            "http": round(cold_http, 3)}}  # fmt: skip


def print_table(result: dict[str, Any]) -> None:
    print(f"\nMCP calls: {result['calls']} of each, one at a time, after {result['warm']} not counted\n")
    print("| tool | p50 | p95 | added p50 |")
    print("|---|---|---|---|")
    for kind, row in result["latency"].items():
        print(f"| {kind} | {row['p50_ms']} ms | {row['p95_ms']} ms | {row['added_p50_ms']} ms |")
    c = result["connect_s"]
    print(f"\nconnecting (start-up, counted in no call): stdio {c['stdio']} s (the server started), http {c['http']} s")


if __name__ == "__main__":
    print_table(asyncio.run(measure()))
