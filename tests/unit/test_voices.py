"""Which voice speaks which language (core/voices.py): the --voice values and the choice."""

from __future__ import annotations

import pytest

from core.voices import KOKORO, PIPER, VoiceSpecError, VoiceTable, chunk_language, parse_voices


def test_the_default_table_speaks_english_with_joe_and_japanese_natively():
    table = parse_voices([])
    en, ja = table.choose("en"), table.choose("ja")
    assert (en.voice, en.engine, en.native, en.note) == ("joe", PIPER, True, None)
    assert (ja.voice, ja.engine, ja.native, ja.note) == ("jf_alpha", KOKORO, True, None)


def test_a_language_without_a_native_voice_gets_the_best_bundled_one_and_says_how_to_add_one():
    es = parse_voices([]).choose("es")
    assert (es.voice, es.engine, es.native) == ("jm_kumo", KOKORO, False)
    assert "no native Spanish voice" in es.note and "--voice es=es_ES-davefx-medium.onnx" in es.note


def test_a_language_no_bundled_voice_speaks_is_read_by_the_default_voice():
    ko = parse_voices([]).choose("ko")
    assert (ko.voice, ko.native) == ("joe", False)
    assert "no Korean voice" in ko.note and "a piper voice for Korean" in ko.note
    zh = parse_voices([]).choose("zh")
    assert (zh.voice, zh.native) == ("jm_kumo", False) and "zh_CN-huayan-medium" in zh.note


def test_voices_given_per_language_win_and_the_last_plain_one_is_the_default():
    table = parse_voices(["es=/v/es_ES-davefx-medium.onnx", "ja=jm_kumo", "jf_nezumi"])
    assert table.default == "jf_nezumi"
    assert table.choose("es").voice == "/v/es_ES-davefx-medium.onnx" and table.choose("es").native
    assert table.choose("ja").voice == "jm_kumo"
    assert table.choose("en").voice == "joe"  # jf_nezumi is a Japanese voice: English keeps joe


def test_a_default_voice_file_speaks_the_language_its_config_names():
    table = VoiceTable("/v/de_DE-thorsten-medium.onnx", {}, frozenset({"de"}))
    assert table.choose("de").voice == "/v/de_DE-thorsten-medium.onnx" and table.choose("de").native
    assert table.choose("en").voice == "joe"


@pytest.mark.parametrize(
    ("spec", "says"),
    [("es=", "no voice after"), ("anna", "neither a bundled voice"), ("1x=joe", "must be a code")],
)
def test_a_voice_that_names_nothing_is_refused(spec, says):
    with pytest.raises(VoiceSpecError, match=says):
        parse_voices([spec])


@pytest.mark.parametrize(
    ("conversation", "text", "voice_of"),
    [
        ("ja", "東京は日本の首都です。", "ja"),
        ("ja", "Tokyo is the capital.", "en"),  # the model answered in English: not spelt out in Japanese
        ("zh", "北京是中国的首都。", "zh"),
        ("en", "「はい」と言いました。", "ja"),  # kana are Japanese whatever the conversation
        ("es", "Madrid es la capital.", "es"),
        ("es", "OK.", "es"),
        ("es", "The heroes from Luna also received a hug.", "en"),  # the model answered in English
        ("pt", "A casa e o carro.", "pt"),  # "a" is English's too: a tie keeps the conversation's
    ],
)
def test_a_chunk_is_spoken_in_the_language_its_script_says(conversation, text, voice_of):
    assert chunk_language(conversation, text) == voice_of


def test_a_language_without_a_native_voice_is_said_once():
    from shell.voices import Voices

    voices = Voices(parse_voices([]), 24000)  # nothing is loaded until a language is spoken
    notes = voices.notes(["en", "es", "ja", "es"])
    assert len(notes) == 1 and notes[0].startswith("no native Spanish voice")
    assert voices.notes(["es"]) == []
