"""Languages: what each changes in the rules that read words, and which one a conversation is in (pure).

A :class:`Language` holds what the turn-taking rules need to read a transcript in it: the words
a sentence that goes on ends with (end of turn), the listener's small words that never take the
floor (backchannels) and the words that do whatever else was said (stop words), and whether its
words are spaced (Japanese and Chinese are not: their rules read characters, see
:mod:`core.words`). English's lists are the ones the rules were measured with
(``core/end_of_turn.py``, ``core/barge_in.py``); the others are short, common and conservative:
a word missing from a list only leaves a rule to the models (Smart Turn, the VAD, the LLM's
sentence-end reading), which are multilingual.

:class:`ConversationLanguage` decides the language of each utterance from Whisper's detection:
a long enough utterance (or one Whisper is sure of) sets it; a short one ("Sí.") keeps the
conversation's, since Whisper's guess on a word or two is often a neighbour's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

AUTO = "auto"

# English, as the rules were measured with it (end of turn: core/end_of_turn.py; barge-in: core/barge_in.py).
# A transcript whose last word is one of these has not finished its sentence.
CONTINUATION_WORDS = frozenset(
    [
        # conjunctions
        "and",
        "but",
        "or",
        "nor",
        "so",
        "because",
        "cause",
        "if",
        "unless",
        "whether",
        # articles: nothing finished ends on one
        "the",
        "a",
        "an",
        # fillers: still thinking
        "um",
        "uh",
        "er",
        "erm",
    ]
)

STOP_WORDS = frozenset(
    [
        "stop",
        "wait",
        "no",
        "nope",
        "hold",
        "pause",
        "quiet",
        "enough",
        "cancel",
        "hey",
        "sorry",
        "excuse",
        "actually",
        "but",
        "shut",
        "listen",
    ]
)


BACKCHANNELS = frozenset(
    [
        "uh-huh",
        "mm-hmm",
        "mhm",
        "mm",
        "hmm",
        "uh",
        "um",
        "ah",
        "oh",
        "yeah",
        "yes",
        "yep",
        "yup",
        "ok",
        "okay",
        "right",
        "sure",
        "alright",
        "cool",
        "nice",
        "wow",
        "please",  # "Yes, | please.": the turn it follows was answered already
    ]
)


@dataclass(frozen=True)
class Language:
    code: str  # ISO 639-1, as Whisper names it ("en", "es", "ja", "zh")
    name: str  # in English, as the LLM is told it ("Spanish")
    spaced: bool = True  # words separated by spaces
    continuation_words: frozenset[str] = frozenset()  # a transcript ending on one has not finished
    backchannels: frozenset[str] = frozenset()  # a listener's "yes", "mm": never a barge-in alone
    stop_words: frozenset[str] = frozenset()  # "stop", "wait": a barge-in whatever else was said
    # Phrases that end a conversation ("bye", "see you"), and the closing words said around them
    # ("thank you", "OK"), which a goodbye often follows after a breath (core/goodbye.py).
    goodbyes: frozenset[str] = frozenset()
    closings: frozenset[str] = frozenset()
    # Words that ask for more than a short answer ("explain", "tell me more"): the reply is not held
    # to a few sentences (core/reply_length.py).
    detail_words: frozenset[str] = frozenset()
    # The final pass's beam (1: greedy). Japanese: 5 took Whisper base's CER on the fixtures from
    # 0.201 to 0.142, for +21% of a pass's time; it made Spanish worse (0.091 to 0.163), so it is
    # not everyone's (2-3 recordings a language: python -m voice.bench languages).
    final_beam: int = 1


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _phrases(text: str) -> frozenset[str]:
    """Comma-separated phrases of one or more words."""
    return frozenset(p.strip() for p in text.split(",") if p.strip())


GOODBYES = _phrases(
    "goodbye, good-bye, good bye, bye, bye-bye, bye bye, see you, see ya, see you later, see you soon, take care,"
    " good night, farewell, so long, talk to you later, talk soon, have a good day, have a nice day,"
    " have a great day, have a good one"
)
# Words said around a goodbye. Not a plain "no" or "yes": they answer questions, and a closing
# utterance waits longer for its turn to end (EndOfTurnConfig.closing_wait_s).
CLOSINGS = _phrases(
    "thank you, thanks, thank you very much, thank you so much, thanks a lot, many thanks, no thanks,"
    " no thank you, ok, okay, alright, all right, great, perfect, fine, that's all, that's it, that is all,"
    " for now, then, well, oh"
)

DETAIL_WORDS = _phrases(
    "explain, describe, in detail, detailed, details, tell me more, tell me about, tell me everything, more about,"
    " step by step, steps, all the, list, story, recipe, instructions, walk me through, elaborate, summarize,"
    " summarise, long version"
)

ENGLISH = Language(
    "en",
    "English",
    True,
    CONTINUATION_WORDS,
    BACKCHANNELS,
    STOP_WORDS,
    goodbyes=GOODBYES,
    closings=CLOSINGS,
    detail_words=DETAIL_WORDS,
)

LANGUAGES: dict[str, Language] = {
    lang.code: lang
    for lang in (
        ENGLISH,
        Language(
            "es",
            "Spanish",
            continuation_words=_words("y o pero porque que si el la los las un una de del con eh em mmm"),
            backchannels=_words("sí si ajá aja vale claro ok okay bueno mhm mm ah oh eh ya exacto cierto entiendo"),
            stop_words=_words("para espera no basta alto oye perdón perdona disculpa pero cállate detente"),
            goodbyes=_phrases(
                "adiós, adios, chao, chau, hasta luego, hasta pronto, hasta mañana, nos vemos, buenas noches"
            ),
            closings=_phrases(
                "gracias, muchas gracias, vale, ok, okay, bueno, perfecto, muy bien, eso es todo, entonces, pues"
            ),
            detail_words=_phrases(
                "explica, explícame, describe, detalle, detalles, cuéntame, paso a paso, lista, historia, receta"
            ),
        ),
        Language(
            "fr",
            "French",
            continuation_words=_words("et ou mais parce que qui si le la les un une de du des euh donc"),
            backchannels=_words("oui ouais d'accord ok okay mhm mm ah oh bon voilà exactement super bien"),
            stop_words=_words("arrête arrêtez attends attendez non stop pardon excuse excusez mais écoute"),
            goodbyes=_phrases(
                "au revoir, salut, bonne journée, bonne soirée, à bientôt, a bientôt, à plus, bonne nuit, ciao"
            ),
            closings=_phrases("merci, merci beaucoup, d'accord, ok, okay, bon, parfait, très bien, c'est tout, alors"),
            detail_words=_phrases(
                "explique, expliquez, décris, décrivez, détail, détails,"
                " raconte, racontez, étape par étape, liste, histoire, recette"
            ),
        ),
        Language(
            "de",
            "German",
            continuation_words=_words("und oder aber weil dass wenn der die das den dem ein eine einen äh ähm"),
            backchannels=_words("ja jaja genau okay ok mhm mm ah oh gut klar stimmt richtig"),
            stop_words=_words("stopp stop halt warte warten nein moment entschuldigung aber hör"),
            goodbyes=_phrases(
                "tschüss, tschüs, auf wiedersehen, auf wiederhören, bis bald, bis dann, ciao, gute nacht, schönen tag"
            ),
            closings=_phrases("danke, danke schön, vielen dank, okay, ok, gut, alles klar, perfekt, das war's, also"),
            detail_words=_phrases(
                "erkläre, erklär, erklären, beschreibe, beschreib, details,"
                " ausführlich, erzähl, erzähle, schritt für schritt, liste, geschichte, rezept"
            ),
        ),
        Language(
            "pt",
            "Portuguese",
            continuation_words=_words("e ou mas porque que se o a os as um uma de do da com hum"),
            backchannels=_words("sim é ok okay tá claro certo uhum ah oh beleza isso entendi"),
            stop_words=_words("para pare espera espere não chega desculpa desculpe mas escuta"),
            goodbyes=_phrases("tchau, adeus, até logo, até mais, até breve, boa noite"),
            closings=_phrases(
                "obrigado, obrigada, muito obrigado, muito obrigada, ok, okay, tá, certo, perfeito, então, é isso"
            ),
            detail_words=_phrases(
                "explica, explique, descreva, descreve, detalhe, detalhes,"
                " conta, conte, passo a passo, lista, história, receita"
            ),
        ),
        Language(
            "it",
            "Italian",
            continuation_words=_words("e o ma perché che se il lo la i gli le un una di del ehm"),
            backchannels=_words("sì si ok okay certo già esatto bene ah oh mhm"),
            stop_words=_words("basta aspetta no ferma fermati scusa scusi ma senti"),
            goodbyes=_phrases("arrivederci, ciao, addio, a presto, buona giornata, buona notte, buonanotte"),
            closings=_phrases("grazie, grazie mille, ok, okay, va bene, perfetto, allora, è tutto"),
            detail_words=_phrases(
                "spiega, spiegami, descrivi, dettagli, dettaglio, racconta,"
                " raccontami, passo passo, elenco, lista, storia, ricetta"
            ),
        ),
        Language(
            "ja",
            "Japanese",
            spaced=False,
            final_beam=5,
            continuation_words=_words("けど けれど けれども ので のに から し とか えっと えーと あの その"),
            backchannels=_words("はい うん ええ そう そうですね なるほど へえ ああ はいはい うんうん"),
            stop_words=_words("ちょっと 待って まって ストップ やめて いいえ いや すみません"),
            goodbyes=_phrases(
                "さようなら, さよなら, じゃあね, またね, また今度, 失礼します, 失礼しました,"
                " おやすみ, おやすみなさい, バイバイ"
            ),
            closings=_phrases(
                "ありがとう, ありがとうございます, ありがとうございました, どうも, はい,"
                " わかりました, 分かりました, じゃあ, では, それでは"
            ),
            detail_words=_phrases("詳しく, 説明, 教えて, 手順, 一覧, 物語, レシピ"),
        ),
        Language(
            "zh",
            "Chinese",
            spaced=False,
            continuation_words=_words("和 跟 或者 但是 可是 因为 所以 然后 如果 那个 就是"),
            backchannels=_words("嗯 嗯嗯 对 对对 是 是的 好 好的 哦 啊 行"),
            stop_words=_words("等等 等一下 停 不是 别说了 打住"),
            goodbyes=_phrases("再见, 拜拜, 回头见, 明天见, 晚安"),
            closings=_phrases("谢谢, 谢谢你, 好的, 好, 行, 那就这样, 就这样"),
            detail_words=_phrases("详细, 解释, 说明, 步骤, 列表, 故事, 食谱"),
        ),
    )
}

# Whisper's other languages, by name (the LLM is told the name); their rules are the models' alone.
_NAMES = {
    "ar": "Arabic", "ca": "Catalan", "cs": "Czech", "da": "Danish", "el": "Greek", "fa": "Persian",
    "fi": "Finnish", "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "ko": "Korean",
    "ms": "Malay", "nl": "Dutch", "no": "Norwegian", "pl": "Polish", "ro": "Romanian", "ru": "Russian",
    "sk": "Slovak", "sv": "Swedish", "ta": "Tamil", "th": "Thai", "tl": "Tagalog", "tr": "Turkish",
    "uk": "Ukrainian", "ur": "Urdu", "vi": "Vietnamese", "yue": "Cantonese",
}  # fmt: skip
_UNSPACED = {"th", "lo", "my", "km", "yue"}


def language(code: str) -> Language:
    """The language of ISO code ``code``; one without lists of its own gets the models' rules alone."""
    code = code.lower()
    if code in LANGUAGES:
        return LANGUAGES[code]
    return Language(code, _NAMES.get(code, code), spaced=code not in _UNSPACED)


@dataclass(frozen=True)
class Detected:
    """The language Whisper heard an utterance in, and how sure it was (0-1)."""

    code: str
    probability: float


# Languages so alike that Whisper confuses them on a short sentence (a Mexican speaker's 4 s was
# Catalan to Whisper base): a detection that moves the conversation from one to another of its
# group must be sure (LanguageConfig.sure), else the conversation's own is kept.
RELATED = (
    frozenset({"es", "ca", "gl", "pt"}),
    frozenset({"it", "es"}),
    frozenset({"fr", "ca"}),
    frozenset({"ru", "uk", "be"}),
    frozenset({"cs", "sk"}),
    frozenset({"da", "no", "nn", "sv"}),
    frozenset({"hr", "sr", "bs"}),
    frozenset({"id", "ms"}),
    frozenset({"zh", "yue"}),
    frozenset({"hi", "ur"}),
    frozenset({"nl", "af"}),
)


def related(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are languages Whisper confuses with each other."""
    return any(a in group and b in group for group in RELATED)


def is_auto(setting: str) -> bool:
    """Whether a language setting detects each utterance's: ``"auto"``, or ``"auto:en,es,fr"``."""
    return setting == AUTO or setting.startswith(AUTO + ":")


def among(setting: str) -> frozenset[str]:
    """The languages an ``auto`` setting may detect: those it names (``"auto:en,es"``), else those
    it can answer and speak: the table's, each with a bundled voice and the Qwen model writing it."""
    named = setting.partition(":")[2]
    return frozenset(c.strip().lower() for c in named.split(",") if c.strip()) or frozenset(LANGUAGES)


@dataclass(frozen=True)
class LanguageConfig:
    """``language``: a code holds every utterance to it; ``"auto"`` detects each one's, among the
    languages it can answer and speak, or ``"auto:en,es,fr"`` among those."""

    language: str = "en"
    # With "auto": speech this long, or a detection this sure, sets the utterance's language;
    # shorter and less sure keeps the conversation's (Whisper base called "Sí." Portuguese).
    min_s: float = 1.5
    sure: float = 0.9
    start: str = "en"  # the conversation's language before anything was detected


class ConversationLanguage:
    """The language the conversation is in, utterance by utterance."""

    def __init__(self, config: LanguageConfig | None = None) -> None:
        self.config = config or LanguageConfig()
        fixed = not is_auto(self.config.language)
        self.current = language(self.config.language if fixed else self.config.start)

    @property
    def fixed(self) -> bool:
        return not is_auto(self.config.language)

    @property
    def among(self) -> frozenset[str] | None:
        """The languages a detection may find (None: held to one, nothing is detected)."""
        return None if self.fixed else among(self.config.language)

    def hold(self, code: str) -> None:
        """From now on the conversation is in ``code`` (``"auto"``: detected again, from the current)."""
        self.config = dataclasses.replace(self.config, language=code)
        if self.fixed:
            self.current = language(code)

    @property
    def reported(self) -> str | None:
        """The language events and stored turns carry: None while held to English (as before)."""
        return None if self.config.language == "en" else self.current.code

    def heard(self, detected: Detected | None, speech_s: float) -> Language:
        """The language of an utterance of ``speech_s`` seconds that Whisper took for ``detected``
        (None: no detection); it becomes the conversation's."""
        if self.fixed or detected is None:
            return self.current
        sure = detected.probability >= self.config.sure
        if related(detected.code, self.current.code) and not sure:
            return self.current  # a close call between two alike: the conversation's own
        if speech_s >= self.config.min_s or sure:
            self.current = language(detected.code)
        return self.current
