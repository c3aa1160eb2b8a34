"""LaTeX math said as words (core/spoken_math.py), as the sentence grouper cleans a reply."""

from __future__ import annotations

import pytest

from core.sentences import SentenceGrouper, speakable


@pytest.mark.parametrize(
    ("written", "said"),
    [
        (r"\( \frac{15}{100} \times 80 = 12 \)", "15 over 100 times 80 = 12"),
        (r"It is $\sqrt{16} = 4$, about \pi.", "It is the square root of 16 = 4, about pi."),
        (r"\[ 7 \cdot 8 = 56 \]", "7 times 8 = 56"),
        (r"That is 50\% off.", "That is 50 percent off."),
        # Not math: amounts and paths are said as they are written.
        ("It costs $5 or $6.", "It costs $5 or $6."),
        (r"Open C:\Users\me first.", r"Open C:\Users\me first."),
    ],
)
def test_math_is_said_as_words_and_nothing_else_is_touched(written, said):
    assert speakable(written) == said


def test_a_streamed_reply_with_inline_math_is_cut_into_sentences_without_its_markup():
    grouper, chunks = SentenceGrouper(), []
    for ch in r"The calculation is easy: \( \frac{15}{100} \times 80 = 12 \). So it is 12.":
        chunks += grouper.feed(ch)
    chunks += grouper.flush()
    assert chunks == ["The calculation is easy:", "15 over 100 times 80 = 12.", "So it is 12."]
