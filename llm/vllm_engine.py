"""The embedded backend: vLLM's AsyncLLM in this process.

The engine core runs in a child process that vLLM spawns, so programs that use
this backend need an ``if __name__ == "__main__":`` guard. The chat template is
applied here with the model's own tokenizer and the token ids are handed to the
engine; prefix caching is on, so each turn only prefills what is new.

Ctrl+C: a terminal sends SIGINT to every process of its foreground group,
vLLM's included. Its engine core and model worker handle SIGINT only once their
start is under way; before that, while they import vLLM and torch (seconds),
it is a KeyboardInterrupt in each, with its traceback, and the engine core logs
its worker's death as a failed start with another: a hundred lines. So they
start with SIGINT blocked (the mask is inherited through spawn), and Ctrl+C
reaches only this process, which owns them: it shuts them down once they run
(``close``: vLLM's shutdown, by SIGTERM), or kills them while they still start
(``kill_starting_engines``), since vLLM has no way to abort a start (its engine
core only takes note of a signal until the model is loaded).

Killed (``kill -9``, or SIGTERM while the engines load, before its handlers are
set), this process runs no code at all, and vLLM's engine core and worker ran
on without it (the engine core does not watch its parent). The entry points
start a watchdog first (shell/reaper.py), which ends them when this process is
gone: SIGTERM, then SIGKILL 1 s later (an engine core still loading only takes
note of the SIGTERM; docs/bench/orphans.md).
"""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing
import os
import platform
import signal
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing, contextmanager, suppress
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

from core.tool_calls import ToolCallDelta
from llm.base import TOP_TOKENS, Delta, GenerationConfig, LLMError
from llm.context import fit_to_context
from llm.engine_files import configure_environment
from llm.tool_call_reader import ToolCallReader

# VLLMEngine constructors in progress, in any thread: their engine processes are still starting.
_starting = 0
_starting_lock = threading.Lock()


def _start_resource_tracker() -> None:
    """Python's resource tracker, started before vLLM's processes (which use it) start.

    Started here because starting it unblocks SIGINT in the thread that does
    (Python 3.11). And with its exit warnings off: engine processes killed while
    starting leave it their shared memory and semaphores, which it frees as
    this process exits, each with a warning meant for a leak.
    """
    before = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [before, "ignore:resource_tracker:UserWarning"]))
    try:
        resource_tracker.ensure_running()
    finally:
        if before is None:
            del os.environ["PYTHONWARNINGS"]
        else:
            os.environ["PYTHONWARNINGS"] = before


@contextmanager
def _starting_without_sigint() -> Iterator[None]:
    """Block SIGINT in this thread, and so in the processes it starts, while the engine starts."""
    global _starting
    with _starting_lock:
        _starting += 1
    _start_resource_tracker()
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        with _starting_lock:
            _starting -= 1


def kill_starting_engines() -> None:
    """Kill the processes of engines still starting (in another thread), their children too.

    For a start given up on (Ctrl+C): the thread that starts the engine then
    fails, in a moment, with vLLM's "Engine core initialization failed". An
    engine already started is left alone: ``close`` shuts it down in order.
    """
    with _starting_lock:
        if not _starting:
            return
        for engine_core in multiprocessing.active_children():
            if engine_core.name.startswith("EngineCore") and engine_core.pid is not None:
                _kill_tree(engine_core.pid)


def _kill_tree(pid: int) -> None:
    import psutil  # a dependency of vLLM

    gone = (psutil.NoSuchProcess, psutil.AccessDenied)
    # Stopped first, top down: a stopped process starts no more children and
    # prints nothing (the engine core would log its worker's death as an error).
    stopped, todo = [], [pid]
    while todo:
        with suppress(*gone):
            proc = psutil.Process(todo.pop())
            proc.suspend()
            stopped.append(proc)
            todo.extend(child.pid for child in proc.children())

    for proc in stopped:
        with suppress(*gone):
            proc.kill()


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def default_dtype() -> str:
    """The weights' dtype for this machine: float16 on CUDA; on the CPU bfloat16, except on
    one without AVX-512, where float32.

    There vLLM's bf16 linears cannot use oneDNN ("Failed to create oneDNN linear, fallback to
    torch linear") and bf16 is emulated: on an AVX2-only AMD EPYC a 50-token prefill took
    1.3 s in bfloat16 and 0.3 s in float32 (decode 75 against 100 ms a token), so a first
    sentence comes sooner in float32."""
    if cuda_available():
        return "float16"
    try:
        import torch

        avx512 = torch.cpu._is_avx512_supported()
    except (ImportError, AttributeError):
        return "bfloat16"  # as before this check: what vLLM's CPU build is tuned for
    return "float32" if platform.machine() in ("x86_64", "AMD64") and not avx512 else "bfloat16"


class VLLMEngine:
    """One engine shared by every session of the process."""

    def __init__(
        self,
        model_dir: Path,
        cache_dir: Path,
        generation: GenerationConfig | None = None,
        enforce_eager: bool = True,
        max_model_len: int = 2048,
        tool_parser: str | None = None,
        constrain_calls: bool = True,
        dtype: str | None = None,
    ) -> None:
        """``tool_parser``: the name of vLLM's tool parser that reads this model's calls out of
        its text (None: the model is not asked to call tools). ``dtype``: the weights' dtype
        (None: ``default_dtype()``). ``constrain_calls``: once the
        model begins a call as that parser reads it, decoding is held to the offered tools'
        names and argument schemas (vLLM's structured outputs, a structural tag)."""
        configure_environment(cache_dir)
        from vllm import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self.name = f"vllm:{model_dir.name}"
        self.generation = generation or GenerationConfig()
        args = AsyncEngineArgs(
            model=str(model_dir),
            tokenizer=str(model_dir),
            dtype=dtype or default_dtype(),
            max_model_len=max_model_len,
            enable_prefix_caching=True,
            # On the CPU torch.compile costs 80-130 s at every start for a 30%
            # faster decode; eager is the default there (see the README).
            enforce_eager=enforce_eager,
            disable_log_stats=True,
            gpu_memory_utilization=0.3,
            seed=0,
        )
        self.max_model_len = max_model_len
        with _starting_without_sigint():
            self.engine = AsyncLLM.from_engine_args(args)
        self.tokenizer = self.engine.get_tokenizer()
        self.tool_parser = tool_parser
        self.constrain_calls = constrain_calls and tool_parser in CALL_OPENINGS
        self._tool_parser_class = None
        if tool_parser is not None:
            from vllm.tool_parsers import ToolParserManager

            self._tool_parser_class = ToolParserManager.get_tool_parser(tool_parser)
            self._tool_parser_class(self.tokenizer)  # one that cannot work with this tokenizer says so now
        # The chat template and the tokenizer run off the event loop, where every
        # session's audio runs: a long prompt takes a while to tokenize. One
        # thread: a tokenizer is not to be used by two threads at once.
        self._tokenizing = ThreadPoolExecutor(1, thread_name_prefix="tokenize")
        # Prompt tokens of the requests so far, and how many of them the prefix cache held
        # (counters: a benchmark or a metric reads the difference; llm/context.py says why).
        self.prompt_tokens = 0
        self.cached_prompt_tokens = 0
        # Where a conversation too long for the context may be cut (llm/context.py; None: every
        # half of the budget; 1: the oldest message dropped one at a time, as before issue 32).
        self.context_step: int | None = None

    def _grammar(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None):
        """What decoding is held to (None: nothing): offered tools, a call of one of them;
        asked with results and no tools, plain words (asked so, the 0.5B model wrote its call
        and the result again as JSON: '{"name": "calculate", ...}\n{"response": "84"}'; held
        to words it said "The answer is 84.")."""
        if not self.constrain_calls:
            return None
        if tools:
            return self._call_grammar(tools)
        if any(m.get("role") == "tool" for m in messages):
            from vllm.sampling_params import StructuredOutputsParams

            return StructuredOutputsParams(regex=PLAIN_WORDS)
        return None

    def _call_grammar(self, tools: list[dict[str, Any]]):
        """Free text, but a call, once begun as the parser reads them, names an offered tool and
        has arguments of its schema: a 0.5B model otherwise made up tools (``start_timer``,
        ``divide``) and arguments."""
        from vllm.sampling_params import StructuredOutputsParams

        opening = CALL_OPENINGS[self.tool_parser]  # type: ignore[index]
        structures = [
            {
                "begin": f'{opening}{json.dumps(t["function"]["name"])}, "arguments": ',
                "schema": t["function"].get("parameters") or {"type": "object"},
                "end": "}",
            }
            for t in tools
        ]
        return StructuredOutputsParams(structural_tag=json.dumps({"structures": structures, "triggers": [opening]}))

    def _encode(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> list[int]:
        messages = [_arguments_as_objects(m) for m in messages]
        text = self.tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
        # The template already holds the special tokens.
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> list[int]:
        """The chat prompt, its oldest turns dropped if it would not fit (at marks that keep the
        prefix cache: llm/context.py)."""
        budget = self.max_model_len - self.generation.max_tokens
        # The chat template over a long conversation is the costly part, on the way to the first
        # token: each candidate is encoded once, and the one that fits is the prompt (its
        # messages are the caller's own dicts, so their ids name a candidate within this call).
        encoded: dict[tuple[int, ...], list[int]] = {}

        def encode(candidate: list[dict[str, Any]]) -> list[int]:
            key = tuple(map(id, candidate))
            if key not in encoded:
                encoded[key] = self._encode(candidate, tools)
            return encoded[key]

        return encode(fit_to_context(messages, lambda m: len(encode(m)), budget, self.context_step))

    async def stream(
        self,
        messages: list[dict[str, Any]],
        request_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> AsyncIterator[Delta | ToolCallDelta]:
        """The reply's text deltas; with ``tools`` (OpenAI's function specs, given to the chat
        template), its calls too, read out of the text by the engine's tool parser as
        :class:`~core.tool_calls.ToolCallDelta` pieces (never as text)."""
        if tools and self._tool_parser_class is None:
            raise LLMError(f"{self.name} has no tool parser: it cannot be offered tools")
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        g = self.generation
        params = SamplingParams(
            max_tokens=g.max_tokens,
            temperature=g.temperature,
            top_p=g.top_p,
            repetition_penalty=g.penalty(messages, tools),
            seed=g.seed,
            output_kind=RequestOutputKind.DELTA,
            structured_outputs=self._grammar(messages, tools) if json_schema is None else _json(json_schema),
        )
        tokens = 0  # generated since the last delta given out
        loop = asyncio.get_running_loop()
        prompt = await loop.run_in_executor(self._tokenizing, self.prompt_ids, messages, tools)
        calls = None
        if tools:
            from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

            request = ChatCompletionRequest(model=self.name, messages=[], tools=tools, tool_choice="auto")
            calls = ToolCallReader(self._tool_parser_class(self.tokenizer, request.tools), request)
        # aclosing: a reply closed early at one of its yields closes the request too, at once.
        async with aclosing(self._generate(prompt, params, request_id or uuid.uuid4().hex)) as outputs:
            async for out in outputs:
                text = out.outputs[0].text if out.outputs else ""
                ids = list(out.outputs[0].token_ids) if out.outputs else []
                tokens += len(ids)
                pieces: list[Delta | ToolCallDelta] = [Delta(text, 0)] if calls is None else calls.read(text, ids)
                if out.finished and calls is not None:
                    pieces += calls.finish(truncated=bool(out.outputs) and out.outputs[0].finish_reason == "length")
                for piece in pieces:
                    if isinstance(piece, ToolCallDelta):
                        yield piece
                    elif piece:
                        yield Delta(piece, tokens)
                        tokens = 0
                if out.finished and tokens:  # the last tokens may hold no text (EOS, a call)
                    yield Delta("", tokens)
                    tokens = 0

    async def _generate(self, prompt: list[int], params, request_id: str) -> AsyncIterator:
        """The engine's outputs for one request. A request left before it finished (cancelled,
        closed early) is taken out of the scheduler at once; an engine that died or refused
        it is an LLMError."""
        from vllm.inputs import TokensPrompt

        finished = False
        first = True
        try:
            async for out in self.engine.generate(TokensPrompt(prompt_token_ids=prompt), params, request_id):
                finished = out.finished
                if first:
                    first = False
                    self.prompt_tokens += len(prompt)
                    self.cached_prompt_tokens += out.num_cached_tokens or 0
                yield out
        except Exception as e:
            if type(e).__name__ in {"EngineDeadError", "EngineGenerateError"} or isinstance(e, ValueError):
                raise LLMError(f"vLLM: {type(e).__name__}: {e}") from e
            raise
        finally:
            if not finished:
                await self.engine.abort(request_id)

    async def next_token_probabilities(self, text: str, k: int = TOP_TOKENS) -> dict[str, float]:
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=k)
        loop = asyncio.get_running_loop()
        ids = await loop.run_in_executor(
            self._tokenizing, lambda: list(self.tokenizer.encode(text, add_special_tokens=False))
        )
        out = None
        async with aclosing(self._generate(ids, params, uuid.uuid4().hex)) as outputs:
            async for last in outputs:  # one token: the last output holds it
                out = last
        if out is None or not out.outputs or not out.outputs[0].logprobs:
            raise LLMError("vLLM: no logprobs in the answer")
        probabilities: dict[str, float] = {}
        for lp in out.outputs[0].logprobs[0].values():  # the sampled token, and the top k
            token = lp.decoded_token or ""
            probabilities[token] = max(probabilities.get(token, 0.0), math.exp(lp.logprob))
        return probabilities

    async def close(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.shutdown()
            self._tokenizing.shutdown(wait=False)
            # Let vLLM's __del__ run now, while the modules it calls still exist.
            del engine
            import gc

            gc.collect()


# How a call begins in the model's text, for the parsers whose calls the grammar can hold to the
# tools: llama3_json reads bare JSON objects, {"name": ..., "arguments": ...}.
CALL_OPENINGS = {"llama3_json": '{"name": '}
# Words to be spoken: no braces, brackets, tags or quotes, so no JSON and no call.
PLAIN_WORDS = r'[A-Za-z0-9][^{}<>\[\]"]*'


def _arguments_as_objects(message: dict[str, Any]) -> dict[str, Any]:
    """A message's tool calls with their arguments as objects, not JSON text, as vLLM's server
    gives them to chat templates: Qwen's writes ``"arguments": "{}"`` for the text, and the
    model, reading its own past calls so, goes on to quote its arguments."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    fixed = []
    for call in calls:
        function = dict(call.get("function") or {})
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                function["arguments"] = json.loads(arguments or "{}")
            except json.JSONDecodeError:
                function["arguments"] = {}
        fixed.append({**call, "function": function})
    return {**message, "tool_calls": fixed}


def _json(schema: dict[str, Any]):
    """Decoding held to JSON of ``schema``, written without spaces between its tokens (the model
    otherwise spent a third of its tokens on indentation)."""
    from vllm.sampling_params import StructuredOutputsParams

    return StructuredOutputsParams(json=schema, disable_any_whitespace=True)
