"""Keys pressed on a phone's keypad (DTMF), gathered into one turn (pure).

A caller keys an order number as four presses. Each press a turn of its own would be four
replies to "4", "5", "1" and "2"; so the keys are gathered, and the entry is one turn when the
caller presses ``#`` or stops pressing for ``pause_s``. The turn reads the keys as the caller would
say them, digit by digit, which is what a flow's collecting reads as a number said
(core/collecting.py, spoken_digits): "4512#" on the keypad or "four five one two" aloud fill the
same field.
"""

from __future__ import annotations

from dataclasses import dataclass

KEYS = frozenset("0123456789*#ABCD")
END_KEY = "#"


@dataclass(frozen=True)
class KeypadConfig:
    pause_s: float = 2.0  # no key pressed for this long: the entry is over


class Keypad:
    """The keys of the entry under way, and when it is over."""

    def __init__(self, config: KeypadConfig | None = None) -> None:
        self.config = config or KeypadConfig()
        self._keys: list[str] = []
        self._last_t = 0.0

    def pressed(self, key: str, t: float) -> str | None:
        """Key ``key`` at ``t``: the entry, if this key ended it (``#``; alone, it is the entry)."""
        if key not in KEYS:
            raise ValueError(f"not a key of a phone's keypad: {key!r}")
        if key == END_KEY:
            return self._done() if self._keys else END_KEY
        self._keys.append(key)
        self._last_t = t
        return None

    def due(self, t: float) -> str | None:
        """The entry, once no key has been pressed for ``pause_s`` (None: none, or still under way)."""
        if self._keys and t - self._last_t >= self.config.pause_s:
            return self._done()
        return None

    @property
    def keying(self) -> bool:
        """Keys are being pressed: the entry is not over yet."""
        return bool(self._keys)

    def _done(self) -> str:
        keys, self._keys = "".join(self._keys), []
        return keys


def keyed_turn(keys: str) -> str:
    """The person's turn for an entry: its keys one by one, as they would be read out."""
    return f"(Keyed on the phone's keypad: {' '.join(keys)})"
