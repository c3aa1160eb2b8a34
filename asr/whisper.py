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

Languages. Whisper base is multilingual: ``language="auto"`` detects each
call's language from the window already encoded (one decoder step, 10-40 ms
here) and transcribes in it. On the recordings of ``tests/fixtures/languages``
(es, fr, de, pt, ja, zh) and the English ones it named all 19 right (p >= 0.80,
0.93 or more but for one English sentence). tiny.en, the partial model, hears
English only.
"""

from __future__ import annotations

import functools
import math
import re
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.language import among, is_auto

# Text given as what came before, where it sets the script Whisper writes in: without it Whisper
# writes Mandarin in traditional characters as often as in simplified ones (one of the two
# AISHELL recordings: CER 0.54 against the simplified transcript).
_PREVIOUS_TEXT = {"zh": " 以下是普通话的句子。"}


def known_language(code: str) -> bool:
    """Whether ``code`` is ``"auto"`` or a language Whisper transcribes."""
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    if is_auto(code):  # auto:en,es,fr: among those, each one Whisper's
        return all(c in _LANGUAGE_CODES for c in among(code))
    return code in _LANGUAGE_CODES


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
        """``pad_s``: silence encoded after the audio (None: the full 30 s window, as faster-whisper
        does). ``language``: what every call is transcribed as, unless it says otherwise;
        ``"auto"``: each call detects its own (a multilingual model only)."""
        from faster_whisper import WhisperModel

        self.device, self.compute_type = pick_device(device)
        self.name = model_dir.name
        self.pad_s = pad_s
        self.model = WhisperModel(
            str(model_dir), device=self.device, compute_type=self.compute_type, cpu_threads=cpu_threads
        )
        self.multilingual = bool(self.model.model.is_multilingual)
        if language is not None and is_auto(language) and not self.multilingual:
            raise ValueError(f"Whisper {self.name} is English-only: it cannot detect a language")
        self.language = language
        self._tokenizers: dict[str, Any] = {}
        # CTranslate2 runs one call at a time per model replica; calls from
        # several sessions queue here rather than oversubscribe the cores.
        self._lock = threading.Lock()

    def _tokenizer_for(self, language: str) -> Any:
        """faster-whisper's tokenizer for ``language``, with its prompt and suppressed tokens."""
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        if language not in self._tokenizers:
            tokenizer = Tokenizer(self.model.hf_tokenizer, self.multilingual, task="transcribe", language=language)
            before = _PREVIOUS_TEXT.get(language)
            context = [tokenizer.sot_prev, *tokenizer.encode(before)] if before else []
            tokenizer.prompt = [*context, *tokenizer.sot_sequence, tokenizer.no_timestamps]
            tokenizer.suppress = get_suppressed_tokens(tokenizer, [-1])
            self._tokenizers[language] = tokenizer
        return self._tokenizers[language]

    def transcribe(self, audio: np.ndarray, beam_size: int = 1, language: str | None = None) -> str:
        """Text of 16 kHz float32 ``audio`` (empty when it holds no words); ``language`` as for ``recognize``."""
        return self.recognize(audio, beam_size, language=language).text

    def recognize(
        self,
        audio: np.ndarray,
        beam_size: int = 1,
        full_window: bool = False,
        language: str | None = None,
        among: frozenset[str] | None = None,
        prompt: str | None = None,
    ) -> Transcript:
        """Text of 16 kHz float32 ``audio``, with how sure Whisper is that it held speech, and
        the language it was transcribed as.

        What Whisper itself would discard is dropped: repetition loops
        (compression ratio above 2.4) and likely silence (no-speech probability
        above 0.6 with a low log-probability). The decode is capped at a
        plausible number of tokens for the audio's length, so a hallucination
        on noise stops early instead of running for seconds. ``full_window``
        encodes Whisper's whole 30 s window whatever ``pad_s`` says.
        ``language``: this call's (None: the recognizer's), ``"auto"`` to detect it. The
        detection is Whisper's own, on the window already encoded: one decoder step; ``among``:
        the languages it may detect (None: any), the likeliest of them is taken (a Mexican
        speaker's 4 s sentence was Catalan to Whisper base, and read by the English voice).
        ``prompt``: the text said before the audio, which Whisper reads as the conversation so far
        (the question the person answers: "Under what name?" makes "Rossi." a name, not "Brassy").
        """
        chosen = (language or self.language) if self.multilingual else "en"  # English-only: it hears English
        language = None if is_auto(chosen) else chosen  # None: detect
        if audio.size == 0:
            return Transcript("", 1.0, language or "en")
        duration = audio.size / 16000
        max_new_tokens = min(440, round(12 + MAX_TOKENS_PER_S * duration))
        window = functools.partial(
            self._decode_window, audio, duration, beam_size, max_new_tokens, language, among, prompt
        )
        with self._lock:
            if full_window and duration <= 30.0:
                pieces = [window(full=True)]
            elif self.pad_s is not None and duration + self.pad_s <= 30.0:
                pieces = [window()]
                if _loops(pieces[0].text):  # a short window can make Whisper say it again: decode the full one
                    pieces = [window(full=True)]
            else:
                pieces = self._decode_sliding(audio, beam_size, language, among)
        detected, probability = pieces[0].language, pieces[0].language_probability
        kept = [p for p in pieces if not _discard(p.text, p.no_speech_prob, p.avg_logprob)]
        if not kept:
            return Transcript("", 1.0, detected, probability)
        text = _without_restart(" ".join(p.text for p in kept).strip())
        return Transcript(text, max(p.no_speech_prob for p in kept), detected, probability)

    def _decode_window(
        self,
        audio: np.ndarray,
        duration: float,
        beam_size: int,
        max_new_tokens: int,
        language: str | None,
        among: frozenset[str] | None,
        prompt: str | None = None,
        full: bool = False,
    ) -> _Piece:
        """One window: the audio, then ``pad_s`` of silence (or up to 30 s)."""
        frames = 3000 if full or self.pad_s is None else min(3000, math.ceil(duration + self.pad_s) * 100)
        features = self.model.feature_extractor(audio, chunk_length=30)[:, :-1]
        if features.shape[1] >= frames:
            features = features[:, :frames]
        else:
            features = np.pad(features, ((0, 0), (0, frames - features.shape[1])))
        encoded = self.model.encode(features)
        probability = None
        if language is None:
            language, probability = _likeliest(
                [(t[2:-2], p) for t, p in self.model.model.detect_language(encoded)[0]], among
            )
        tokenizer = self._tokenizer_for(language)
        before = _prompt_tokens(tokenizer, prompt)
        (result,) = self.model.model.generate(
            encoded,
            [before],
            beam_size=beam_size,
            max_length=len(before) + max_new_tokens,
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=tokenizer.suppress,
        )
        tokens = [t for t in result.sequences_ids[0] if t < tokenizer.eot]
        avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1)  # as faster-whisper scores a segment
        return _Piece(tokenizer.decode(tokens).strip(), result.no_speech_prob, avg_logprob, language, probability)

    def _decode_sliding(
        self, audio: np.ndarray, beam_size: int, language: str | None, among: frozenset[str] | None
    ) -> list[_Piece]:
        detected: tuple[str, float] | None = None
        if language is None and among is not None:  # over 30 s: detected first, among those allowed
            detected = _likeliest(self.model.detect_language(audio)[2], among)
            language = detected[0]
        segments, info = self.model.transcribe(
            audio,
            language=language,
            beam_size=beam_size,
            temperature=0.0,  # no fallback: one decode per call (see the notes)
            condition_on_previous_text=False,
            without_timestamps=False,  # timestamps let a window end mid-audio and the next one go on from there
            vad_filter=False,  # our VAD already cut the utterance
        )
        probability = detected[1] if detected else None if language else info.language_probability
        pieces = [_Piece(s.text.strip(), s.no_speech_prob, s.avg_logprob, info.language, probability) for s in segments]
        return pieces or [_Piece("", 1.0, 0.0, info.language, probability)]


MAX_TOKENS_PER_S = 8  # fast English speech is about 5 tokens a second
MAX_PROMPT_TOKENS = 64  # of the text before: the question's last words are what an answer follows


def _prompt_tokens(tokenizer: Any, prompt: str | None) -> list[int]:
    """The decoder's prompt: ``prompt`` as the text before (its last tokens), else the language's own."""
    if not prompt or not prompt.strip():
        return tokenizer.prompt
    before = tokenizer.encode(" " + " ".join(prompt.split()))[-MAX_PROMPT_TOKENS:]
    return [tokenizer.sot_prev, *before, *tokenizer.sot_sequence, tokenizer.no_timestamps]


@dataclass(frozen=True)
class Transcript:
    text: str
    no_speech_prob: float  # Whisper's belief that the audio held no speech (highest over the segments)
    language: str = "en"  # what it was transcribed as
    # How sure Whisper was of the language it detected (None: it was given the language).
    language_probability: float | None = None


@dataclass(frozen=True)
class _Piece:
    """One decoded window, before what Whisper would discard is dropped."""

    text: str
    no_speech_prob: float
    avg_logprob: float
    language: str
    language_probability: float | None


def _likeliest(ranked: list[tuple[str, float]], among: frozenset[str] | None) -> tuple[str, float]:
    """The likeliest language of Whisper's ranking (code, probability, likeliest first) that is ``among``
    those allowed (None: any; none of them ranked: the likeliest of all)."""
    return next((r for r in ranked if among is None or r[0] in among), ranked[0])


def _loops(text: str, n: int = 3, same: int = 4) -> bool:
    """Whether ``text`` says a run of ``n`` or more words twice in a row, or one word ``same`` times
    in a row, or is nothing but a word or a few said again (people almost never do). Given a short
    answer alone, the short window wrote "At eight." as "Arate Arate" (once, "Arate Arate Arate
    Arate Arate Ar") and "Six." as "6 6"; the full window reads "at 8" and "6"."""
    words = re.findall(r"[a-z0-9']+", text.lower())
    if any(len(set(words[i : i + same])) == 1 for i in range(len(words) - same + 1)):
        return True
    for size in range(1, min(n, len(words) // 2) + 1):
        if len(words) % size == 0 and words == words[:size] * (len(words) // size):
            return True
    for size in range(n, len(words) // 2 + 1):
        for i in range(len(words) - 2 * size + 1):
            if words[i : i + size] == words[i + size : i + 2 * size]:
                return True
    return False


def _without_restart(text: str, n: int = 3) -> str:
    """``text`` without a tail that starts it over: Whisper, given speech that began over the
    reply, said a sentence and then began it again until its token cap ("God bless them. I hope
    I'll go on seeing them forever. God bless them. I hope I'll", issue 44). A tail of ``n``
    words or more that repeats the text's own beginning, word for word to its end, is cut."""
    spans = [(m.start(), m.group()) for m in re.finditer(r"[a-z0-9']+", text.lower())]
    words = [w for _, w in spans]
    for k in range(n, len(words) - n + 1):
        tail = words[k:]
        if tail == words[: len(tail)]:
            return text[: spans[k][0]].rstrip()
    return text


def _discard(text: str, no_speech_prob: float, avg_logprob: float) -> bool:
    if not text:
        return True
    raw = text.encode("utf-8")
    if len(raw) / len(zlib.compress(raw)) > 2.4:  # a repetition loop
        return True
    return no_speech_prob > 0.6 and avg_logprob < -1.0
