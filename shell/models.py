"""Where the provisioned models live, and a clear error when one is missing.

``scripts/setup`` fills the models folder from PyPI packages; at run time the
pipeline only reads from it, so it never reaches a model hub.
"""

from __future__ import annotations

import os
from pathlib import Path

from tts.kokoro_tts import MODEL_FILE as KOKORO_MODEL_FILE

ROOT = Path(__file__).resolve().parents[1]
SETUP_COMMAND = "scripts/setup"

ASR_MODELS = {"base": "whisper-base", "tiny.en": "whisper-tiny.en"}
VOICES = {"joe": "piper/en_US-joe-medium.onnx"}
KOKORO_DIR = "kokoro"  # Kokoro-82M, its vocabulary and its voices (tts/kokoro_tts.py)
LLM_MODELS = {
    "smollm2-135m": "smollm2-135m-instruct",
    # Can call tools (SmolLM2's chat template drops them): issue 16.
    "qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b-instruct",
    # Not provisioned by scripts/setup (1.1 GB, 4.5 tok/s on 2 cores): OPTIONAL_MODELS says how.
    "qwen2.5-coder-1.5b": "qwen2.5-coder-1.5b-instruct",
}
OPTIONAL_MODELS = {
    "qwen2.5-coder-1.5b": (
        ".venv/bin/python scripts/provision_models.py --models-dir models --with qwen2.5-coder-1.5b"
    ),
}
# vLLM's tool parser for each model that can call tools: Qwen2.5-Coder writes a bare JSON
# object, not its template's <tool_call> tags (../shared/notes/llm.md).
TOOL_PARSERS = {"qwen2.5-coder-0.5b": "llama3_json", "qwen2.5-coder-1.5b": "llama3_json"}
# The embedded model when none is named, chosen by what it says (docs/bench/answers.md): on 33
# spoken requests Qwen2.5-Coder-0.5B was judged right on 90% of the turns and SmolLM2-135M on 66%,
# for 1.13x SmolLM2's first word in real time. SmolLM2 is the fastest: the pipeline's own tests
# run on it, since they check what is heard and when, not what is said.
DEFAULT_LLM = "qwen2.5-coder-0.5b"
FASTEST_LLM = "smollm2-135m"
VAD_FILE = "silero_vad.onnx"
SMART_TURN_FILE = "smart-turn/smart-turn-v3.2-cpu.onnx"  # int8, as it ships in Pipecat's wheel
# What the pipeline runs: the same weights in float32, made from it at set-up, because the int8
# kernels answer differently on CPUs without VNNI (asr.smart_turn.float32_model).
SMART_TURN_FLOAT_FILE = "smart-turn/smart-turn-v3.2-float32.onnx"


class MissingModelError(RuntimeError):
    """A model the pipeline needs is not in the models folder."""


def models_dir() -> Path:
    return Path(os.environ.get("VOICE_MODELS_DIR", ROOT / "models"))


def _resolve(name: str, table: dict[str, str], what: str) -> Path:
    path = models_dir() / table[name] if name in table else Path(name).expanduser()
    if not path.exists():
        known = ", ".join(table)
        how = OPTIONAL_MODELS.get(name, SETUP_COMMAND)
        raise MissingModelError(
            f"{what} '{name}' not found at {path} (known names: {known}); run {how} to provision it"
        )
    return path


def asr_model_path(name: str) -> Path:
    path = _resolve(name, ASR_MODELS, "ASR model")
    if path.is_dir() and not (path / "tokenizer.json").exists():
        # Without it faster-whisper would try to fetch the tokenizer from the hub.
        raise MissingModelError(f"ASR model at {path} has no tokenizer.json; run {SETUP_COMMAND}")
    return path


def voice_path(name: str) -> Path:
    return _resolve(name, VOICES, "voice")


def kokoro_dir() -> Path:
    """The Kokoro model's folder (its model, vocabulary and voices)."""
    path = models_dir() / KOKORO_DIR
    if not (path / KOKORO_MODEL_FILE).exists():
        raise MissingModelError(f"the Kokoro voice model is not in {path}; run {SETUP_COMMAND} to provision it")
    return path


def llm_model_path(name: str) -> Path:
    return _resolve(name, LLM_MODELS, "LLM model")


def vad_model_path() -> Path:
    return _resolve(VAD_FILE, {VAD_FILE: VAD_FILE}, "VAD model")


def smart_turn_model_path(int8: bool = False) -> Path:
    """The float32 end-of-turn model the pipeline runs, or (``int8``) the quantized one it was made from."""
    name = SMART_TURN_FILE if int8 else SMART_TURN_FLOAT_FILE
    return _resolve(name, {name: name}, "end-of-turn model")
