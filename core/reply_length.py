"""How long a spoken reply runs (pure).

Read on a page, a paragraph is skimmed; said aloud, every sentence is waited through, and the
person cannot interrupt a list they cannot see the end of. Small models run on: asked how to boil
an egg, SmolLM2-135M went on until its token cap. So a reply is said for ``max_sentences``
sentences and no more, unless the person asked for detail (the language's ``detail_words``:
"explain", "tell me more", "step by step"); the rest is never synthesized, so it is neither
heard nor stored. A reply cut by the token cap in the middle of a sentence does not say that
sentence's start ("and then the"), once a whole sentence has been said.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.language import Language
from core.phrases import holds_phrase
from core.sentences import CLOSERS, TERMINATORS


@dataclass(frozen=True)
class ReplyLength:
    max_sentences: int | None = 4  # said of a reply nobody asked detail of (None: all of it)
    # The LLM's token cap: a reply that reached it was cut, and its unfinished sentence is not said
    # (None: unknown, every word said). Set by the shell from the engine's generation settings.
    token_cap: int | None = None

    def sentences_for(self, user_text: str, language: Language) -> int | None:
        """How many sentences the reply to ``user_text`` may say (None: no limit)."""
        if self.max_sentences is None or asks_detail(user_text, language):
            return None
        return self.max_sentences


def asks_detail(user_text: str, language: Language) -> bool:
    """Whether the person asked for more than a short answer, in the words of their language."""
    return holds_phrase(user_text, language.detail_words, language)


def ends_sentence(chunk: str) -> bool:
    """Whether a chunk the grouper cut ends a sentence (not a clause or a breath group)."""
    return chunk.rstrip(CLOSERS + " ").endswith(tuple(TERMINATORS))
