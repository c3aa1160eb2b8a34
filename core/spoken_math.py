"""LaTeX math said as words (pure): a small model asked a sum writes ``\\( \\frac{15}{100} \\times 80 = 12 \\)``.

Qwen2.5-Coder-0.5B answered "What's fifteen percent of eighty?" so (``docs/bench/answers.md``): read
as written, the voice says "backslash frac". The delimiters go, a fraction is "a over b", the
operators are their words, and a command that only sets type (``\\text``, ``\\left``) is dropped, its
argument kept. A backslash that begins no LaTeX command (a Windows path) is left as it is.
"""

from __future__ import annotations

import re

_DELIMITERS = re.compile(r"\\[()\[\]]|\$\$")
# "$...$" only around a command: "$5" and "$5 or $6" are amounts, said as such.
_INLINE = re.compile(r"\$([^$\n]*\\[A-Za-z][^$\n]*)\$")
_FRACTION = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_ROOT = re.compile(r"\\sqrt\s*\{([^{}]*)\}")
_WORDS = {
    "times": " times ",
    "cdot": " times ",
    "div": " divided by ",
    "pm": " plus or minus ",
    "approx": " about ",
    "neq": " is not ",
    "leq": " at most ",
    "geq": " at least ",
    "pi": " pi ",
    "circ": " degrees ",
    "%": " percent ",
}
_TYPESETTING = ("text", "mathrm", "mathbf", "textbf", "left", "right", "quad", "qquad", "displaystyle", ",", ";", "!")
_COMMAND = re.compile(r"\\(" + "|".join(re.escape(c) for c in [*_WORDS, *_TYPESETTING]) + r")(?![A-Za-z])\s*")
_BRACES = re.compile(r"[{}]")
_SPACE_BEFORE_MARK = re.compile(r"\s+([.,!?;:])")
_MATH = re.compile(r"\\[()\[\]]|\$\$|\\(?:[dt]?frac|sqrt)\b|" + _INLINE.pattern + "|" + _COMMAND.pattern)


def has_math(text: str) -> bool:
    return _MATH.search(text) is not None


def spoken_math(text: str) -> str:
    """``text`` with its LaTeX said as words; text with none (:func:`has_math`) is returned as it is."""
    if not has_math(text):
        return text
    text = _INLINE.sub(r" \1 ", text)
    text = _FRACTION.sub(r"\1 over \2", text)
    text = _ROOT.sub(r"the square root of \1", text)
    text = _COMMAND.sub(lambda m: _WORDS.get(m.group(1), ""), text)
    text = _DELIMITERS.sub(" ", text)
    return _SPACE_BEFORE_MARK.sub(r"\1", _BRACES.sub("", text))
