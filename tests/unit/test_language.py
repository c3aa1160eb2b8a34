"""Languages (``core/language.py``): the conversation's language utterance by utterance, and
the word rules read in each language (end of turn, barge-in, words of any script)."""

from __future__ import annotations

import pytest

from core.barge_in import BargeInPolicy, tokens
from core.end_of_turn import trails_off
from core.language import ENGLISH, LANGUAGES, ConversationLanguage, Detected, LanguageConfig, language
from core.words import letters, unspaced, words

# -- which language -----------------------------------------------------------------------


def test_a_fixed_language_holds_whatever_is_detected():
    conv = ConversationLanguage(LanguageConfig(language="es"))
    assert conv.heard(Detected("en", 0.99), 5.0).code == "es"


def test_auto_takes_the_language_of_a_long_enough_utterance():
    conv = ConversationLanguage(LanguageConfig(language="auto"))
    assert conv.current is ENGLISH
    assert conv.heard(Detected("es", 0.7), 2.0).code == "es"
    assert conv.current.code == "es"


def test_a_short_utterance_keeps_the_conversations_language_unless_whisper_is_sure():
    conv = ConversationLanguage(LanguageConfig(language="auto"))
    conv.heard(Detected("es", 0.95), 3.0)
    assert conv.heard(Detected("pt", 0.6), 0.5).code == "es"  # "Sí." taken for Portuguese
    assert conv.heard(Detected("en", 0.97), 0.6).code == "en"  # "Okay, thanks." and Whisper is sure


def test_a_close_call_between_alike_languages_keeps_the_conversations():
    conv = ConversationLanguage(LanguageConfig(language="auto", start="es"))
    # A Mexican speaker's 4 s sentence, Catalan to Whisper base (once ca is allowed at all).
    assert conv.heard(Detected("ca", 0.55), 4.0).code == "es"
    assert conv.heard(Detected("pt", 0.62), 3.0).code == "es"
    assert conv.heard(Detected("pt", 0.95), 3.0).code == "pt"  # sure: they moved to Portuguese
    assert conv.heard(Detected("en", 0.6), 3.0).code == "en"  # not alike: a long utterance moves it


def test_auto_detects_among_the_languages_it_can_answer_and_speak_or_those_named():
    assert ConversationLanguage(LanguageConfig(language="auto")).among == frozenset(LANGUAGES)
    assert "ca" not in frozenset(LANGUAGES)  # no bundled voice speaks Catalan
    narrowed = ConversationLanguage(LanguageConfig(language="auto:en, es,FR"))
    assert not narrowed.fixed and narrowed.among == {"en", "es", "fr"} and narrowed.current is ENGLISH
    assert ConversationLanguage(LanguageConfig(language="es")).among is None


def test_whisper_takes_the_likeliest_allowed_language():
    from asr.whisper import _likeliest, known_language

    ranked = [("ca", 0.48), ("es", 0.41), ("en", 0.05)]
    assert _likeliest(ranked, frozenset({"en", "es"})) == ("es", 0.41)
    assert _likeliest(ranked, None) == ("ca", 0.48)
    assert _likeliest(ranked, frozenset({"ja"})) == ("ca", 0.48)  # none ranked: the likeliest of all
    assert known_language("auto:en,es") and not known_language("auto:en,xx") and known_language("auto")


def test_a_client_may_hold_the_conversation_to_a_language_and_let_it_go_again():
    conv = ConversationLanguage(LanguageConfig(language="auto"))
    conv.hold("ja")
    assert conv.fixed and conv.current.code == "ja" and conv.heard(Detected("en", 0.99), 3.0).code == "ja"
    conv.hold("auto")
    assert not conv.fixed and conv.current.code == "ja"  # detected again from here
    assert conv.heard(Detected("en", 0.99), 3.0).code == "en"


def test_no_detection_keeps_the_language():
    conv = ConversationLanguage(LanguageConfig(language="auto", start="fr"))
    assert conv.heard(None, 4.0).code == "fr"


def test_every_language_has_a_name_and_unknown_codes_get_the_models_rules_alone():
    assert {code: lang.name for code, lang in LANGUAGES.items()}["ja"] == "Japanese"
    ru = language("ru")
    assert ru.name == "Russian" and ru.spaced and not ru.backchannels and not ru.continuation_words
    assert language("th").spaced is False
    assert language("xx").name == "xx"


def test_the_lists_are_lower_case_words_as_the_rules_read_them():
    for lang in LANGUAGES.values():
        for w in lang.continuation_words | lang.backchannels | lang.stop_words:
            read = words(w) if lang.spaced else [letters(w)]
            assert read == [w], (lang.code, w)


# -- words of any script ----------------------------------------------------------------------


def test_words_keep_letters_of_any_script():
    assert words("¿Sí? Über-café, d'accord.") == ["sí", "über-café", "d'accord"]
    assert words("Hello, world 42", numbers=False) == ["hello", "world"]


def test_letters_read_unspaced_text_character_by_character():
    assert letters("はい、そうです。") == "はいそうです"
    assert unspaced("は") and unspaced("嗯") and not unspaced("a") and not unspaced("é")


# -- end of turn --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "text"),
    [("es", "Quiero ir al parque y"), ("fr", "Je voudrais et"), ("de", "Ich möchte und"), ("pt", "Eu queria e"),
     ("ja", "行きたいんですけど"), ("zh", "我想去，但是")],
)  # fmt: skip
def test_a_transcript_trails_off_on_a_continuation_word_of_its_language(code, text):
    assert trails_off(text, language(code))
    assert not trails_off(text)  # read as English, it is finished


@pytest.mark.parametrize(
    ("code", "text"),
    [("es", "Quiero ir al parque."), ("fr", "Je voudrais un café."), ("ja", "行きたいです。"), ("zh", "我想去公园。")],
)
def test_a_finished_sentence_does_not_trail_off(code, text):
    assert not trails_off(text, language(code))


# -- barge-in -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "text"),
    [("es", "Sí, sí."), ("fr", "Oui, d'accord."), ("de", "Ja, genau."), ("ja", "はい、はい。"), ("zh", "嗯，对。")],
)
def test_backchannels_of_each_language_do_not_take_the_floor(code, text):
    assert not BargeInPolicy().interrupts(text, language=language(code))


@pytest.mark.parametrize(
    ("code", "text"),
    [("es", "Espera."), ("fr", "Attendez."), ("de", "Warte."), ("ja", "ちょっと待って。"), ("zh", "等一下。")],
)
def test_a_stop_word_of_each_language_takes_the_floor(code, text):
    assert BargeInPolicy().interrupts(text, language=language(code))


@pytest.mark.parametrize(
    ("code", "text"),
    [("es", "¿Qué hora es?"), ("ja", "今何時ですか。"), ("zh", "现在几点了？")],
)
def test_a_question_over_the_reply_takes_the_floor(code, text):
    assert BargeInPolicy().interrupts(text, language=language(code))


def test_two_characters_of_an_unspaced_script_count_as_one_word():
    ja = language("ja")
    assert tokens("はい、今", ja) == ["はい", "今"]
    assert not BargeInPolicy().interrupts("はい、今", language=ja)  # a backchannel and half a word
    assert not BargeInPolicy().interrupts("今何時", language=ja)  # a word and a half
    assert BargeInPolicy().interrupts("今何時です", language=ja)  # two and a half


# -- what was heard, as text ----------------------------------------------------------------------


def test_heard_characters_of_japanese_are_joined_without_spaces():
    from core.ledger import PlaybackLedger, Word

    ledger = PlaybackLedger()
    ledger.add_chunk("こんにちは。", 600, [Word(c, 100 * (i + 1)) for i, c in enumerate("こんにちは。")])
    ledger.add_chunk("元気ですか？", 600, [Word(c, 100 * (i + 1)) for i, c in enumerate("元気ですか？")])
    assert ledger.heard_text(740) == "こんにちは。元"  # 気 is 40 of its 100 samples in
    assert ledger.spoken_text() == "こんにちは。元気ですか？"


def test_words_of_spaced_languages_keep_their_spaces():
    from core.words import join_words

    assert join_words(["Hello", "there."]) == "Hello there."
    assert join_words(["Son", "las", "tres."]) == "Son las tres."
    assert join_words(["東京", "Tower", "です"]) == "東京 Tower です"
