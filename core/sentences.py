"""Sentence grouping: streamed LLM text deltas in, speakable chunks out.

The grouper never touches I/O. Feed it deltas with :meth:`SentenceGrouper.feed`
and it returns the chunks that became complete; :meth:`SentenceGrouper.flush`
returns the rest at the end of the reply.

How a cut is chosen:

* A chunk ends after ``.``, ``!``, ``?`` or an ellipsis, with any closing
  quotes or brackets, followed by whitespace; after ``。！？`` (and ``!``
  ``?`` in text that does not space its words: Japanese, Chinese) where
  they stand. A period not followed by
  whitespace (``3.50``, ``example.com``, ``a@b.org``) is never a boundary, nor
  is a colon (``10:30``).
* A period after a known abbreviation (``Dr.``, ``e.g.``), an initial (``J.``)
  or a list marker at the start of a line (``1.``) is not a boundary. A few
  abbreviations that often end sentences (``etc.``, ``U.S.``, ``a.m.``) and
  ellipses are boundaries only when the next word starts with a capital, so for
  those the grouper waits for the next word.
* A newline ends a chunk (list items, paragraphs).
* The first chunk of a reply may end at a clause boundary (``,`` ``;`` ``:``
  a dash, ``、`` ``，``) once it holds a few words (two characters of an
  unspaced script count as one), or, once it holds a few more, before
  a conjunction (``and``, ``but``, ``because``, ``which`` ...): a breath
  group, so that speech starts early without waiting for a long sentence.
* A chunk that grows past ``max_chars`` without any boundary is cut at the
  last whitespace: never inside a word (in unspaced text, between two
  characters).
* No cut is made inside an unclosed ``[`` or ``(``, so that a markdown link is
  never split.

Raw chunks partition the streamed text exactly; each is then cleaned of what is
not spoken (markdown markers, list numbers, link targets, web addresses, emoji) by
:func:`speakable`, and whitespace is collapsed. Chunks that clean to nothing are
dropped, and so is a fenced code block (its lines, from one ````` line to the
next): code is for the eye. A line that ends without a full stop (a list item, a
heading) is said as a sentence: a period is added, so the voice falls and pauses.
"""

from __future__ import annotations

import re

from core.spoken_math import spoken_math
from core.words import FULL_WIDTH_CLOSERS, FULL_WIDTH_MARKS, unspaced

# Abbreviations after which a period never ends a sentence (lower-cased, no
# trailing period).
_NEVER_FINAL = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "sr",
    "jr",
    "st",
    "mt",
    "vs",
    "no",
    "e.g",
    "i.e",
    "cf",
    "approx",
    "dept",
    "fig",
    "inc",
    "ltd",
    "co",
    "gen",
    "gov",
    "sen",
    "rep",
    "capt",
    "lt",
    "sgt",
    "col",
    "ft",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
}
# Abbreviations that end a sentence only when a capitalised word follows.
_MAYBE_FINAL = {"etc", "u.s", "u.k", "u.s.a", "a.m", "p.m", "e.u", "ph.d", "al"}

TERMINATORS = ".!?…。！？"
CLOSERS = "\"'”’)]»" + FULL_WIDTH_CLOSERS
_CLAUSE = ",;:—–、，；："
# Full-width marks end a sentence or clause where they stand: the text after them is not spaced.
_FULL_WIDTH = FULL_WIDTH_MARKS
# Words that open a phrase: a first chunk may end before one of them.
_PHRASE_STARTERS = frozenset(
    "and but or so because which who whom whose when while where if although though since until unless whether".split()  # noqa: SIM905 - a word list reads best as words
)

_EMOJI = re.compile("[\U0001f000-\U0001faff\U0001f1e6-\U0001f1ff\u2600-\u27bf\u2b00-\u2bff\ufe0f\u200d\u20e3]")
_LINE_MARKUP = re.compile(r"(?m)^[ \t]*(?:#{1,6}[ \t]+|>[ \t]*|[-*+•][ \t]+|\d{1,2}[.)][ \t]+(?=\D))")
# A web address is read letter by letter or not at all: it is not said (the words around it are).
_URL = re.compile(r"\(?(?:https?://|www\.)[^\s)]+\)?")
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)")
_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\s]*\)")
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_+|_+(?![A-Za-z0-9])")
_WHITESPACE = re.compile(r"\s+")
# A tool call written out as text (a model asked without tools that calls one all the same, in its
# template's format), or any JSON object a small model writes after a tool's result: never spoken.
# From ``{"key":`` to the chunk's end (or the tag that closes a call).
_CALL_TEXT = re.compile(r'</?tool_\w*>|\btool_(?:call|response)\b|\{\s*"[^"\n]*"\s*:.*?(?=</tool_\w*>|\Z)', re.S)


def speakable(raw: str, at_line_start: bool = True) -> str:
    """Remove what is written but not spoken, and collapse whitespace.

    ``at_line_start`` tells whether ``raw`` begins a line of the whole text,
    so that a chunk is cleaned exactly as it would be inside the whole text.
    """
    # A NUL stands for "the text goes on before this point" without being a
    # line start or a word character; it is removed again below.
    text = ("\n" if at_line_start else "\0") + raw
    text = _CALL_TEXT.sub("", text)
    text = spoken_math(text)
    text = _LINE_MARKUP.sub("", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("", text)
    text = text.replace("*", "").replace("`", "").replace("~~", "")
    text = _UNDERSCORE.sub("", text)
    text = _EMOJI.sub("", text)
    text = text.replace("\0", "")
    return _WHITESPACE.sub(" ", text).strip()


class SentenceGrouper:
    """Groups streamed text into chunks that can be spoken one by one."""

    def __init__(self, first_clause_min_words: int = 4, max_chars: int = 300, first_phrase_min_words: int = 5) -> None:
        self.first_clause_min_words = first_clause_min_words
        self.first_phrase_min_words = first_phrase_min_words
        self.max_chars = max_chars
        self._buf = ""
        self._line_start = True  # whether _buf starts a line of the whole text
        self._emitted = 0
        self._in_code = False  # inside a fenced code block: nothing is said until it closes

    def feed(self, delta: str) -> list[str]:
        """Add a delta; return the chunks it completed (maybe none)."""
        self._buf += delta
        chunks: list[str] = []
        while (cut := self._find_cut(final=False)) is not None:
            self._emit(cut, chunks)
        return chunks

    def flush(self) -> list[str]:
        """End of the reply: return whatever is left, as chunks."""
        chunks: list[str] = []
        while (cut := self._find_cut(final=True)) is not None:
            self._emit(cut, chunks)
        if self._buf:
            self._emit(len(self._buf), chunks)
        return chunks

    def reset(self) -> None:
        """Forget everything (a cancelled reply)."""
        self._buf = ""
        self._line_start = True
        self._emitted = 0
        self._in_code = False

    # -- internals ---------------------------------------------------------

    def _emit(self, cut: int, out: list[str]) -> None:
        raw, self._buf = self._buf[:cut], self._buf[cut:]
        at_line_start = self._line_start
        self._line_start = raw.endswith("\n") or (at_line_start and not raw.strip(" \t"))
        if at_line_start and _FENCE.match(raw):
            self._in_code = not self._in_code
            return
        if self._in_code:
            return
        text = speakable(raw, at_line_start)
        if text and raw.rstrip(" \t").endswith("\n") and not text.endswith(tuple(TERMINATORS + CLOSERS + _CLAUSE)):
            text += "."  # a list item or a heading, said as a sentence
        if text:
            out.append(text)
            self._emitted += 1

    def _find_cut(self, final: bool) -> int | None:
        """Index just after the whitespace that ends the next chunk, if known (after the mark
        itself where the text is not spaced)."""
        buf = self._buf
        depth = 0  # unclosed [ ( or { : never cut inside a link, or a JSON object (never spoken whole)
        words = 0
        characters = 0  # of scripts that do not space their words: two count as a word
        last_space = -1
        i = 0
        n = len(buf)
        while i < n:
            if i == self.max_chars and (cut := self._cut_long(last_space)) is not None:
                return cut  # as far as max_chars, whatever comes after: the same cut for any split
            c = buf[i]
            if c in "[({":
                depth += 1
            elif c in "])}" and depth:
                depth -= 1
            if unspaced(c):
                characters += 1
            if c.isspace():
                if i > 0 and not buf[i - 1].isspace():
                    words += 1
                last_space = i
                if c == "\n" and depth == 0 and buf[:i].strip():
                    return self._after_whitespace(i)
                if self._emitted == 0 and depth == 0 and words >= self.first_phrase_min_words:
                    j = self._after_whitespace(i)
                    k = j
                    while k < n and not buf[k].isspace():
                        k += 1
                    # Only a whole word decides (at the end of the text, the last one is whole).
                    if (k < n or final) and buf[j:k].lower() in _PHRASE_STARTERS:
                        return j
            elif c in TERMINATORS and depth == 0:
                j = i + 1
                while j < n and (buf[j] in TERMINATORS or buf[j] in CLOSERS):
                    j += 1
                if j == n:
                    if not final:
                        return None  # the next delta decides
                    i = j
                    continue
                if buf[j].isspace():
                    verdict = self._sentence_end(i, j, final)
                    if verdict is None:
                        return None
                    if verdict:
                        return self._after_whitespace(j)
                elif c in _FULL_WIDTH or unspaced(buf[j]) or (i > 0 and unspaced(buf[i - 1])):
                    return j  # "。" or "?" in unspaced text: the sentence ends, no space follows
                i = j
                continue
            elif (
                c in _CLAUSE
                and depth == 0
                and self._emitted == 0
                and words + 1 + characters / 2 >= self.first_clause_min_words
                and i + 1 < n
                and (buf[i + 1].isspace() or c in _FULL_WIDTH)
            ):
                return self._after_whitespace(i + 1)
            i += 1
        return None

    def _cut_long(self, last_space: int) -> int | None:
        """Where to cut a chunk that reached ``max_chars`` with no boundary: after its last
        whitespace, else between two characters of unspaced text; None: inside one long word."""
        if last_space > 0:
            return self._after_whitespace(last_space)
        buf = self._buf
        return next((k for k in range(self.max_chars, 0, -1) if unspaced(buf[k - 1]) or unspaced(buf[k])), None)

    def _after_whitespace(self, i: int) -> int:
        """Cut after the whitespace run that starts at ``i``."""
        j = i
        while j < len(self._buf) and self._buf[j].isspace():
            j += 1
        return j

    def _sentence_end(self, term: int, after: int, final: bool) -> bool | None:
        """Whether the terminator at ``term`` ends a sentence.

        ``after`` is the whitespace just after it (and any closers). None
        means "cannot tell before the next word arrives".
        """
        buf = self._buf
        start = term
        while start > 0 and not buf[start - 1].isspace():
            start -= 1
        word = buf[start:term]
        bare = word.lstrip("\"'“‘([«*_").lower()
        mark = buf[term:after]
        ellipsis = mark.startswith("...") or mark.startswith("…")
        if mark[0] == "." and not ellipsis:
            if bare in _NEVER_FINAL:
                return False
            if len(bare) == 1 and bare.isalpha():
                return False  # an initial: "J. K. Rowling"
            if bare.isdigit() and self._at_line_start(start):
                return False  # a list marker: "1. First"
            if bare not in _MAYBE_FINAL:
                return True
        elif not ellipsis:
            return True  # ! or ?
        # etc. / U.S. / ellipsis: decided by the next word's capital.
        k = after
        while k < len(buf) and buf[k].isspace():
            k += 1
        if k == len(buf):
            return True if final else None
        nxt = buf[k]
        return nxt.isupper() or nxt.isdigit() or nxt in "\"'“‘(["

    def _at_line_start(self, i: int) -> bool:
        j = i
        while j > 0 and self._buf[j - 1] in " \t":
            j -= 1
        if j == 0:
            return self._line_start
        return self._buf[j - 1] == "\n"
