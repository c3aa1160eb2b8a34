"""Tool calls out of the real tool-capable model (Qwen2.5-Coder-0.5B-Instruct), on both LLM
backends: the embedded engine reads them out of the text with vLLM's llama3_json parser, a
vLLM server started with that parser streams them as ``delta.tool_calls``. Either way they
reach the pipeline as pieces, are pieced together by ``ToolCallStream``, and checked against
the registered tools before anything runs."""

from __future__ import annotations

import dataclasses
import json

import pytest

from core.tool_calls import ToolCall, ToolCallDelta, ToolCallStream
from llm.base import GenerationConfig
from llm.openai_http import OpenAIChatClient
from shell.models import TOOL_PARSERS, llm_model_path
from shell.tools import load_tools
from voice.bench.vllm_server import launch_vllm_server, stop_server

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="session")]

MODEL = "qwen2.5-coder-0.5b"
SYSTEM = {"role": "system", "content": "You are a helpful voice assistant. Answer in one or two short sentences."}
TOOLS = load_tools(["builtin"])


def ask(text: str) -> list[dict[str, str]]:
    return [SYSTEM, {"role": "user", "content": text}]


@pytest.fixture(scope="module")
def qwen_server(tmp_path_factory):
    try:
        url, proc = launch_vllm_server(
            llm_model_path(MODEL),
            tmp_path_factory.mktemp("vllm-qwen-server"),
            extra_args=["--enable-auto-tool-choice", "--tool-call-parser", TOOL_PARSERS[MODEL]],
        )
    except RuntimeError as e:
        pytest.fail(str(e))
    yield url
    stop_server(proc)


async def reply(llm, messages) -> tuple[str, list[ToolCall], int]:
    """The reply's text, its calls (released only when whole) and how many pieces they came in."""
    text, calls, pieces = "", [], 0
    stream = ToolCallStream()
    async for piece in llm.stream(messages, None, tools=TOOLS.specs()):
        if isinstance(piece, ToolCallDelta):
            pieces += 1
            calls += stream.feed(piece)
        else:
            text += piece
    return text, calls + stream.finish(), pieces


async def test_a_request_that_needs_the_time_is_one_call_and_no_spoken_json(qwen):
    text, calls, _ = await reply(qwen, ask("What time is it?"))
    (call,) = calls
    assert call.name == "get_current_time"
    assert "{" not in text and "get_current_time" not in text  # the call's text is never spoken
    t, args = TOOLS.check(call)
    assert t.name == "get_current_time" and args == {}


async def test_the_arguments_come_whole_and_fit_the_schema(qwen):
    _, calls, pieces = await reply(qwen, ask("Set a timer for ten minutes."))
    (call,) = calls
    checked = TOOLS.check(call)
    assert not isinstance(checked, str), checked
    t, args = checked
    assert t.name == "set_timer" and args["minutes"] * 60 + args["seconds"] == 600
    assert pieces >= 2  # streamed in pieces, released once


async def test_a_request_that_needs_no_tool_calls_none(qwen):
    # (Not a joke: asked for one, the 0.5B model calls get_current_time; docs/bench/bench_tools.json.)
    text, calls, _ = await reply(qwen, ask("Who wrote Romeo and Juliet?"))
    assert calls == [] and len(text.split()) >= 5


async def test_the_server_streams_the_same_call_as_delta_tool_calls(qwen, qwen_server):
    client = OpenAIChatClient(qwen_server, generation=GenerationConfig(max_tokens=64))
    try:
        _, calls, pieces = await reply(client, ask("Set a timer for ten minutes."))
    finally:
        await client.close()
    _, embedded, _ = await reply(qwen, ask("Set a timer for ten minutes."))
    assert [c.name for c in calls] == [c.name for c in embedded] == ["set_timer"] and pieces >= 2
    # vLLM 0.32's server does not always send what its llama3_json parser held back of the last
    # call (once ', "label": ""}'): arguments that do not parse are refused, never repaired and run.
    (call,) = calls
    try:
        json.loads(call.arguments)
    except ValueError:
        assert isinstance(TOOLS.check(call), str), call
    else:
        checked = TOOLS.check(call)
        assert not isinstance(checked, str), checked
        assert checked[1]["minutes"] * 60 + checked[1]["seconds"] == 600


async def test_a_call_cut_off_by_max_tokens_is_never_passed_off_as_whole(qwen):
    short = dataclasses.replace(qwen.generation, max_tokens=8)
    qwen.generation, full = short, qwen.generation
    try:
        _, calls, _ = await reply(qwen, ask("Set a timer for ten minutes."))
    finally:
        qwen.generation = full
    (call,) = calls
    assert call.name == "set_timer" and isinstance(TOOLS.check(call), str), call
