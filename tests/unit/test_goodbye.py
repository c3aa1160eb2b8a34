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


# -- in the conversation: a goodbye over the reply cuts it, and its answer may be the last --------


def test_a_goodbye_over_the_reply_cuts_it_and_its_reply_is_marked_the_last():
    from core.commands import CancelResponse, Goodbye, StartResponse, Synthesize, TranscribeFinal
    from core.ledger import Word
    from core.turns import Conversation

    def of(kind, commands):
        return [c for c in commands if isinstance(c, kind)]

    conv = Conversation()
    conv.speech_started(0.1, 0.35)
    (tf,) = of(TranscribeFinal, conv.speech_ended(1.0, 1.5))
    first = conv.transcript_final(tf.utterance, "When do you open?", tf.onset, tf.end, 1.6)
    (start,) = of(StartResponse, first)
    assert of(Goodbye, first) == []
    r = start.response
    for s in of(Synthesize, conv.llm_delta(r, "We open at six. We close at eleven.", 1.7) + conv.llm_done(r, 1.8)):
        said = s.text.split()
        conv.tts_audio(
            r, s.chunk, s.text, 100 * len(said), [Word(w, 100 * (k + 1)) for k, w in enumerate(said)], 1.9, True
        )
        conv.tts_done(r, s.chunk, 1.9)
    conv.played(150, 2.0)
    conv.speech_started(2.5, 2.7)  # "Goodbye." over the reply: one word, not a backchannel
    (over,) = of(TranscribeFinal, conv.speech_ended(2.9, 3.4))
    cmds = conv.transcript_final(over.utterance, "Goodbye.", 2.5, 2.9, 3.5)
    assert of(CancelResponse, cmds) == [CancelResponse(r)]
    (answer,) = of(StartResponse, cmds)
    assert of(Goodbye, cmds) == [Goodbye(answer.response)]
