"""Both LLM backends on the real engine: the embedded AsyncLLM and a vLLM
OpenAI-compatible server in its own process, reached over HTTP."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal

import pytest
import pytest_asyncio

from core.end_of_turn import sentence_end_probability
from llm.base import LLMError
from llm.openai_http import OpenAIChatClient
from shell.models import llm_model_path
from tests.conftest import recordings
from tests.integration.servers import metric, no_request_running, read_then_close
from voice.bench.scoring import word_error_rate
from voice.bench.vllm_server import launch_vllm_server, stop_server

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="session")]

QUESTION = [{"role": "user", "content": "Tell me a long story about a dragon and a knight."}]


async def test_embedded_engine_streams_and_abort_stops_generation(engines):
    llm = engines.llm
    stream = llm.stream(QUESTION, "abort-test")
    deltas = []
    async for d in stream:
        deltas.append(d)
        if len(deltas) == 3:
            break
    await stream.aclose()
    # The request has left the engine: nothing is tracked, nothing more will come.
    assert llm.engine.output_processor.get_num_unfinished_requests() == 0
    await asyncio.sleep(0.3)
    assert llm.engine.output_processor.get_num_unfinished_requests() == 0
    # And the engine goes on serving.
    text = "".join([d async for d in llm.stream([{"role": "user", "content": "Say hello."}], "after-abort")])
    assert text.strip()


async def test_embedded_engine_uses_the_chat_template_and_history(engines):
    ids = engines.llm.prompt_ids([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    prompt = engines.llm.tokenizer.decode(ids)
    assert "<|im_start|>system\nS<|im_end|>" in prompt and prompt.endswith("<|im_start|>assistant\n")


async def _asked(llm, messages, request_id):
    """The reply's text, the prompt's tokens and how many of them the prefix cache held."""
    prompt, cached = llm.prompt_tokens, llm.cached_prompt_tokens
    text = "".join([d async for d in llm.stream(messages, request_id)])
    return text, llm.prompt_tokens - prompt, llm.cached_prompt_tokens - cached


async def test_a_conversation_past_the_context_keeps_its_prompt_cached_from_turn_to_turn(engines):
    """Cut at fixed marks (llm/context.py), the next turn's prompt starts like this one's and the
    prefix cache holds most of it; dropped one message at a time, it holds almost none."""
    llm = engines.llm
    history = [{"role": "system", "content": "You are brief."}]
    for k in range(40):
        history += [
            {"role": "user", "content": f"Question {k}: " + "tell me more about the river. " * 4},
            {"role": "assistant", "content": f"Answer {k}: " + "the river runs down to the sea. " * 8},
        ]
    assert len(llm._encode(history)) > llm.max_model_len  # longer than the context: it is cut

    def asking(k: int) -> dict[str, str]:
        return {"role": "user", "content": f"And what about bridge number {k}?"}

    try:
        for step in (None, 1):
            llm.context_step = step
            text, _, _ = await _asked(llm, [*history, asking(1)], f"context-{step}-1")
            later = [*history, asking(1), {"role": "assistant", "content": text}, asking(2)]
            _, prompt, cached = await _asked(llm, later, f"context-{step}-2")
            if step is None:
                assert cached >= 0.75 * prompt, (cached, prompt)
            else:
                assert cached <= 0.25 * prompt, (cached, prompt)
    finally:
        llm.context_step = None


# Cut inside a sentence, and whole (transcripts of the shared recordings, as the early final
# gives them, after completion_prompt).
UNFINISHED = ["Not at this particular", "In being", "God bless them, I"]
FINISHED = [
    "Not at this particular case, Tom, apologized Whittemore",
    "What time is it",
    "In being comparatively modern",
]


async def test_embedded_engine_reads_where_a_sentence_ends(engines):
    llm = engines.llm
    for text in UNFINISHED:
        assert sentence_end_probability(await llm.next_token_probabilities(text)) < 0.005, text
    for text in FINISHED:
        assert sentence_end_probability(await llm.next_token_probabilities(text)) > 0.02, text
    top = await llm.next_token_probabilities("What time is it")
    assert 1 <= len(top) <= 21 and all(0.0 < p <= 1.0 for p in top.values())
    assert llm.engine.output_processor.get_num_unfinished_requests() == 0


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """A real vLLM OpenAI-compatible server, started once for this module."""
    try:
        url, proc = launch_vllm_server(llm_model_path("smollm2-135m"), tmp_path_factory.mktemp("vllm-server"))
    except RuntimeError as e:
        pytest.fail(str(e))
    yield url, proc
    stop_server(proc)


@pytest_asyncio.fixture(loop_scope="session")
async def http_llm(vllm_server):
    client = OpenAIChatClient(vllm_server[0])
    yield client
    await client.close()


async def test_replay_through_the_server(engines, replay_run, http_llm):
    rec = next(r for r in recordings() if "aew_a0003" in r.name)
    remote = dataclasses.replace(engines, llm=http_llm)
    run = await replay_run(remote, rec.path)
    assert run.errors == []
    assert word_error_rate(rec.transcript, run.user_text()) <= 0.2
    assert [t["role"] for t in run.transcript] == ["user", "assistant"]
    assert len(run.transcript[1]["text"].split()) >= 2


async def test_the_server_reads_where_a_sentence_ends_as_the_embedded_engine(engines, http_llm):
    for text in UNFINISHED + FINISHED:
        here = sentence_end_probability(await engines.llm.next_token_probabilities(text))
        there = sentence_end_probability(await http_llm.next_token_probabilities(text))
        assert there == pytest.approx(here, abs=0.02), text  # same model and dtype, another process


async def test_closing_the_stream_frees_the_request_on_the_server(vllm_server, http_llm):
    url, _ = vllm_server
    await read_then_close(http_llm.stream(QUESTION), 3)
    assert await no_request_running(url)
    tokens = metric(url, "vllm:generation_tokens_total")
    await asyncio.sleep(0.5)
    assert metric(url, "vllm:generation_tokens_total") == tokens  # no token generated after the close


async def test_a_server_that_dies_mid_stream_is_a_clean_error(vllm_server, http_llm):
    """Runs last in this module: it kills the server."""
    _, proc = vllm_server
    got = []
    with pytest.raises(LLMError):
        async for d in http_llm.stream(QUESTION):
            got.append(d)
            if len(got) == 2:
                os.killpg(proc.pid, signal.SIGKILL)
    assert len(got) >= 2
    with pytest.raises(LLMError):  # and the next request fails fast, with the same error type
        async for _ in http_llm.stream(QUESTION):
            pass
    with pytest.raises(LLMError):
        await http_llm.next_token_probabilities("What time is it")
