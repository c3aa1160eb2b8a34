"""The embedded backend: vLLM's AsyncLLM in this process.

The engine core runs in a child process that vLLM spawns, so programs that use
this backend need an ``if __name__ == "__main__":`` guard. The chat template is
applied here with the model's own tokenizer and the token ids are handed to the
engine; prefix caching is on, so each turn only prefills what is new.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from llm.base import Delta, GenerationConfig, LLMError, fit_to_context


def _configure_environment(cache_dir: Path) -> None:
    # Keep vLLM's files in a folder of ours rather than ~/.cache and /tmp.
    cache_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_CACHE_ROOT", str(cache_dir / "vllm"))
    os.environ.setdefault("VLLM_RPC_BASE_PATH", str(cache_dir / "rpc"))
    (cache_dir / "rpc").mkdir(exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


class VLLMEngine:
    """One engine shared by every session of the process."""

    def __init__(
        self,
        model_dir: Path,
        cache_dir: Path,
        generation: GenerationConfig | None = None,
        enforce_eager: bool = True,
        max_model_len: int = 2048,
    ) -> None:
        _configure_environment(cache_dir)
        from vllm import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self.name = f"vllm:{model_dir.name}"
        self.generation = generation or GenerationConfig()
        args = AsyncEngineArgs(
            model=str(model_dir),
            tokenizer=str(model_dir),
            dtype="float16" if cuda_available() else "bfloat16",
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
        self.engine = AsyncLLM.from_engine_args(args)
        self.tokenizer = self.engine.get_tokenizer()

    def _encode(self, messages: list[dict[str, str]]) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        # The template already holds the special tokens.
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The chat prompt, with the oldest turns dropped if it would not fit."""
        budget = self.max_model_len - self.generation.max_tokens
        return self._encode(fit_to_context(messages, lambda m: len(self._encode(m)), budget))

    async def stream(self, messages: list[dict[str, str]], request_id: str | None = None) -> AsyncIterator[Delta]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        g = self.generation
        params = SamplingParams(
            max_tokens=g.max_tokens,
            temperature=g.temperature,
            top_p=g.top_p,
            repetition_penalty=g.repetition_penalty,
            seed=g.seed,
            output_kind=RequestOutputKind.DELTA,
        )
        rid = request_id or uuid.uuid4().hex
        finished = False
        tokens = 0  # generated since the last delta given out
        try:
            async for out in self.engine.generate(
                TokensPrompt(prompt_token_ids=self.prompt_ids(messages)), params, rid
            ):
                text = out.outputs[0].text if out.outputs else ""
                tokens += len(out.outputs[0].token_ids) if out.outputs else 0
                if text or (out.finished and tokens):  # the last tokens may hold no text (EOS)
                    yield Delta(text, tokens)
                    tokens = 0
                finished = out.finished
        except Exception as e:  # the engine died or refused the request
            if type(e).__name__ in {"EngineDeadError", "EngineGenerateError"} or isinstance(e, ValueError):
                raise LLMError(f"vLLM: {type(e).__name__}: {e}") from e
            raise
        finally:
            if not finished:
                # Cancelled or closed early: take the request out of the scheduler now.
                await self.engine.abort(rid)

    async def close(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.shutdown()
            # Let vLLM's __del__ run now, while the modules it calls still exist.
            del engine
            import gc

            gc.collect()
