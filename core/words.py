"""Words of a transcript, as the turn-taking rules count them: one tokenizer.

End of turn (``end_of_turn.trails_off``: the last words, continuation words and numbers) and
the barge-in checks (``barge_in.BargeInPolicy``: stop words, backchannels, echoes of the reply)
read a transcript as lower-case words of letters and apostrophes. They differ in two ways,
each kept as it was decided (issue 31 changed no rule):

* ``numbers``: digits are word letters ("555 12" is two number words to end of turn); the
  barge-in checks do not count them (Whisper's digits over the reply count for nothing);
* ``compounds``: hyphenated words are one word ("uh-huh" is one backchannel); end of turn reads
  their parts ("twenty-one": two number words, so a dictated number trails off).

A word is never split elsewhere than at a hyphen, and its parts are exactly the words read
without ``compounds``.
"""

from __future__ import annotations

import re


def _pattern(numbers: bool, compounds: bool) -> re.Pattern[str]:
    letter = "[a-z0-9']" if numbers else "[a-z']"
    return re.compile(f"{letter}+(?:-{letter}+)*" if compounds else f"{letter}+")


_PATTERNS = {
    (numbers, compounds): _pattern(numbers, compounds) for numbers in (True, False) for compounds in (True, False)
}


def words(text: str, *, numbers: bool = True, compounds: bool = True) -> list[str]:
    """The words of ``text``, lower-cased, punctuation dropped (see the module's docstring)."""
    return _PATTERNS[numbers, compounds].findall(text.lower())
