"""A hook both example agents use (``on_user_turn: greeted_back`` in their greeting steps).

Given a bare "Hi." in a greeting step, the 0.5B model called the handover's function and put the
caller through; a turn that is only a greeting is greeted back here, without the model.
"""

from __future__ import annotations

import re

from voice.agent import Say

__all__ = ["greeted_back"]

GREETINGS = {"hi", "hello", "hey", "hi there", "hello there", "good morning", "good afternoon", "good evening"}


def greeted_back(text: str) -> Say | None:
    """The caller's turn in a greeting step: one that is only a greeting ("Hi.", "Hello there!") is
    greeted back, without the model; anything else goes on as usual."""
    words = " ".join(re.findall(r"[a-z']+", text.lower()))
    return Say("Hello! How can I help?") if words in GREETINGS else None
