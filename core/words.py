"""Words of a transcript, as the turn-taking rules count them: one tokenizer.

End of turn (``end_of_turn.trails_off``: the last words, continuation words and numbers) and
the barge-in checks (``barge_in.BargeInPolicy``: stop words, backchannels, echoes of the reply)
read a transcript as lower-case words of letters (of any script) and apostrophes. They differ in two ways,
each kept as it was decided (issue 31 changed no rule):

* ``numbers``: digits are word letters ("555 12" is two number words to end of turn); the
  barge-in checks do not count them (Whisper's digits over the reply count for nothing);
* ``compounds``: hyphenated words are one word ("uh-huh" is one backchannel); end of turn reads
  their parts ("twenty-one": two number words, so a dictated number trails off).

A word is never split elsewhere than at a hyphen, and its parts are exactly the words read
without ``compounds``. Scripts that do not space their words are read by :func:`letters`
(``core/language.py`` says which).
"""

from __future__ import annotations

import re


def _pattern(numbers: bool, compounds: bool) -> re.Pattern[str]:
    # Letters of any script (not only a-z: "sí", "über"), and the apostrophe ("don't", "d'accord").
    letter = r"(?:[^\W_]|')" if numbers else r"(?:[^\W\d_]|')"
    return re.compile(f"{letter}+(?:-{letter}+)*" if compounds else f"{letter}+")


_PATTERNS = {
    (numbers, compounds): _pattern(numbers, compounds) for numbers in (True, False) for compounds in (True, False)
}
_NOT_LETTERS = re.compile(r"[\W_]+")


def words(text: str, *, numbers: bool = True, compounds: bool = True) -> list[str]:
    """The words of ``text``, lower-cased, punctuation dropped (see the module's docstring)."""
    return _PATTERNS[numbers, compounds].findall(text.lower())


def letters(text: str) -> str:
    """The letters and digits of ``text`` in a row, lower-cased: how a script that does not space
    its words (Japanese, Chinese) is read, character by character."""
    return _NOT_LETTERS.sub("", text.lower())


# Scripts that do not space their words: CJK ideographs, kana, Thai, Lao, Khmer, Myanmar.
_UNSPACED = re.compile(
    "[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]"
)


def unspaced(character: str) -> bool:
    """Whether ``character`` is of a script that does not space its words (Japanese, Chinese, Thai)."""
    return bool(_UNSPACED.match(character))


# Full-width punctuation of unspaced scripts: no space before it (the sentence grouper cuts after it).
FULL_WIDTH_MARKS = "。！？、，；："
FULL_WIDTH_CLOSERS = "」』）】"
FULL_WIDTH_OPENERS = "「『（【"
_CLOSING_MARKS = FULL_WIDTH_MARKS + FULL_WIDTH_CLOSERS
_UNSPACED_MARKS = _CLOSING_MARKS + FULL_WIDTH_OPENERS


def join_words(parts: list[str]) -> str:
    """``parts`` (words, characters, chunks) as one text: a space between them, except where the
    script does not space its words (between two characters of Japanese or Chinese, or before
    their punctuation), so that a reply cut by characters reads as it was written."""
    out = ""
    for part in parts:
        if not part:
            continue
        if out and not (
            (unspaced(out[-1]) or out[-1] in _UNSPACED_MARKS) and (unspaced(part[0]) or part[0] in _UNSPACED_MARKS)
        ):
            out += " "
        out += part
    return out


_UNIT = re.compile(
    "(?:" + _UNSPACED.pattern + r")[^\w\s]*"  # one character of a script without spaces, its punctuation after it
    "|(?:(?!" + _UNSPACED.pattern + r")\S)+"  # a spaced word (or a run of other characters)
)


def spoken_units(text: str) -> list[str]:
    """The units in which speech of ``text`` is timed and heard: its words where words are spaced,
    and each character in Japanese or Chinese (with the punctuation that follows it), so that a
    reply cut short keeps the characters heard. ``join_words`` puts them back together."""
    return _UNIT.findall(text)
