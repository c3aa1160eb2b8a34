"""The embedded LLM's dtype, chosen from what the machine has (no model is loaded)."""

from __future__ import annotations

import platform

import pytest

import llm.vllm_engine as vllm_engine


@pytest.mark.parametrize(
    ("cuda", "machine", "avx512", "dtype"),
    [
        (True, "x86_64", False, "float16"),
        (False, "x86_64", True, "bfloat16"),
        (False, "x86_64", False, "float32"),  # AVX2 only: vLLM would emulate bf16
        (False, "aarch64", False, "bfloat16"),  # no AVX-512 to ask about: as before
    ],
)
def test_llm_dtype_follows_the_hardware(monkeypatch, cuda, machine, avx512, dtype):
    import torch

    monkeypatch.setattr(vllm_engine, "cuda_available", lambda: cuda)
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: avx512)
    monkeypatch.setattr(platform, "machine", lambda: machine)
    assert vllm_engine.default_dtype() == dtype
