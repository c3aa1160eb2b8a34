"""piper behind a blocking, cancellable interface.

One :class:`PiperTTS` per voice, shared by every session. ``synthesize``
yields one :class:`SpeechPiece` per sentence that piper makes of the text,
already resampled to the output rate, with the end sample of each word. It
checks the cancel flag before each sentence (piper's ONNX call itself cannot
be interrupted), so a cancelled chunk stops within one sentence of work.

Memory: ONNX Runtime's CPU arena keeps the peak of the longest sentence ever
spoken (516 MB of RSS after one 12.5 s sentence, +104 MB over a second
conversation of the same length), so on the CPU the voice runs on one
process-wide arena that keeps a first 64 MiB region and gives back what a call
grew beyond it when the call ends (measured in ``python -m voice.bench tts_memory``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soxr

from core.ledger import Word
from core.sentences import speakable
from tts.alignment import word_ends


@dataclass(frozen=True)
class SpeechPiece:
    text: str  # the words this piece speaks
    audio: np.ndarray  # float32 mono at the output rate
    words: list[Word]


# The arena's first region: a typical sentence fits in it, so most calls
# allocate nothing new from the system and free nothing.
ARENA_FIRST_REGION_BYTES = 64 * 1024 * 1024
_arena_lock = threading.Lock()
_arena_registered = False


def _shared_cpu_arena() -> None:
    """Register, once per process, the CPU arena that the voice's sessions use."""
    global _arena_registered
    import onnxruntime

    with _arena_lock:
        if _arena_registered:
            return
        info = onnxruntime.OrtMemoryInfo("Cpu", onnxruntime.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                         onnxruntime.OrtMemType.DEFAULT)  # fmt: skip
        # Regions double (kNextPowerOfTwo, 0): growing by what is asked (1)
        # kept 40 MB less but made every call 12-15% slower, short ones too.
        config = onnxruntime.OrtArenaCfg(
            {"max_mem": 0, "arena_extend_strategy": 0, "initial_chunk_size_bytes": ARENA_FIRST_REGION_BYTES}
        )
        onnxruntime.create_and_register_allocator(info, config)
        _arena_registered = True


def _load_voice(voice_path: Path, use_cuda: bool):  # -> piper.PiperVoice
    """piper's ``PiperVoice.load`` with the session options it does not expose.

    The provisioned model already has the alignment output (see
    scripts/provision_models.py), so the file is loaded as is.
    """
    import json

    import onnxruntime
    from piper import PiperVoice
    from piper.config import PiperConfig

    options = onnxruntime.SessionOptions()
    if use_cuda:
        providers: list = [("CUDAExecutionProvider", {"cudnn_conv_algo_search": "HEURISTIC"})]
    else:
        providers = ["CPUExecutionProvider"]
        _shared_cpu_arena()
        options.add_session_config_entry("session.use_env_allocators", "1")
        # Memory patterns plan one block per input shape seen; every sentence
        # is a new shape, so they only add to what is kept.
        options.enable_mem_pattern = False
    config = json.loads(Path(f"{voice_path}.json").read_text(encoding="utf-8"))
    session = onnxruntime.InferenceSession(str(voice_path), sess_options=options, providers=providers)
    return PiperVoice(config=PiperConfig.from_dict(config), session=session)


def onnx_cuda() -> bool:
    """Whether ONNX Runtime here can run on CUDA (the voices use it when it can)."""
    try:
        import onnxruntime

        return "CUDAExecutionProvider" in onnxruntime.get_available_providers()
    except ImportError:
        return False


def peak_normalized(audio: np.ndarray) -> np.ndarray:
    """``audio`` with its peak at 0.9: every voice speaks at the same level (silence as it is)."""
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    return audio / peak * 0.9 if peak > 1e-8 else audio


class PiperTTS:
    def __init__(
        self,
        voice_path: Path,
        output_rate: int,
        use_cuda: bool | None = None,
        noise_w_scale: float | None = 0.0,
        length_scale: float | None = None,
    ) -> None:
        """``noise_w_scale=0`` fixes phoneme durations: the same text always
        takes the same number of samples, so replays on virtual time repeat
        exactly (the waveform's own noise still varies, inaudibly). ``None``
        keeps the voice's random durations. ``length_scale``: slower above 1
        (None: the voice's own pace)."""
        import onnxruntime
        from piper.config import SynthesisConfig

        self.use_cuda = onnx_cuda() if use_cuda is None else use_cuda
        self.voice = _load_voice(voice_path, self.use_cuda)
        self._run_options = onnxruntime.RunOptions()
        if not self.use_cuda:
            # Give back, at the end of each call, the arena regions it grew.
            self._run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self.name = voice_path.stem
        self.voice_rate = self.voice.config.sample_rate
        self.output_rate = output_rate
        self._syn_config = SynthesisConfig(noise_w_scale=noise_w_scale, length_scale=length_scale)
        # Virtual-time replays also take the generator's noise out, so the audio
        # (and so the echo the microphone hears) is the same on every run.
        self._exact_config = SynthesisConfig(noise_w_scale=0.0, noise_scale=0.0, length_scale=length_scale)

    def synthesize(
        self, text: str, cancel: threading.Event | None = None, exact: bool = False
    ) -> Iterator[SpeechPiece]:
        """Speech for ``text``, sentence by sentence; ``exact`` makes it bit-for-bit repeatable."""
        config = self._exact_config if exact else self._syn_config
        words = speakable(text).split()
        sentences = self.voice.phonemize(text)
        # Share the text's words out over piper's sentences by phonetic word count.
        counts = [max(1, sum(1 for p in "".join(s).split(" ") if p.strip())) for s in sentences if s]
        taken = 0
        for i, phonemes in enumerate(s for s in sentences if s):
            if cancel is not None and cancel.is_set():
                return
            last = i == len(counts) - 1
            mine = words[taken:] if last else words[taken : taken + counts[i]]
            taken += len(mine)
            ids = self.voice.phonemes_to_ids(phonemes)
            audio, id_samples = self._run(ids, config)
            audio = peak_normalized(audio)
            ph_samples = self._phoneme_samples(phonemes, ids, id_samples)
            if self.output_rate != self.voice_rate:
                ratio = self.output_rate / self.voice_rate
                audio = soxr.resample(audio, self.voice_rate, self.output_rate).astype(np.float32)
                ph_samples = [round(n * ratio) for n in ph_samples] if ph_samples else []
            aligned = word_ends(mine, ["^", *phonemes, "$"] if ph_samples else [], ph_samples, len(audio))
            yield SpeechPiece(" ".join(mine), audio, aligned)

    def _run(self, ids: list[int], config) -> tuple[np.ndarray, np.ndarray | None]:
        """Audio and samples per phoneme id: piper's ``phoneme_ids_to_audio``, run with our options."""
        voice = self.voice.config
        scales = [
            voice.noise_scale if config.noise_scale is None else config.noise_scale,
            voice.length_scale if config.length_scale is None else config.length_scale,
            voice.noise_w_scale if config.noise_w_scale is None else config.noise_w_scale,
        ]
        inputs = {
            "input": np.array([ids], dtype=np.int64),
            "input_lengths": np.array([len(ids)], dtype=np.int64),
            "scales": np.array(scales, dtype=np.float32),
        }
        if voice.num_speakers > 1:
            speaker = voice.default_speaker_id if config.speaker_id is None else config.speaker_id
            inputs["sid"] = np.array([speaker], dtype=np.int64)
        outputs = self.voice.session.run(None, inputs, self._run_options)
        audio = np.asarray(outputs[0], dtype=np.float32).reshape(-1)
        if len(outputs) == 1:
            return audio, None
        return audio, (outputs[1].squeeze() * voice.hop_length).astype(np.int64)

    def _phoneme_samples(self, phonemes: list[str], ids: list[int], id_samples: np.ndarray | None) -> list[int]:
        """Samples per phoneme (BOS and EOS included), from samples per phoneme id."""
        if id_samples is None or len(id_samples) != len(ids):
            return []
        id_map = self.voice.config.phoneme_id_map
        pad = len(id_map.get("_", []))
        out: list[int] = []
        k = 0
        for ph in ["^", *phonemes, "$"]:
            n = len(id_map.get(ph, [])) + (pad if ph != "$" else 0)
            out.append(int(np.sum(id_samples[k : k + n])))
            k += n
        return out
