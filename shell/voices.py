"""The voices a process loads, by language, shared by every session.

core/voices.py chooses the voice for a language; this loads it (piper for a piper file or joe,
Kokoro for its voices, one Kokoro model for all of them) the first time a reply in that language
is spoken, on the TTS thread, or at start for the languages a run is held to. A choice that is
not native is said once, in the log and by :meth:`Voices.notes`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from core.voices import KOKORO, VoiceChoice, VoiceTable, voice_engine
from shell import models
from tts.kokoro_tts import KokoroModel, KokoroTTS
from tts.piper_tts import PiperTTS, SpeechPiece

log = logging.getLogger(__name__)


class Voice(Protocol):
    name: str

    def synthesize(
        self, text: str, cancel: threading.Event | None = None, exact: bool = False
    ) -> Iterator[SpeechPiece]: ...


def piper_languages(voice_file: Path) -> frozenset[str]:
    """The language a piper voice speaks, from its .onnx.json ("es_ES" -> es; English if it does not say)."""
    try:
        config = json.loads(Path(f"{voice_file}.json").read_text(encoding="utf-8"))
        code = str(config.get("language", {}).get("code") or "en")
    except (OSError, ValueError, AttributeError):
        return frozenset({"en"})
    return frozenset({code.replace("-", "_").split("_")[0].lower()})


class Voices:
    """The voice for each language, loaded on first use and kept."""

    def __init__(self, table: VoiceTable, output_rate: int) -> None:
        if voice_engine(table.default) != KOKORO and table.default not in models.VOICES:
            table = VoiceTable(table.default, table.per_language, piper_languages(models.voice_path(table.default)))
        self.table = table
        self.output_rate = output_rate
        self._lock = threading.RLock()  # a voice loaded under it loads the Kokoro model under it too
        self._loaded: dict[tuple[str, str], Voice] = {}  # (voice, language) -> engine
        self._kokoro: KokoroModel | None = None
        self._said: set[str] = set()  # languages whose note was said

    @property
    def default(self) -> Voice:
        """The default voice (English unless the default voice is another's)."""
        return self.speaking("en")

    def check(self) -> None:
        """Raise MissingModelError for a voice that is given but missing, before anything is loaded."""
        for voice in {self.table.default, *self.table.per_language.values()}:
            if voice_engine(voice) == KOKORO:
                models.kokoro_dir()
            else:
                models.voice_path(voice)

    def choice(self, language: str) -> VoiceChoice:
        return self.table.choose(language)

    def notes(self, languages: list[str]) -> list[str]:
        """What to say once about ``languages``' voices: which are not native, and how to add one."""
        return [note for note in (self._unsaid(self.choice(code)) for code in languages) if note]

    def _unsaid(self, choice: VoiceChoice) -> str | None:
        """``choice``'s note, the first time it is asked for (None: said already, or none)."""
        if choice.note is None or choice.language in self._said:
            return None
        self._said.add(choice.language)
        return choice.note

    def load(self, languages: tuple[str, ...]) -> None:
        """Load the voices of ``languages`` now (at start; the caller says their notes)."""
        for code in languages:
            self._voice(self.choice(code))

    def speaking(self, language: str) -> Voice:
        """The voice for ``language``, loaded now if it was not (blocking: the TTS thread's); a
        language first spoken here that has no native voice is said once, in the log."""
        choice = self.choice(language)
        if (note := self._unsaid(choice)) is not None:
            log.warning("%s", note)
        return self._voice(choice)

    def _voice(self, choice: VoiceChoice) -> Voice:
        key = (choice.voice, choice.language if choice.engine == KOKORO else "")
        with self._lock:
            voice = self._loaded.get(key)
            if voice is None:
                voice = self._loaded[key] = self._load(choice)
        return voice

    def _load(self, choice: VoiceChoice) -> Voice:
        if choice.engine == KOKORO:
            return KokoroTTS(self._kokoro_model(), choice.voice, choice.language, self.output_rate)
        return PiperTTS(models.voice_path(choice.voice), self.output_rate)

    def other(self, voice: str, language: str, pace: float = 1.0) -> Voice:
        """``voice`` (a bundled name or a piper file) speaking ``language`` at ``pace`` (faster above 1), made
        now and not kept: a voice that is not the assistant's, such as a test scenario's person. The Kokoro
        model is the one the assistant's voices share. Raises MissingModelError, or ValueError for an
        unknown Kokoro voice."""
        if voice_engine(voice) == KOKORO:
            return KokoroTTS(self._kokoro_model(), voice, language, self.output_rate, speed=pace)
        return PiperTTS(models.voice_path(voice), self.output_rate, length_scale=1 / pace)

    def _kokoro_model(self) -> KokoroModel:
        with self._lock:
            if self._kokoro is None:
                self._kokoro = KokoroModel(models.kokoro_dir())
            return self._kokoro
