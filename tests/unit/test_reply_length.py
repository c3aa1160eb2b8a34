"""How long a spoken reply runs (core/reply_length.py): a few sentences unless detail was asked for,
and not the half sentence the token cap cut off; what was not said is not stored."""

from __future__ import annotations

from core.commands import StartResponse, Synthesize, TranscribeFinal
from core.language import ENGLISH, LANGUAGES
from core.ledger import Word
from core.reply_length import ReplyLength, asks_detail, ends_sentence
from core.turns import Conversation

EGG = "Put the egg in water. Bring it to the boil. Wait ten minutes. Cool it in cold water. Peel it. Enjoy!"


def of(kind, commands):
    return [c for c in commands if isinstance(c, kind)]


def reply(conv: Conversation, asked: str, text: str, tokens: int | None = None) -> list[Synthesize]:
    """``asked`` answered with ``text`` (in one delta, worth ``tokens`` tokens), all played; what was synthesized."""
    conv.speech_started(0.1, 0.35)
    (tf,) = of(TranscribeFinal, conv.speech_ended(1.0, 1.5))
    (start,) = of(StartResponse, conv.transcript_final(tf.utterance, asked, tf.onset, tf.end, 1.6))
    r = start.response
    delta = text if tokens is None else _Tokens(text, tokens)
    syn = of(Synthesize, conv.llm_delta(r, delta, 1.7) + conv.llm_done(r, 1.8))
    for s in syn:
        words = s.text.split()
        conv.tts_audio(
            r, s.chunk, s.text, 10 * len(words), [Word(w, 10 * (k + 1)) for k, w in enumerate(words)], 1.9, True
        )
        conv.tts_done(r, s.chunk, 1.9)
    conv.played(sum(10 * len(s.text.split()) for s in syn), 2.5)
    return syn


class _Tokens(str):
    """A delta that says how many tokens it was (as the engines' deltas do)."""

    def __new__(cls, text: str, tokens: int) -> _Tokens:
        out = super().__new__(cls, text)
        out.tokens = tokens  # type: ignore[attr-defined]
        return out


def test_a_reply_nobody_asked_detail_of_says_four_sentences_and_stores_what_it_said():
    conv = Conversation(reply_length=ReplyLength(max_sentences=4))
    syn = reply(conv, "how long do I boil an egg", EGG)
    said = "Put the egg in water. Bring it to the boil. Wait ten minutes. Cool it in cold water."
    assert " ".join(s.text for s in syn) == said
    assistant = conv.history.turns[-1]
    assert assistant.role == "assistant" and assistant.text == said


def test_asked_for_detail_it_says_all():
    conv = Conversation(reply_length=ReplyLength(max_sentences=4))
    syn = reply(conv, "explain step by step how to boil an egg", EGG)
    assert " ".join(s.text for s in syn) == EGG


def test_the_half_sentence_the_token_cap_cut_off_is_not_said():
    conv = Conversation(reply_length=ReplyLength(max_sentences=None, token_cap=64))
    syn = reply(conv, "tell me about eggs", "Eggs are laid by hens. They are rich in protein and the", tokens=64)
    assert [s.text for s in syn] == ["Eggs are laid by hens."]
    # Under the cap, the model stopped by itself: its last words are said, full stop or not.
    conv = Conversation(reply_length=ReplyLength(max_sentences=None, token_cap=64))
    syn = reply(conv, "tell me about eggs", "Eggs are laid by hens. They are good", tokens=12)
    assert [s.text for s in syn] == ["Eggs are laid by hens.", "They are good"]


def test_by_default_a_conversation_says_all_of_it():
    syn = reply(Conversation(), "how do I boil an egg", EGG)
    assert " ".join(s.text for s in syn) == EGG


def test_detail_is_asked_in_the_persons_language():
    assert asks_detail("Can you explain that?", ENGLISH)
    assert asks_detail("Tell me more about Paris", ENGLISH)
    assert not asks_detail("What's the capital of France?", ENGLISH)
    assert not asks_detail("Listen, what time is it?", ENGLISH)  # "list" only as a word
    assert asks_detail("¿Me lo explicas paso a paso?", LANGUAGES["es"])
    assert asks_detail("詳しく教えてください", LANGUAGES["ja"])


def test_what_ends_a_sentence():
    assert ends_sentence("It is noon.") and ends_sentence('He said "stop!"') and ends_sentence("東京です。")
    assert not ends_sentence("Well, first of all,") and not ends_sentence("and then the")
