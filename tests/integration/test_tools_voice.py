"""Tools in the voice loop on the real engines: requests spoken by piper, heard by Silero and
Whisper, answered by the tool-capable model (Qwen2.5-Coder-0.5B) with the built-in tools or a
tools file, spoken by piper. On virtual time, except where a barge-in must land while the
model is still writing its call."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from core.events import BargeIn, ToolCallEnd, ToolCallStart, TtsChunk
from core.tool_calls import ToolCallDelta
from shell.config import SessionConfig
from shell.tools import Tools, load_tools, tool
from tests.integration.conftest import run_replay

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="session")]

CONFIG = SessionConfig(speculate=False)


def spoken(run) -> str:
    return " ".join(e.text for e in run.of(TtsChunk))


async def test_a_spoken_request_for_the_time_calls_the_tool_once_and_the_answer_uses_it(with_qwen, say):
    run = await run_replay(with_qwen, say("What time is it right now?"), config=CONFIG, tools=load_tools(["builtin"]))
    assert not run.errors
    (call,) = run.of(ToolCallStart)
    (result,) = run.of(ToolCallEnd)
    assert (call.name, result.status) == ("get_current_time", "ok")
    hour, minute = re.search(r"(\d\d):(\d\d)", result.result).groups()
    answer = spoken(run)
    assert answer and (minute in answer or str(int(hour) % 12 or 12) in answer), (result.result, answer)
    assert "{" not in answer and "tool_call" not in answer
    roles = [t["role"] for t in run.transcript]
    assert roles == ["user", "tool", "assistant"]


def slow_tool(cancel: bool, seconds: float) -> tuple[Tools, list[int]]:
    """The tool, and the numbers (0 for the first) of its runs that finished: the reply to the
    interruption may call it again, and that run is not the one under test."""
    started: list[int] = []
    finished: list[int] = []

    @tool(timeout_s=60, cancel_on_barge_in=cancel)
    async def get_current_time() -> str:
        """The current time."""
        import asyncio

        run = len(started)
        started.append(run)
        await asyncio.sleep(seconds)
        finished.append(run)
        return "It is 10:15 in the morning."

    tools = Tools()
    tools.add(get_current_time)
    return tools, finished


INTERRUPTION = "Stop. Never mind, tell me a joke instead."


@pytest.mark.parametrize("cancel", [True, False], ids=["cancelled", "kept"])
async def test_a_barge_in_while_a_slow_tool_runs_follows_its_policy(with_qwen, say, cancel):
    # Virtual time runs no faster than real time while a tool runs, and slower while the engines
    # work on the interruption: the tool must outlast a few real seconds of them.
    tools, finished = slow_tool(cancel, seconds=30.0 if cancel else 12.0)
    audio = say("What time is it right now?", 1.5, INTERRUPTION)
    run = await run_replay(with_qwen, audio, config=dataclasses.replace(CONFIG, filler=None), tools=tools)
    cut = run.of(BargeIn)[0]  # the person over the first reply (the session's end may cut a later one)
    assert cut.reason == "words", [e.to_json() for e in run.events]
    # The reply that was cut made one call (the reply to the joke may call the tool again).
    (call,) = [c for c in run.of(ToolCallStart) if c.response == cut.response]
    (result,) = [r for r in run.of(ToolCallEnd) if r.call_id == call.call_id]
    assert (call.name, result.status) == ("get_current_time", "cancelled" if cancel else "ok")
    assert result.t >= cut.t  # it was running when the person spoke
    assert (0 in finished) == (not cancel)
    tool_turns = [t for t in run.transcript if t["role"] == "tool" and t["tool"]["call_id"] == call.call_id]
    assert [t["tool"]["status"] for t in tool_turns] == [result.status]  # kept, cut or not
    assert "joke" in run.user_text().lower()


class Paced:
    """The real model, its pieces handed on ``gap_s`` apart: a call takes long enough to write
    that speech can come over it on real time whatever the machine's speed."""

    def __init__(self, llm, gap_s: float) -> None:
        self.llm, self.gap_s, self.name = llm, gap_s, llm.name
        self.calls_started = 0

    async def stream(self, messages, request_id, tools=None) -> AsyncIterator:
        import asyncio

        pieces = self.llm.stream(messages, request_id, tools=tools)
        try:
            async for piece in pieces:
                if isinstance(piece, ToolCallDelta):
                    self.calls_started += 1
                await asyncio.sleep(self.gap_s)
                yield piece
        finally:
            await pieces.aclose()  # the request is aborted in the engine, as the session's own would be

    async def next_token_probabilities(self, text, k=20):
        return await self.llm.next_token_probabilities(text, k)

    async def close(self) -> None:
        pass


async def test_a_barge_in_while_a_call_streams_leaves_it_unrun_and_the_history_valid(with_qwen, say):
    paced = Paced(with_qwen.llm, gap_s=1.0)
    engines = dataclasses.replace(with_qwen, llm=paced)
    audio = say("Set a timer for ten minutes.", 1.2, INTERRUPTION)
    run = await run_replay(engines, audio, fast=False, config=CONFIG, tools=load_tools(["builtin"]))
    cut = run.of(BargeIn)[0]
    assert cut.reason == "words" and paced.calls_started  # the model had begun a call when it was cut
    # The reply that was cut ran none (the answer to "never mind" may make one up: refused, its own).
    assert [c for c in run.of(ToolCallStart) if c.response == cut.response] == []
    assert [c for c in run.of(ToolCallEnd) if c.response == cut.response] == []
    assert all(t["role"] != "tool" or t["response"] != cut.response for t in run.transcript)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def qwen_server(with_qwen):
    """The WebSocket server with the model that calls tools (no tools of its own: the client's)."""
    from transport.ws_server import ServerConfig, VoiceServer

    server = VoiceServer(with_qwen, ServerConfig(port=0))
    await server.start()
    yield server
    await server.close()


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather forecast for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


async def test_the_openai_sdk_runs_a_client_side_tool_over_realtime(qwen_server):
    import asyncio
    import base64
    import json

    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key="unused", websocket_base_url=f"ws://127.0.0.1:{qwen_server.port}/v1")
    events = []
    async with client.realtime.connect(model="voice-pipeline") as conn:
        await conn.session.update(session={"type": "realtime", "tools": [WEATHER], "tool_choice": "auto"})

        async def microphone() -> None:  # a quiet room, in real time: the session's clock runs on it
            quiet = base64.b64encode(bytes(960)).decode()
            while True:
                await conn.input_audio_buffer.append(audio=quiet)
                await asyncio.sleep(0.02)

        mic = asyncio.create_task(microphone())
        try:
            await conn.conversation.item.create(
                item={
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "What is the weather like in Paris today?"}],
                }
            )
            await conn.response.create()
            async with asyncio.timeout(120):
                async for event in conn:
                    events.append(event)
                    if event.type == "response.function_call_arguments.done":
                        assert event.name == "get_weather" and json.loads(event.arguments)["city"] == "Paris"
                        await conn.conversation.item.create(
                            item={
                                "type": "function_call_output",
                                "call_id": event.call_id,
                                "output": json.dumps({"forecast": "sunny", "temperature_c": 21}),
                            }
                        )
                        await conn.response.create()
                    elif event.type == "response.done" and len([e for e in events if e.type == "response.done"]) == 2:
                        break
        finally:
            mic.cancel()
            await asyncio.gather(mic, return_exceptions=True)
    kinds = [e.type for e in events]
    assert "error" not in kinds, [e for e in events if e.type == "error"]
    first, second = [e for e in events if e.type == "response.done"]
    assert [o.type for o in first.response.output] == ["message", "function_call"]
    assert first.response.status == "completed" and second.response.status == "completed"
    said = second.response.output[0].content[0].transcript
    assert "sunny" in said.lower() or "21" in said, said
    audio = [e for e in events if e.type == "response.output_audio.delta" and e.response_id == second.response.id]
    assert audio  # the answer that used the result was spoken
