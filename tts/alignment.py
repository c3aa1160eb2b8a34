"""Word end times from piper's per-phoneme sample counts (pure).

piper gives the number of samples for each phoneme, the pauses included; its
phonetic words are separated by ``" "`` phonemes. When espeak's word count
matches the text's, each text word ends where its phonetic word ends. espeak
sometimes fuses short words ("on the") or splits one (numbers), so when the
counts differ the voiced span is shared out in proportion to the words'
lengths in characters.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.ledger import Word

_SILENT = {"^", "$", "_", " ", ",", ".", "!", "?", ";", ":", "—", "…"}


def word_ends(words: Sequence[str], phonemes: Sequence[str], samples: Sequence[int], n_total: int) -> list[Word]:
    """End sample of each of ``words``, in a chunk of ``n_total`` samples.

    ``phonemes`` and ``samples`` are piper's alignment (same length); they may
    be empty when the voice gives no alignment, and then the whole chunk is
    shared out by characters.
    """
    if not words:
        return []
    ends: list[int] = []
    voiced_start = voiced_end = None
    pos = 0
    in_word = False
    for ph, n in zip(phonemes, samples, strict=False):
        if ph == " ":
            if in_word:
                ends.append(pos)
            in_word = False
        elif ph not in _SILENT:
            in_word = True
            if voiced_start is None:
                voiced_start = pos
            voiced_end = pos + n
        pos += n
    if in_word and voiced_end is not None:
        ends.append(voiced_end)
    if len(ends) == len(words):
        return [Word(w, min(e, n_total)) for w, e in zip(words, ends, strict=True)]
    start = voiced_start or 0
    stop = voiced_end if voiced_end is not None else n_total
    return shared_ends(words, [len(w) + 1 for w in words], start, stop, n_total)


def shared_ends(units: Sequence[str], weights: Sequence[float], start: int, stop: int, n_total: int) -> list[Word]:
    """End sample of each of ``units`` when the voiced span ``start``..``stop`` is shared out among
    them in proportion to ``weights`` (a voice that gives no alignment, or one that does not match)."""
    total = sum(weights) or 1
    out: list[Word] = []
    acc = 0.0
    for unit, weight in zip(units, weights, strict=True):
        acc += weight
        out.append(Word(unit, min(n_total, start + round((stop - start) * acc / total))))
    return out


def weighted_ends(
    units: Sequence[str], weights: Sequence[float], phonemes: Sequence[str], samples: Sequence[int], n_total: int
) -> list[Word]:
    """End sample of each of ``units`` when their phonemes cannot be told apart (Japanese read by
    the word, its characters timed by their morae): each unit ends at the voiced phoneme reached
    by its share of ``weights``, and that phoneme's end comes from the voice's durations, so the
    pauses and the pace of the speech are kept."""
    ends: list[int] = []  # end sample of each voiced phoneme
    pos = 0
    for ph, n in zip(phonemes, samples, strict=False):
        pos += n
        if ph not in _SILENT:
            ends.append(pos)
    if not ends:
        return shared_ends(units, weights, 0, n_total, n_total)
    total = sum(weights) or 1
    out: list[Word] = []
    acc = 0.0
    for unit, weight in zip(units, weights, strict=True):
        acc += weight
        k = max(1, round(len(ends) * acc / total))
        out.append(Word(unit, min(n_total, ends[k - 1])))
    return out
