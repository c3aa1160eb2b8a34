"""LocalAgreement: partial hypotheses that do not flicker.

Whisper re-decodes the growing utterance on each partial pass and the tail of
its hypothesis changes from pass to pass. A word is committed (stable) once
two consecutive hypotheses agree on it and on everything before it; committed
words are never taken back within the utterance.
"""

from __future__ import annotations

import re

_NORM = re.compile(r"[^\w']+")


def _key(word: str) -> str:
    return _NORM.sub("", word.lower())


def same_words(a: str, b: str) -> bool:
    """Whether two transcripts say the same words, case and punctuation aside
    ("apologized, Whitmore." and "apologized Whitmore")."""
    return [k for k in map(_key, a.split()) if k] == [k for k in map(_key, b.split()) if k]


class LocalAgreement:
    def __init__(self) -> None:
        self.committed: list[str] = []
        self._previous: list[str] = []

    def update(self, hypothesis: str) -> tuple[str, str]:
        """Feed a new hypothesis; return (stable text, unstable tail)."""
        words = hypothesis.split()
        n = len(self.committed)
        # Only extend the commitment when the new hypothesis still agrees with it.
        if [_key(w) for w in words[:n]] == [_key(w) for w in self.committed]:
            prev = self._previous
            k = n
            while k < len(words) and k < len(prev) and _key(words[k]) == _key(prev[k]):
                k += 1
            self.committed.extend(words[n:k])
            tail = words[len(self.committed) :]
        else:
            tail = words[n:] if len(words) > n else []
        self._previous = words
        return " ".join(self.committed), " ".join(tail)
