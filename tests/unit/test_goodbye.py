"""Goodbyes (``core/goodbye.py``): read per language, kept one turn, taking the floor over a reply."""

from __future__ import annotations

import pytest

from core.barge_in import BargeInPolicy
from core.goodbye import is_closing, is_goodbye, says_goodbye
from core.language import language


@pytest.mark.parametrize(
    ("text", "goodbye", "closing"),
    [
        ("Thank you, goodbye.", True, False),
        ("OK, bye then", True, False),
        ("Goodbye.", True, False),
        ("Bye-bye!", True, False),
        ("Thanks, see you later!", True, False),
        ("Thank you.", False, True),
        ("Alright, thanks.", False, True),
        ("OK", False, True),
        ("Mm-hm", False, False),
        ("No.", False, False),
        ("Goodbye is a song by the Spice Girls", False, False),
        ("I want a table for four", False, False),
    ],
)
def test_english(text, goodbye, closing):
    assert is_goodbye(text) is goodbye
    assert is_closing(text) is closing


@pytest.mark.parametrize(
    ("code", "text"),
    [
        ("es", "Muchas gracias, adiós."),
        ("fr", "Merci, au revoir."),
        ("de", "Danke, tschüss!"),
        ("pt", "Obrigado, tchau."),
        ("it", "Grazie, arrivederci."),
        ("ja", "ありがとうございました。さようなら。"),
        ("zh", "谢谢，再见。"),
    ],
)
def test_every_language_of_the_table_has_its_goodbyes(code, text):
    lang = language(code)
    assert is_goodbye(text, lang) and says_goodbye(text, lang)
    assert not is_goodbye(text, language("en")) or code == "en"


def test_a_goodbye_over_the_reply_takes_the_floor_where_a_backchannel_does_not():
    policy = BargeInPolicy()
    reply = "The restaurant opens at six and closes at eleven every day."
    assert policy.interrupts("Goodbye.", reply)
    assert policy.interrupts("OK, bye.", reply)
    assert not policy.interrupts("Mm-hm.", reply)
    assert not policy.interrupts("Okay.", reply)
    # The reply said goodbye itself: its own echo, transcribed, is not the person.
    assert not policy.interrupts("Goodbye!", "Goodbye! Have a nice day.")


def test_a_goodbye_over_a_japanese_reply():
    assert BargeInPolicy().interrupts("さようなら", "レストランは六時に開きます。", language=language("ja"))
