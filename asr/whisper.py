"""faster-whisper behind a small blocking interface.

One :class:`WhisperRecognizer` per model, shared by every session; calls are
blocking and made from worker threads. ``device="auto"`` picks CUDA with
float16 where a GPU exists and the CPU with int8 otherwise.

Short windows. faster-whisper pads every call to Whisper's 30 s window, and
on a CPU the encoder pass over those 30 s is most of a call's cost (base,
2 cores: 670 ms of ~900 ms) whatever the utterance's length. An utterance is
a few seconds, so :meth:`WhisperRecognizer.recognize` encodes only the audio
plus ``pad_s`` of silence (CTranslate2 accepts fewer than 3000 frames) and
decodes greedily from that: about 4x faster here, with the same words on the
shared recordings (python -m voice.bench asr). Less than ~3 s of padding makes
Whisper hallucinate on short clips, so the padding stays; and where the
short window still makes it repeat itself (seen on speech cut off
mid-word), that call is decoded again over the full window. Audio longer
than ``30 - pad_s`` goes through faster-whisper's own 30 s sliding windows.
"""

from __future__ import annotations

import math
import re
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def pick_device(device: str) -> tuple[str, str]:
    if device != "auto":
        return device, "float16" if device == "cuda" else "int8"
    try:
        import ctranslate2

        if ctranslate2.get_cuda_device_count() > 0:
            return "cuda", "float16"
    except Exception:  # no CUDA runtime at all
        pass
    return "cpu", "int8"


class WhisperRecognizer:
    def __init__(
        self,
        model_dir: Path,
        device: str = "auto",
        cpu_threads: int = 2,
        language: str = "en",
        pad_s: float | None = 3.0,
    ) -> None:
        """``pad_s``: silence encoded after the audio (None: the full 30 s window, as faster-whisper does)."""
        from faster_whisper import WhisperModel
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        self.device, self.compute_type = pick_device(device)
        self.name = model_dir.name
        self.language = language
        self.pad_s = pad_s
        self.model = WhisperModel(
            str(model_dir), device=self.device, compute_type=self.compute_type, cpu_threads=cpu_threads
        )
        self._tokenizer = Tokenizer(
            self.model.hf_tokenizer, self.model.model.is_multilingual, task="transcribe", language=language
        )
        self._prompt = [*self._tokenizer.sot_sequence, self._tokenizer.no_timestamps]
        self._suppress = get_suppressed_tokens(self._tokenizer, [-1])
        # CTranslate2 runs one call at a time per model replica; calls from
        # several sessions queue here rather than oversubscribe the cores.
        self._lock = threading.Lock()

    def transcribe(self, audio: np.ndarray, beam_size: int = 1) -> str:
        """Text of 16 kHz float32 ``audio`` (empty when it holds no words)."""
        return self.recognize(audio, beam_size).text

    def recognize(self, audio: np.ndarray, beam_size: int = 1, full_window: bool = False) -> Transcript:
        """Text of 16 kHz float32 ``audio``, with how sure Whisper is that it held speech.

        What Whisper itself would discard is dropped: repetition loops
        (compression ratio above 2.4) and likely silence (no-speech probability
        above 0.6 with a low log-probability). The decode is capped at a
        plausible number of tokens for the audio's length, so a hallucination
        on noise stops early instead of running for seconds. ``full_window``
        encodes Whisper's whole 30 s window whatever ``pad_s`` says.
        """
        if audio.size == 0:
            return Transcript("", 1.0)
        duration = audio.size / 16000
        max_new_tokens = min(440, round(12 + MAX_TOKENS_PER_S * duration))
        with self._lock:
            if full_window and duration <= 30.0:
                pieces = [self._decode_window(audio, duration, beam_size, max_new_tokens, full=True)]
            elif self.pad_s is not None and duration + self.pad_s <= 30.0:
                pieces = [self._decode_window(audio, duration, beam_size, max_new_tokens)]
                if _loops(pieces[0][0]):  # a short window can make Whisper say it again: decode the full one
                    pieces = [self._decode_window(audio, duration, beam_size, max_new_tokens, full=True)]
            else:
                pieces = self._decode_sliding(audio, beam_size)
        kept = [p for p in pieces if not _discard(*p)]
        if not kept:
            return Transcript("", 1.0)
        return Transcript(" ".join(p[0] for p in kept).strip(), max(p[1] for p in kept))

    def _decode_window(
        self, audio: np.ndarray, duration: float, beam_size: int, max_new_tokens: int, full: bool = False
    ) -> tuple[str, float, float]:
        """(text, no_speech_prob, avg_logprob) of one window: the audio, then ``pad_s`` of silence (or up to 30 s)."""
        frames = 3000 if full or self.pad_s is None else min(3000, math.ceil(duration + self.pad_s) * 100)
        features = self.model.feature_extractor(audio, chunk_length=30)[:, :-1]
        if features.shape[1] >= frames:
            features = features[:, :frames]
        else:
            features = np.pad(features, ((0, 0), (0, frames - features.shape[1])))
        encoded = self.model.encode(features)
        (result,) = self.model.model.generate(
            encoded,
            [self._prompt],
            beam_size=beam_size,
            max_length=len(self._prompt) + max_new_tokens,
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=self._suppress,
        )
        tokens = [t for t in result.sequences_ids[0] if t < self._tokenizer.eot]
        avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1)  # as faster-whisper scores a segment
        return self._tokenizer.decode(tokens).strip(), result.no_speech_prob, avg_logprob

    def _decode_sliding(self, audio: np.ndarray, beam_size: int) -> list[tuple[str, float, float]]:
        segments, _ = self.model.transcribe(
            audio,
            language=self.language,
            beam_size=beam_size,
            temperature=0.0,  # no fallback: one decode per call (see the notes)
            condition_on_previous_text=False,
            without_timestamps=False,  # timestamps let a window end mid-audio and the next one go on from there
            vad_filter=False,  # our VAD already cut the utterance
        )
        return [(s.text.strip(), s.no_speech_prob, s.avg_logprob) for s in segments]


MAX_TOKENS_PER_S = 8  # fast English speech is about 5 tokens a second


@dataclass(frozen=True)
class Transcript:
    text: str
    no_speech_prob: float  # Whisper's belief that the audio held no speech (highest over the segments)


def _loops(text: str, n: int = 3) -> bool:
    """Whether ``text`` says a run of ``n`` or more words twice in a row (people almost never do)."""
    words = re.findall(r"[a-z0-9']+", text.lower())
    for size in range(n, len(words) // 2 + 1):
        for i in range(len(words) - 2 * size + 1):
            if words[i : i + size] == words[i + size : i + 2 * size]:
                return True
    return False


def _discard(text: str, no_speech_prob: float, avg_logprob: float) -> bool:
    if not text:
        return True
    raw = text.encode("utf-8")
    if len(raw) / len(zlib.compress(raw)) > 2.4:  # a repetition loop
        return True
    return no_speech_prob > 0.6 and avg_logprob < -1.0
