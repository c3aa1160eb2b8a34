"""Stand-in engines, for unit tests of the shell's own logic only.

They are not the product: the integration tests run the real engines
(Silero, faster-whisper, vLLM, piper) on real recordings. These answer
instantly and predictably, so that a test of the session, the pump and the
devices is about their wiring, on virtual time, in milliseconds:

- the VAD is an energy threshold (a frame louder than -35 dBFS is speech);
- the recognizer hears a tone's pitch as scripted words;
- the LLM streams a scripted reply word by word (a reply may hold tool calls,
  streamed as the pieces they are scripted in);
- the TTS turns each word into 0.25 s of a tone, with exact word timings;
- the end-of-turn model answers scripted probabilities, in order.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from asr.whisper import Transcript
from core.audio import ASR_RATE
from core.budget import Budget
from core.ledger import Word
from core.tool_calls import ToolCallDelta
from core.words import spoken_units
from llm.base import Delta
from tts.piper_tts import SpeechPiece

OUTPUT_RATE = 24000
WORD_S = 0.25


class StandInVAD:
    def __call__(self, frame: np.ndarray) -> float:
        db = 10 * np.log10(float(np.mean(frame**2)) + 1e-12)
        return 0.95 if db > -35.0 else 0.02


class StandInRecognizer:
    """Hears a tone's pitch as words: ``{300: "what time is it"}``; silence is no words. Asked to
    detect the language (``language="auto"``), it names the one ``languages`` gives the words, as
    sure as it says (English, sure, if none); ``multilingual``: whether it may be asked to."""

    def __init__(self, words_by_hz: dict[int, str], languages: dict[str, tuple[str, float]] | None = None) -> None:
        self.words_by_hz = words_by_hz
        self.languages = languages or {}
        self.multilingual = bool(languages)
        self.calls: list[tuple[float, bool]] = []  # (audio seconds, full_window) per call
        self.languages_asked: list[str | None] = []  # each call's language
        self.prompts: list[str | None] = []  # each call's text before (the question answered)

    def recognize(
        self,
        audio: np.ndarray,
        beam_size: int = 1,
        full_window: bool = False,
        language: str | None = None,
        among: frozenset[str] | None = None,
        prompt: str | None = None,
    ) -> Transcript:
        self.calls.append((len(audio) / ASR_RATE, full_window))
        self.prompts.append(prompt)
        self.languages_asked.append(language)
        if not len(audio) or float(np.mean(audio**2)) < 1e-6:
            return Transcript("", 0.9)
        spectrum = np.abs(np.fft.rfft(audio))
        hz = float(np.argmax(spectrum)) * ASR_RATE / len(audio)
        words = self.words_by_hz[min(self.words_by_hz, key=lambda k: abs(k - hz))]
        if language == "auto":
            code, probability = self.languages.get(words, ("en", 0.99))
            return Transcript(words, 0.0, code, probability)
        return Transcript(words, 0.0, language or "en")

    def transcribe(self, audio: np.ndarray, beam_size: int = 1, language: str | None = None) -> str:
        return self.recognize(audio, language=language).text


class StandInSmartTurn:
    """Answers ``probabilities`` in order (then the last one again); an exception in the
    list is raised instead. ``calls``: the seconds of audio each call was given."""

    def __init__(self, probabilities: list[float | Exception]) -> None:
        self.probabilities = list(probabilities)
        self.calls: list[float] = []

    def probability(self, audio: np.ndarray) -> float:
        self.calls.append(len(audio) / ASR_RATE)
        p = self.probabilities.pop(0) if len(self.probabilities) > 1 else self.probabilities[0]
        if isinstance(p, Exception):
            raise p
        return p


class StandInLLM:
    name = "stand-in"

    def __init__(
        self, replies: list[str | list[str | ToolCallDelta]], next_tokens: dict[str, float] | None = None
    ) -> None:
        """``replies``, one per request: text, streamed word by word, or a list of text and
        tool-call pieces, streamed in that order."""
        self.replies = list(replies)
        self.requests: list[list[dict[str, str]]] = []
        self.tools: list[list[dict] | None] = []  # the tools offered with each request
        self.schemas: list[dict | None] = []  # the JSON schema each request was held to (an Extract)
        self.cancelled = 0
        # What follows every transcript it is asked about (default: a sentence that may end there).
        self.next_tokens = {".": 0.3, ",": 0.2} if next_tokens is None else next_tokens
        self.asked: list[str] = []

    async def next_token_probabilities(self, text: str, k: int = 20) -> dict[str, float]:
        self.asked.append(text)
        await asyncio.sleep(0)
        return dict(self.next_tokens)

    async def stream(
        self, messages: list[dict[str, str]], request_id: str, tools: list[dict] | None = None, json_schema=None
    ) -> AsyncIterator[Delta | ToolCallDelta]:
        self.requests.append(messages)
        self.tools.append(tools)
        self.schemas.append(json_schema)
        reply = self.replies.pop(0) if self.replies else "Okay."
        pieces = [reply] if isinstance(reply, str) else reply
        try:
            for piece in pieces:
                if isinstance(piece, ToolCallDelta):
                    await asyncio.sleep(0)
                    yield piece
                    continue
                for i, word in enumerate(piece.split(" ")):
                    await asyncio.sleep(0)
                    yield Delta(word if i == 0 else " " + word, 1)
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled += 1
            raise

    async def close(self) -> None:
        pass


class StandInTTS:
    def synthesize(
        self, text: str, cancel: threading.Event | None = None, exact: bool = False
    ) -> Iterator[SpeechPiece]:
        words = spoken_units(text)  # a word each, or a character each in Japanese and Chinese
        n = round(WORD_S * OUTPUT_RATE)
        t = np.arange(n * len(words)) / OUTPUT_RATE
        audio = (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
        yield SpeechPiece(text, audio, [Word(w, (i + 1) * n) for i, w in enumerate(words)])


@dataclass
class StandInVoices:
    """One stand-in voice for every language; records the language of each chunk it is asked for."""

    tts: StandInTTS
    languages: list[str] = field(default_factory=list)

    def speaking(self, language: str) -> StandInTTS:
        self.languages.append(language)
        return self.tts


@dataclass
class StandInEngines:
    """The shape of :class:`shell.engines.Engines`, with stand-ins."""

    asr_final: StandInRecognizer
    llm: StandInLLM
    asr_partial: StandInRecognizer | None = None
    tts: StandInTTS = field(default_factory=StandInTTS)
    output_rate: int = OUTPUT_RATE
    smart_turn: StandInSmartTurn | None = None
    partial_budget: Budget = field(default_factory=Budget)
    speculation_budget: Budget = field(default_factory=Budget)
    final_executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1))
    partial_executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1))
    tts_executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1))
    turn_executor: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1))

    def __post_init__(self) -> None:
        self.voices = StandInVoices(self.tts)

    async def warm_up(self) -> None:
        pass

    def new_vad(self) -> StandInVAD:
        return StandInVAD()

    async def aclose(self) -> None:
        for ex in (self.final_executor, self.partial_executor, self.tts_executor, self.turn_executor):
            ex.shutdown(wait=False, cancel_futures=True)


def tone(seconds: float, db: float = -20.0, hz: float = 300.0) -> np.ndarray:
    """A steady tone at ``db`` dBFS (RMS): speech to the stand-in VAD."""
    t = np.arange(round(seconds * ASR_RATE)) / ASR_RATE
    return (10 ** (db / 20) * np.sqrt(2) * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(round(seconds * ASR_RATE), dtype=np.float32)
