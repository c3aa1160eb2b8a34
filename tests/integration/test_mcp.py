"""Tools from MCP servers: a real server written with the official SDK
(tests/fixtures/mcp/shop_server.py), run as a subprocess over stdio and over streamable HTTP.

First the connection on its own (seconds): listing, checking, cancelling, a server killed or
hung. Then in the voice loop on the real engines: requests spoken by piper, heard by Silero and
Whisper, answered by Qwen2.5-Coder-0.5B calling the server's tools, on virtual time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
import time
from pathlib import Path

import pytest

from core.events import BargeIn, ToolCallEnd, ToolCallStart, TtsChunk
from core.tool_calls import ToolCall
from shell.config import SessionConfig
from shell.mcp import McpServers, McpStartError, connection, parse_mcp
from shell.mcp.connection import McpConnection
from shell.tools import Tools, load_tools
from tests.integration.conftest import run_replay
from voice.bench.mcp_latency import SERVER, free_port, http_server

pytestmark = pytest.mark.asyncio(loop_scope="session")


class Shop:
    """The shop server's control folder: what it is told to do, and what it did."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def delay(self, seconds: float | None) -> None:
        path = self.folder / "delay"
        path.write_text(str(seconds)) if seconds is not None else path.unlink(missing_ok=True)

    def hang(self, on: bool) -> None:
        path = self.folder / "hang"
        path.write_text("") if on else path.unlink(missing_ok=True)

    def log(self) -> list[str]:
        path = self.folder / "log"
        return path.read_text().splitlines() if path.exists() else []

    def pid(self) -> int:
        return int([line for line in self.log() if line.startswith("pid ")][-1].split()[1])

    async def wait_for(self, line: str, timeout_s: float = 10.0) -> None:
        for _ in range(int(timeout_s / 0.05)):
            if line in self.log():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"the server never logged {line!r}: {self.log()}")


@pytest.fixture
def shop(tmp_path) -> Shop:
    return Shop(tmp_path)


def stdio(shop: Shop, options: str = "") -> str:
    return f"{options} {sys.executable} {SERVER} --control {shop.folder}".strip()


async def call(tools: Tools, name: str, arguments: str):
    checked = tools.check(ToolCall(0, "call_0", name, arguments))
    if isinstance(checked, str):
        return checked
    return await checked[0].run(checked[1], None)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_servers_tools_are_offered_checked_and_called(shop, transport):
    tools = load_tools(["builtin"])
    if transport == "stdio":
        specs = parse_mcp(stdio(shop))
        http = None
    else:
        http = http_server(free_port())
        url = http.__enter__()
        specs = parse_mcp(f"header='Authorization: Bearer shop-token' {url}")
    try:
        async with McpServers(specs, tools) as servers:
            assert tools.servers() == dict.fromkeys(["get_order_status", "get_store_hours", "add_gift_wrap"], "shop")
            where = specs[0].where
            line = servers.summary()[0]
            assert (
                line.startswith("tools: calculate, end_conversation, get_current_time")
                and f"(mcp shop: {where})" in line
            )
            params = tools["get_order_status"].spec()["function"]["parameters"]
            assert params == {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            }
            result = await call(tools, "get_order_status", '{"order_id": "4512"}')
            assert (result.status, result.content) == (
                "ok",
                "Order 4512 was shipped on Monday and arrives tomorrow before noon.",
            )
            hours = await call(tools, "get_store_hours", "{}")  # structured content, said as one line
            assert hours.content == '{"day": "today", "opens": "9 am", "closes": "6 pm"}'
            refused = await call(tools, "get_order_status", '{"order": 4512}')
            assert (
                refused
                == "the arguments do not fit the tool's parameters (arguments: 'order_id' is a required property)"
            )
            # A new tool, announced by the server, is offered to the sessions watching.
            told = []

            class Session:
                def changed(self) -> None:
                    told.append(sorted(tools.servers()))

            session = Session()
            tools.watch(session.changed)
            await call(tools, "add_gift_wrap", "{}")
            for _ in range(100):
                if "gift_wrap" in tools:
                    break
                await asyncio.sleep(0.05)
            assert told and "gift_wrap" in told[-1]
            assert (
                await call(tools, "gift_wrap", '{"order_id": "1007"}')
            ).content == "Order 1007 will be gift wrapped."
    finally:
        if http is not None:
            http.__exit__(None, None, None)
    if transport == "stdio":
        assert "started get_order_status" in shop.log() and shop.log().count("started get_order_status") == 1


async def test_a_server_that_cannot_start_or_refuses_us_is_one_line():
    with pytest.raises(McpStartError, match=r"^--mcp .*/no_such_server.py: cannot start: .*No such file"):
        await McpServers(parse_mcp(f"{sys.executable} /no_such_server.py"), Tools()).start()
    with http_server(free_port()) as url, pytest.raises(McpStartError, match=r"cannot start: .*HTTP 401 Unauthorized"):
        await McpServers(parse_mcp(url), Tools()).start()  # no token


async def test_a_cancelled_call_is_cancelled_on_the_server(shop):
    async with McpServers(parse_mcp(stdio(shop)), Tools()) as servers:
        shop.delay(30)
        running = asyncio.ensure_future(call(servers.tools, "get_order_status", '{"order_id": "4512"}'))
        await shop.wait_for("started get_order_status")
        running.cancel()
        await shop.wait_for("cancelled get_order_status")


async def test_a_server_killed_mid_call_fails_the_call_and_is_restarted_for_the_next(shop):
    async with McpServers(parse_mcp(stdio(shop)), Tools()) as servers:
        shop.delay(30)
        running = asyncio.ensure_future(call(servers.tools, "get_order_status", '{"order_id": "4512"}'))
        await shop.wait_for("started get_order_status")
        first = shop.pid()
        os.kill(first, 9)
        result = await running
        assert result.status == "error" and "stopped during the call; it is being restarted" in result.content
        shop.delay(None)
        again = await call(servers.tools, "get_order_status", '{"order_id": "4512"}')  # waits for the restart
        assert again.status == "ok" and shop.pid() != first


@pytest.mark.parametrize("noticed_by", ["its change stream", "the heartbeat"])
async def test_a_stdio_server_that_exits_between_calls_is_started_again_before_the_next(shop, monkeypatch, noticed_by):
    if noticed_by == "the heartbeat":  # as for a server that streams no changes (older, or without listChanged)
        monkeypatch.setattr(McpConnection, "_listen", lambda self, client: asyncio.Event().wait())
        monkeypatch.setattr(connection, "HEARTBEAT_S", 0.2)
    async with McpServers(parse_mcp(stdio(shop)), Tools()) as servers:
        first = shop.pid()
        os.kill(first, 9)
        for _ in range(200):
            if shop.pid() != first and servers.connections[0].state == "up":
                break
            await asyncio.sleep(0.05)
        assert shop.pid() != first and servers.connections[0].restarts == 1
        assert (await call(servers.tools, "get_order_status", '{"order_id": "4512"}')).status == "ok"


async def test_a_hung_server_times_out_and_is_restarted(shop):
    async with McpServers(parse_mcp(stdio(shop, "timeout=1")), Tools()) as servers:
        shop.hang(True)
        start = time.monotonic()
        result = await call(servers.tools, "get_order_status", '{"order_id": "4512"}')
        assert result.status == "timeout" and time.monotonic() - start < 3
        first = shop.pid()
        shop.hang(False)
        for _ in range(200):  # it does not answer a listing either: started anew
            if shop.pid() != first and servers.connections[0].state == "up":
                break
            await asyncio.sleep(0.05)
        assert (await call(servers.tools, "get_order_status", '{"order_id": "4512"}')).status == "ok"


# -- in the voice loop -------------------------------------------------------

CONFIG = SessionConfig(speculate=False)
ORDER = "Where is my order? The number is 4512."


def spoken(run, response: int | None = None) -> str:
    return " ".join(e.text for e in run.of(TtsChunk) if response is None or e.response == response)


@pytest.mark.engines
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_spoken_request_calls_the_servers_tool_and_the_answer_carries_its_result(
    with_qwen, say, shop, transport
):
    with http_server(free_port()) as url:
        text = stdio(shop) if transport == "stdio" else f"header='Authorization: Bearer shop-token' {url}"
        async with McpServers(parse_mcp(text), Tools()) as servers:
            run = await run_replay(with_qwen, say(ORDER), config=CONFIG, tools=servers.tools)
    assert not run.errors
    (start,) = run.of(ToolCallStart)
    (end,) = run.of(ToolCallEnd)
    assert (start.name, start.server, end.status, end.server) == ("get_order_status", "shop", "ok", "shop")
    assert "4512" in start.arguments
    assert "tomorrow" in spoken(run).lower(), spoken(run)
    (stored,) = [t for t in run.transcript if t["role"] == "tool"]
    assert stored["tool"]["server"] == "shop" and "tomorrow" in stored["text"]


INTERRUPTION = "Stop. Never mind, tell me a joke instead."


@pytest.mark.engines
@pytest.mark.parametrize("policy", ["cancel", "keep"])
async def test_a_barge_in_during_a_slow_call_cancels_it_on_the_server_or_keeps_it(with_qwen, say, shop, policy):
    shop.delay(30 if policy == "cancel" else 12)  # outlasts the interruption's real seconds of engine work
    audio = say(ORDER, 1.5, INTERRUPTION)
    config = dataclasses.replace(CONFIG, filler=None)
    async with McpServers(parse_mcp(stdio(shop, f"timeout=60 on_barge_in={policy}")), Tools()) as servers:
        run = await run_replay(with_qwen, audio, config=config, tools=servers.tools)
    cut = run.of(BargeIn)[0]
    (start,) = [c for c in run.of(ToolCallStart) if c.response == cut.response]
    (end,) = [r for r in run.of(ToolCallEnd) if r.call_id == start.call_id]
    assert end.status == ("cancelled" if policy == "cancel" else "ok") and end.t >= cut.t
    log = shop.log()  # (the reply to the interruption may call it again: that run is not the one under test)
    if policy == "cancel":
        assert log[log.index("started get_order_status") + 1] == "cancelled get_order_status", log
    else:
        assert "finished get_order_status 4512" in log and "cancelled get_order_status" not in log, log
    kept = [t for t in run.transcript if t["role"] == "tool" and t["tool"]["call_id"] == start.call_id]
    assert [t["tool"]["status"] for t in kept] == [end.status]


@pytest.mark.engines
async def test_a_server_killed_mid_call_is_apologised_for_and_the_next_call_works(with_qwen, say, shop):
    shop.delay(6)
    async with McpServers(parse_mcp(stdio(shop)), Tools()) as servers:
        killer = asyncio.ensure_future(_kill_when_called(shop))
        try:
            run = await run_replay(with_qwen, say(ORDER), config=CONFIG, tools=servers.tools)
        finally:
            killer.cancel()
        # The next call (the next conversation's: a 0.5B model told of the failure repeats it
        # rather than ask again) reaches the restarted server.
        after = await run_replay(with_qwen, say("Where is my order? The number is 1007."), config=CONFIG,
                                 tools=servers.tools)  # fmt: skip
    (failed,) = run.of(ToolCallEnd)
    assert failed.status == "error" and "stopped during the call; it is being restarted" in failed.result
    apology = spoken(run)
    assert apology and "Monday" not in apology  # something was said, and no status made up
    (ok,) = after.of(ToolCallEnd)
    assert ok.status == "ok" and "order" in ok.result.lower() and spoken(after)  # (Whisper may hear "107")


async def _kill_when_called(shop: Shop) -> None:
    await shop.wait_for("started get_order_status", timeout_s=120)
    shop.delay(None)  # the restarted server answers at once
    os.kill(shop.pid(), 9)


@pytest.mark.engines
async def test_a_hung_server_times_out_without_stalling_the_reply(with_qwen, say, shop):
    shop.hang(True)
    async with McpServers(parse_mcp(stdio(shop, "timeout=2")), Tools()) as servers:
        run = await run_replay(with_qwen, say(ORDER), config=CONFIG, tools=servers.tools)
        shop.hang(False)
    (end,) = run.of(ToolCallEnd)
    assert end.status == "timeout" and end.duration_s >= 1.5
    said = [e for e in run.of(TtsChunk) if e.response == end.response]
    assert said and said[-1].t > end.t  # the reply went on after the timeout, in words


async def test_an_http_server_that_goes_away_is_retried_until_it_is_back():
    port = free_port()
    with http_server(port) as url:
        servers = McpServers(parse_mcp(f"header='Authorization: Bearer shop-token' {url}"), Tools())
        await servers.start()
    try:
        gone = await call(servers.tools, "get_order_status", '{"order_id": "4512"}')
        assert gone.status == "error" and "shop" in gone.content, gone
        with http_server(port):  # back, on the same address
            for _ in range(200):
                if servers.connections[0].state == "up":
                    break
                await asyncio.sleep(0.05)
            again = await call(servers.tools, "get_order_status", '{"order_id": "4512"}')
        assert again.status == "ok" and servers.connections[0].restarts >= 1
    finally:
        await servers.close()


@pytest.mark.engines
async def test_a_ws_client_is_answered_from_the_servers_tool_and_told_which_server(with_qwen, say, shop):
    """A served session, in real time: our /ws protocol's tool events carry the server's name."""
    from transport.client import talk
    from transport.ws_server import ServerConfig, VoiceServer

    async with McpServers(parse_mcp(stdio(shop)), Tools()) as servers:
        server = VoiceServer(with_qwen, ServerConfig(port=0, tools=servers.tools))
        await server.start()
        try:
            result = await talk(f"ws://127.0.0.1:{server.port}/ws", say(ORDER))
        finally:
            await server.close()
    (start,) = result.of("tool_call")
    (end,) = result.of("tool_result")
    assert (start["name"], start["server"], end["status"], end["server"]) == ("get_order_status", "shop", "ok", "shop")
    assert "tomorrow" in " ".join(e["text"] for e in result.of("assistant_text")).lower()
