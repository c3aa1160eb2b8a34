"""piper behind a blocking, cancellable interface.

One :class:`PiperTTS` per voice, shared by every session. ``synthesize``
yields one :class:`SpeechPiece` per sentence that piper makes of the text,
already resampled to the output rate, with the end sample of each word. It
checks the cancel flag before each sentence (piper's ONNX call itself cannot
be interrupted), so a cancelled chunk stops within one sentence of work.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soxr

from tts.alignment import word_ends
from voice.core.ledger import Word
from voice.core.sentences import speakable


@dataclass(frozen=True)
class SpeechPiece:
    text: str  # the words this piece speaks
    audio: np.ndarray  # float32 mono at the output rate
    words: list[Word]


def _onnx_cuda() -> bool:
    try:
        import onnxruntime

        return "CUDAExecutionProvider" in onnxruntime.get_available_providers()
    except ImportError:
        return False


class PiperTTS:
    def __init__(
        self, voice_path: Path, output_rate: int, use_cuda: bool | None = None, noise_w_scale: float | None = 0.0
    ) -> None:
        """``noise_w_scale=0`` fixes phoneme durations: the same text always
        takes the same number of samples, so replays on virtual time repeat
        exactly (the waveform's own noise still varies, inaudibly). ``None``
        keeps the voice's random durations."""
        from piper import PiperVoice
        from piper.config import SynthesisConfig

        self.use_cuda = _onnx_cuda() if use_cuda is None else use_cuda
        # The provisioned model already exposes the alignment output (see
        # scripts/provision_models.py), so no patching at load time.
        self.voice = PiperVoice.load(voice_path, use_cuda=self.use_cuda)
        self.name = voice_path.stem
        self.voice_rate = self.voice.config.sample_rate
        self.output_rate = output_rate
        self._syn_config = SynthesisConfig(noise_w_scale=noise_w_scale)
        # Virtual-time replays also take the generator's noise out, so the audio
        # (and so the echo the microphone hears) is the same on every run.
        self._exact_config = SynthesisConfig(noise_w_scale=0.0, noise_scale=0.0)

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
            result = self.voice.phoneme_ids_to_audio(ids, config, include_alignments=True)
            audio, id_samples = result if isinstance(result, tuple) else (result, None)
            audio = np.asarray(audio, dtype=np.float32).reshape(-1)
            peak = float(np.max(np.abs(audio))) if audio.size else 0.0
            if peak > 1e-8:
                audio = audio / peak * 0.9
            ph_samples = self._phoneme_samples(phonemes, ids, id_samples)
            if self.output_rate != self.voice_rate:
                ratio = self.output_rate / self.voice_rate
                audio = soxr.resample(audio, self.voice_rate, self.output_rate).astype(np.float32)
                ph_samples = [round(n * ratio) for n in ph_samples] if ph_samples else []
            aligned = word_ends(mine, ["^", *phonemes, "$"] if ph_samples else [], ph_samples, len(audio))
            yield SpeechPiece(" ".join(mine), audio, aligned)

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
