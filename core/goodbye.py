"""Goodbyes and the words that come before them (pure).

People end a conversation in a few words, often in two breaths: "Thank you, goodbye.", "OK, bye
then", "Alright. Take care." Three rules read them, with each language's lists
(:class:`core.language.Language` ``goodbyes`` and ``closings``):

- :func:`is_closing`: an utterance of closing words only ("Thank you", "OK", "Alright, thanks")
  may be followed by a goodbye after a breath, so its pause is given longer before the turn
  ends (``EndOfTurnConfig.closing_wait_s``): "Thank you, goodbye." stays one turn.
- :func:`says_goodbye`: a goodbye said over the reply takes the floor however short it is
  (``core/barge_in.py``), where a single other word is a backchannel.
- :func:`is_goodbye`: a turn that is a goodbye and nothing more (closing words allowed) ends
  the conversation once its reply has been said, where the agent allows it
  (``SessionConfig.end_on_goodbye``).

A phrase is matched on whole words where words are spaced, and on characters where they are not
(Japanese, Chinese).
"""

from __future__ import annotations

from core.language import ENGLISH, Language
from core.words import letters, words


def _rest(text: str, phrases: frozenset[str], language: Language) -> tuple[str, bool]:
    """``text`` with every one of ``phrases`` taken out (its words, or its characters where words are
    not spaced), and whether any was."""
    if not language.spaced:
        said = letters(text)
        found = False
        for phrase in sorted(phrases, key=len, reverse=True):
            if phrase in said:
                said, found = said.replace(phrase, ""), True
        return said, found
    said = words(text, numbers=False)
    out: list[str] = []
    found = False
    i = 0
    longest = sorted((p.split() for p in phrases), key=len, reverse=True)
    while i < len(said):
        match = next((p for p in longest if said[i : i + len(p)] == p), None)
        if match is None:
            out.append(said[i])
            i += 1
        else:
            found = True
            i += len(match)
    return " ".join(out), found


def says_goodbye(text: str, language: Language = ENGLISH) -> bool:
    """Whether ``text`` holds a goodbye ("bye", "see you", "さようなら")."""
    return _rest(text, language.goodbyes, language)[1]


def is_goodbye(text: str, language: Language = ENGLISH) -> bool:
    """Whether ``text`` is a goodbye and nothing more: a goodbye, and closing words around it."""
    rest, found = _rest(text, language.goodbyes, language)
    return found and not _rest(rest, language.closings, language)[0]


def is_closing(text: str, language: Language = ENGLISH) -> bool:
    """Whether ``text`` is closing words only ("Thank you", "OK", "Alright, thanks"): words a
    goodbye often follows after a breath."""
    rest, found = _rest(text, language.closings, language)
    return found and not rest
