"""Sentence grouping: boundaries, the things that are not boundaries, and the
property that any split of a text into deltas gives the text back."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from core.sentences import SentenceGrouper, speakable


def group(text: str, deltas: list[str] | None = None, clause_words: int = 1000, phrase_words: int = 1000) -> list[str]:
    """Chunks of ``text`` fed as ``deltas`` (char by char by default).

    The early first-chunk cuts at a clause and before a conjunction are off
    unless ``clause_words`` and ``phrase_words`` say.
    """
    g = SentenceGrouper(first_clause_min_words=clause_words, first_phrase_min_words=phrase_words)
    out: list[str] = []
    for d in deltas if deltas is not None else list(text):
        out += g.feed(d)
    return out + g.flush()


def test_plain_sentences():
    assert group("Hello there. How are you? I am fine!") == ["Hello there.", "How are you?", "I am fine!"]


def test_chunk_is_emitted_before_the_reply_ends():
    g = SentenceGrouper()
    assert g.feed("It is sunny today.") == []  # the next delta decides
    assert g.feed(" Bring") == ["It is sunny today."]


def test_abbreviations_and_titles_do_not_end_sentences():
    text = "Dr. Smith met Mr. Jones, e.g. at noon. They talked."
    assert group(text) == ["Dr. Smith met Mr. Jones, e.g. at noon.", "They talked."]


def test_us_ends_a_sentence_only_before_a_capital():
    assert group("He moved to the U.S. last year. Then he left.") == [
        "He moved to the U.S. last year.",
        "Then he left.",
    ]
    assert group("He lives in the U.S. The weather is fine.") == ["He lives in the U.S.", "The weather is fine."]


def test_decimals_prices_times_urls_emails():
    text = "It costs $3.50 at 10:30 a.m. today. Visit example.com or mail a.b@c.org now. Pi is 3.14."
    assert group(text) == [
        "It costs $3.50 at 10:30 a.m. today.",
        "Visit example.com or mail a.b@c.org now.",
        "Pi is 3.14.",
    ]


def test_ellipsis():
    assert group("Well... maybe so. Wait… What?") == ["Well... maybe so.", "Wait…", "What?"]


def test_quotes_stay_with_their_sentence():
    assert group('He said "Stop." Then he left.') == ['He said "Stop."', "Then he left."]


def test_numbered_list():
    text = "Three steps:\n1. Open the box.\n2. Take it out\n3. Enjoy"
    # Said as sentences: the numbers are for the eye, and an item without a full stop gets one.
    assert group(text, [text]) == ["Three steps:", "Open the box.", "Take it out.", "Enjoy"]


def test_initials():
    assert group("J. K. Rowling wrote it. Yes.") == ["J. K. Rowling wrote it.", "Yes."]


def test_markdown_and_emoji_are_not_spoken():
    text = "# Title\n**Bold** and _italic_ with `code` 😀. See [the docs](https://x.org/a).\n- item one"
    assert group(text) == ["Title.", "Bold and italic with code .", "See the docs.", "item one"]


def test_snake_case_survives():
    assert speakable("call my_function now") == "call my_function now"


def test_first_chunk_may_end_at_a_clause():
    chunks = group("Sure thing, my friend, here is the plan for today, and more. Then the rest, again.", clause_words=4)
    assert chunks[0] == "Sure thing, my friend,"
    assert "Then the rest, again." in chunks  # only the first chunk is cut early


def test_first_chunk_may_end_before_a_conjunction():
    text = "The two men exchanged their palms and began shaking hands and laughing. Then and then again."
    chunks = group(text, phrase_words=5)
    assert chunks == [
        "The two men exchanged their palms",
        "and began shaking hands and laughing.",
        "Then and then again.",
    ]
    # A word that only starts like one is not one; too few words are not cut.
    assert group("One two three four five android six.", phrase_words=5) == ["One two three four five android six."]
    assert group("One two and three.", phrase_words=5) == ["One two and three."]


def test_short_clause_is_not_cut():
    assert group("Yes, I can. Fine.", clause_words=4) == ["Yes, I can.", "Fine."]


def test_long_text_without_punctuation_is_cut_between_words():
    text = " ".join(["word"] * 200)
    chunks = group(text)
    assert len(chunks) > 1
    assert all(set(c.split()) == {"word"} for c in chunks)
    assert " ".join(chunks) == text


def test_no_cut_inside_a_word():
    for chunk in group("Version 2.0.1 is out. Ok.", ["Version 2", ".", "0", ".1 is out", ". Ok."]):
        assert chunk in ("Version 2.0.1 is out.", "Ok.")


def test_reset_forgets_the_buffer():
    g = SentenceGrouper()
    g.feed("Half a sent")
    g.reset()
    assert g.flush() == []


# -- property: any split gives the text back ---------------------------------

_WORDS = st.sampled_from(
    [
        "hello", "Dr.", "U.S.", "e.g.", "$3.50", "10:30", "example.com", "a@b.org", "3.14", "I", "The",
        "quick", "fox", "etc.", "J.", "1.", "**bold**", "_it_", "`code`", "😀", "#", "-", "...", "…",
        '"Stop."', "(yes)", "[link](http://x.y/z)", "Wait,", "ok;", "well:", "What?", "No!", "end.",
        "snake_case", "co-op", "it's", "and", "but", "which", "andes",
    ]
)  # fmt: skip
_SEPS = st.sampled_from([" ", " ", " ", "  ", "\n", "\n\n", " \n"])


@st.composite
def texts_and_splits(draw):
    words = draw(st.lists(_WORDS, min_size=0, max_size=40))
    seps = draw(st.lists(_SEPS, min_size=len(words), max_size=len(words)))
    text = "".join(w + s for w, s in zip(words, seps, strict=True)).rstrip(" ") if words else ""
    cuts = sorted(draw(st.sets(st.integers(0, max(0, len(text))), max_size=20)))
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return text, deltas


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


@settings(max_examples=400, deadline=None)
@given(texts_and_splits())
def test_any_split_gives_the_text_back(case):
    text, deltas = case
    chunks = group(text, deltas, clause_words=4, phrase_words=5)
    # The same words; a line that ended without one gets a full stop (said as a sentence).
    assert _norm(" ".join(chunks).replace(".", "")) == _norm(speakable(text).replace(".", ""))
    assert all(c == c.strip() and c for c in chunks)


@settings(max_examples=200, deadline=None)
@given(texts_and_splits())
def test_chunks_do_not_depend_on_the_split(case):
    text, deltas = case
    assert group(text, deltas, clause_words=4, phrase_words=5) == group(text, [text], clause_words=4, phrase_words=5)


def test_a_call_or_json_written_as_text_is_not_spoken():
    assert speakable('{"name": "set_timer", "arguments": {"minutes": 5}}') == ""
    assert speakable('<tool_call>\n{"name": "get_current_time", "arguments": {}}\n</tool_call> It is late.') == (
        "It is late."
    )
    assert speakable('Sure. {"response_type": "text"}') == "Sure."
    assert "tool_response" not in speakable('"<tool_response>"}}')  # the tags go (piper says no braces)
    assert speakable("tool_response") == ""  # a model held to plain words wrote the tag's name
    assert speakable("It is 5 {degrees} and {cold}.") == "It is 5 {degrees} and {cold}."


def test_a_json_object_is_never_cut_so_none_of_it_is_spoken():
    g = SentenceGrouper()
    text = 'Sure. {"name": "set_timer", "arguments": {"minutes": 10, "label": "tea. Now"}} Done, it is set.'
    chunks = [c for piece in text.split(" ") for c in g.feed(piece + " ")] + g.flush()
    assert "".join(chunks).count("set_timer") == 0 and "minutes" not in " ".join(chunks)
    assert chunks[0] == "Sure."


# -- other scripts (issue 33) --------------------------------------------------------------


def test_japanese_sentences_end_at_their_full_width_marks():
    text = "こんにちは。今日はいい天気ですね！散歩に行きましょうか？はい。"
    assert group(text) == ["こんにちは。", "今日はいい天気ですね！", "散歩に行きましょうか？", "はい。"]


def test_chinese_sentences_with_ascii_marks_end_without_a_space():
    assert group("你好!我是你的助手?好的。") == ["你好!", "我是你的助手?", "好的。"]


def test_closing_brackets_stay_with_their_sentence():
    assert group("彼は「行こう。」と言った。") == ["彼は「行こう。」", "と言った。"]


def test_spanish_opening_marks_are_kept():
    assert group("¿Qué hora es? Son las tres. ¡Qué bien!") == ["¿Qué hora es?", "Son las tres.", "¡Qué bien!"]


def test_a_first_chunk_of_unspaced_text_counts_two_characters_as_a_word():
    # first_clause_min_words=4: a clause of 6 characters or more (1 + 6/2), not a greeting of 2.
    assert group("你好，我是你的助手。", clause_words=4) == ["你好，我是你的助手。"]
    assert group("東京は日本の首都で、人口は約千四百万人です。", clause_words=4) == [
        "東京は日本の首都で、",
        "人口は約千四百万人です。",
    ]


def test_unspaced_text_without_any_mark_is_cut_between_characters():
    g = SentenceGrouper(max_chars=20)
    chunks = g.feed("あ" * 50) + g.flush()
    assert "".join(chunks) == "あ" * 50 and max(map(len, chunks)) <= 20


def test_a_latin_word_in_japanese_is_not_cut_inside():
    g = SentenceGrouper(max_chars=10)
    chunks = g.feed("これはPythonistaの本です") + g.flush()
    assert "".join(chunks) == "これはPythonistaの本です"
    assert not any(c.endswith("Py") or c.startswith("thon") for c in chunks)


_UNSPACED_WORDS = st.sampled_from(
    "こんにちは 。 、 ！ ？ 「 」 東京 天気 你好 ， 我们 ! ? Python 3.5 です".split()  # noqa: SIM905 - reads best as words
)


@st.composite
def unspaced_texts_and_splits(draw):
    text = "".join(draw(st.lists(_UNSPACED_WORDS, min_size=0, max_size=60)))
    cuts = sorted(draw(st.sets(st.integers(0, max(0, len(text))), max_size=20)))
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return text, deltas


@settings(max_examples=300, deadline=None)
@given(unspaced_texts_and_splits())
def test_unspaced_text_comes_back_whole_whatever_the_split(case):
    text, deltas = case
    g = SentenceGrouper(max_chars=30)
    chunks = [c for d in deltas for c in g.feed(d)] + g.flush()
    assert "".join(chunks) == speakable(text)
    whole = SentenceGrouper(max_chars=30)
    assert chunks == whole.feed(text) + whole.flush()


def test_code_blocks_and_web_addresses_are_not_spoken():
    text = "Use this:\n```python\nprint('hi')\nx = 1\n```\nThen run it. Details at https://example.org/a?b=1 today.\n"
    assert group(text, [text[i : i + 7] for i in range(0, len(text), 7)]) == [
        "Use this:",
        "Then run it.",
        "Details at today.",
    ]
    assert speakable("See (www.example.com) for more.") == "See for more."


def test_a_list_of_dashes_is_said_as_sentences():
    text = "You can:\n- boil it\n- fry it\n- poach it"
    assert group(text, [text]) == ["You can:", "boil it.", "fry it.", "poach it"]
