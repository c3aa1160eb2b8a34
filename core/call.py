"""How a call is held (no I/O): the greeting, and what is done when the line goes quiet.

A phone call is not a page someone chose to open: the assistant speaks first
(the greeting), and a caller who says nothing is asked whether they are still
there, and hung up on after being asked ``prompts`` times. :class:`IdleWatch`
decides when, from what the session tells it once a block: whether anything is
going on (the caller speaking, a reply being made or played, a tool running)
and whether the caller spoke. Quiet is counted from the last moment something
was going on, so the wait starts once a reply has been heard to its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class IdlePolicy:
    after_s: float = 8.0  # quiet on the line before the caller is asked (or hung up on)
    prompt: str = "Are you still there?"
    goodbye: str = "I can't hear anyone, so I'll hang up now. Goodbye."
    prompts: int = 1  # times the caller is asked before the goodbye


@dataclass(frozen=True)
class CallConfig:
    """What a call does without being asked (``--call-greeting``, ``--call-idle-s``...)."""

    greeting: str | None = "Hello, thanks for calling. How can I help you?"
    idle: IdlePolicy | None = IdlePolicy()  # None: wait for the caller as long as the line is open


class IdleAction(Enum):
    PROMPT = "prompt"  # say IdlePolicy.prompt
    HANG_UP = "hang_up"  # say IdlePolicy.goodbye, then end the call


class IdleWatch:
    def __init__(self, policy: IdlePolicy) -> None:
        self.policy = policy
        self.prompted = 0  # prompts said since the caller last spoke
        self.hanging_up = False  # the goodbye was said; the call ends once it has been played
        self._quiet_since: float | None = None

    def check(self, t: float, busy: bool, caller_speaking: bool) -> IdleAction | None:
        """Called once a block at ``t``: what to do about the quiet, if anything."""
        if caller_speaking:
            # The caller is back: the count starts over, and a goodbye under way no longer ends the call.
            self.prompted = 0
            self.hanging_up = False
        if busy or caller_speaking:
            self._quiet_since = None
            return None
        if self._quiet_since is None:
            self._quiet_since = t
            return None
        if self.hanging_up or t - self._quiet_since < self.policy.after_s - 1e-9:
            return None
        self._quiet_since = None
        if self.prompted < self.policy.prompts:
            self.prompted += 1
            return IdleAction.PROMPT
        self.hanging_up = True
        return IdleAction.HANG_UP
