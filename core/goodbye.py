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
from core.phrases import holds_phrase, without_phrases


def says_goodbye(text: str, language: Language = ENGLISH) -> bool:
    """Whether ``text`` holds a goodbye ("bye", "see you", "さようなら")."""
    return holds_phrase(text, language.goodbyes, language)


def is_goodbye(text: str, language: Language = ENGLISH) -> bool:
    """Whether ``text`` is a goodbye and nothing more: a goodbye, and closing words around it."""
    rest, found = without_phrases(text, language.goodbyes, language)
    return found and not without_phrases(rest, language.closings, language)[0]


def is_closing(text: str, language: Language = ENGLISH) -> bool:
    """Whether ``text`` is closing words only ("Thank you", "OK", "Alright, thanks"): words a
    goodbye often follows after a breath."""
    rest, found = without_phrases(text, language.closings, language)
    return found and not rest
