"""Phrases found in what the person said (pure): on whole words where words are spaced, on characters
where they are not (Japanese, Chinese). The goodbyes (core/goodbye.py) and the requests for detail
(core/reply_length.py) are read with it, from each language's lists (core/language.py)."""

from __future__ import annotations

from collections.abc import Iterable

from core.language import Language
from core.words import letters, words


def without_phrases(text: str, phrases: Iterable[str], language: Language, numbers: bool = False) -> tuple[str, bool]:
    """``text`` with every one of ``phrases`` taken out (its words, or its characters where words are
    not spaced), and whether any was; its digits kept only where ``numbers``."""
    if not language.spaced:
        said = letters(text)
        found = False
        for phrase in sorted(map(letters, phrases), key=len, reverse=True):
            if phrase in said:
                said, found = said.replace(phrase, ""), True
        return said, found
    said = words(text, numbers=numbers)
    out: list[str] = []
    found = False
    i = 0
    longest = sorted((words(p, numbers=False) for p in phrases), key=len, reverse=True)
    while i < len(said):
        match = next((p for p in longest if said[i : i + len(p)] == p), None)
        if match is None:
            out.append(said[i])
            i += 1
        else:
            found = True
            i += len(match)
    return " ".join(out), found


def holds_phrase(text: str, phrases: Iterable[str], language: Language) -> bool:
    """Whether ``text`` holds one of ``phrases``."""
    return without_phrases(text, phrases, language)[1]
