"""Keys of a phone's keypad gathered into one turn (core/keypad.py)."""

from __future__ import annotations

import pytest

from core.keypad import Keypad, KeypadConfig, keyed_turn


def test_the_keys_are_one_entry_at_the_end_key_or_after_a_pause():
    pad = Keypad(KeypadConfig(pause_s=2.0))
    assert [pad.pressed(k, t) for k, t in (("4", 0.0), ("5", 0.5), ("1", 1.0))] == [None, None, None]
    assert pad.due(2.9) is None and pad.keying  # 1.9 s since the last key
    assert pad.pressed("2", 3.0) is None
    assert pad.due(5.0) == "4512" and not pad.keying
    assert pad.due(9.0) is None  # nothing more
    for k in "1007":
        pad.pressed(k, 10.0)
    assert pad.pressed("#", 10.2) == "1007"  # at once


def test_the_end_key_alone_and_the_star_are_keys_of_their_own():
    pad = Keypad()
    assert pad.pressed("#", 0.0) == "#"
    pad.pressed("*", 1.0)
    assert pad.due(3.0) == "*"


def test_a_key_no_keypad_has_is_refused():
    with pytest.raises(ValueError, match="not a key"):
        Keypad().pressed("x", 0.0)


def test_the_turn_reads_the_keys_one_by_one():
    assert keyed_turn("4512") == "(Keyed on the phone's keypad: 4 5 1 2)"
