"""What the engines are loaded with on this machine: the LLM's dtype and whether the two
Whisper passes take turns (pure choices from what the machine has; no model is loaded)."""

from __future__ import annotations

import pytest

import llm.vllm_engine as vllm_engine
from voice.shell import engines as engines_module
from voice.shell.engines import EngineConfig


@pytest.mark.parametrize(
    ("cuda", "avx512_bf16", "amx", "dtype"),
    [
        (True, False, False, "float16"),
        (False, True, False, "bfloat16"),
        (False, False, True, "bfloat16"),
        (False, False, False, "float32"),  # AVX2 only: vLLM would emulate bf16
    ],
)
def test_llm_dtype_follows_the_hardware(monkeypatch, cuda, avx512_bf16, amx, dtype):
    import torch

    monkeypatch.setattr(vllm_engine, "cuda_available", lambda: cuda)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    assert vllm_engine.default_dtype() == dtype


@pytest.mark.parametrize(
    ("cores", "device", "turns"), [(2, "cpu", True), (1, "cpu", True), (4, "cpu", False), (2, "cuda", False)]
)
def test_asr_passes_take_turns_on_a_small_cpu(monkeypatch, cores, device, turns):
    monkeypatch.setattr(engines_module.os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert EngineConfig().asr_passes_take_turns(device) is turns


@pytest.mark.parametrize("forced", [True, False])
def test_asr_passes_taking_turns_can_be_forced(monkeypatch, forced):
    monkeypatch.setattr(engines_module.os, "sched_getaffinity", lambda pid: {0, 1})
    assert EngineConfig(asr_take_turns=forced).asr_passes_take_turns("cpu") is forced
