"""Playback accounting: which words of the reply has the person heard?

Each synthesized chunk is recorded with its text, its length in output samples
and where each of its words ends (from the TTS alignment). The transport tells
the ledger how many samples were actually played; the ledger answers with the
words that were heard. No I/O, no clock: sample counts in, text out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from core.words import join_words


@dataclass(frozen=True)
class Word:
    """A word of a chunk and the sample (within the chunk) where it ends."""

    text: str
    end: int


@dataclass
class LedgerChunk:
    text: str
    n_samples: int
    words: list[Word]
    offset: int  # first sample of the chunk in the reply's output stream


@dataclass
class PlaybackLedger:
    """The in-flight assistant reply, chunk by chunk, and what was played."""

    chunks: list[LedgerChunk] = field(default_factory=list)
    played: int = 0

    @property
    def queued(self) -> int:
        """Samples synthesized for this reply so far."""
        return sum(c.n_samples for c in self.chunks)

    @property
    def all_played(self) -> bool:
        return self.played >= self.queued

    def add_chunk(self, text: str, n_samples: int, words: list[Word]) -> LedgerChunk:
        chunk = LedgerChunk(text, n_samples, words, offset=self.queued)
        self.chunks.append(chunk)
        return chunk

    def advance(self, n_samples: int) -> None:
        """``n_samples`` more of the reply came out of the speaker."""
        self.played = min(self.queued, self.played + n_samples)

    def heard_words(self, played: int | None = None) -> list[str]:
        """Words whose audio had mostly been played by sample ``played``.

        A word counts as heard once more than half of it was played: the
        person recognises a word before its last phoneme ends.
        """
        pos = self.played if played is None else played
        heard: list[str] = []
        for text, start, end in self._spans():
            if (pos >= (start + end) / 2 and end > start) or pos >= end:
                heard.append(text)
            else:
                return heard
        return heard

    def heard_text(self, played: int | None = None) -> str:
        """The words heard by sample ``played``, as text (Japanese and Chinese characters unspaced)."""
        return join_words(self.heard_words(played))

    def words_played_between(self, start: int, end: int) -> str:
        """The words any of whose audio was played between samples ``start`` and ``end``, as text."""
        return join_words([text for text, begin, stop in self._spans() if stop > start and begin < end])

    def _spans(self) -> Iterator[tuple[str, int, int]]:
        """Each word of the reply, in order, with its first and last sample in the output stream
        (a word begins where the one before it in its chunk ended)."""
        for chunk in self.chunks:
            begin = chunk.offset
            for word in chunk.words:
                stop = chunk.offset + word.end
                yield word.text, begin, stop
                begin = stop

    def spoken_text(self) -> str:
        """Everything synthesized for this reply, chunk texts joined."""
        return join_words([c.text for c in self.chunks])
