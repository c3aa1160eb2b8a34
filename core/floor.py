"""Who holds the floor: the state the conversation's concerns share.

The conversation's rules live in modules of their own (the person's turn, :mod:`core.answer`;
speech over a reply, :mod:`core.over_reply`; the reply's course, :mod:`core.reply_flow`),
and every one of them reads and changes the same few facts: the state, whether the person is
speaking and in which utterance, the reply in flight and whether it is held, the finals not yet
answered. They are kept here, once, rather than copied into each concern or read back from the
conversation, so that each rule can be read with the state it changes beside it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from core.history import History
from core.language import ConversationLanguage
from core.reply import Hold, Reply


class State(enum.Enum):
    LISTENING = "listening"
    USER_SPEAKING = "user_speaking"
    THINKING = "thinking"
    SPEAKING = "speaking"
    PAUSED = "paused"  # a reply held while the person's speech is judged


@dataclass
class Floor:
    """The turn-taking state of one conversation."""

    history: History
    state: State = State.LISTENING
    user_speaking: bool = False
    utterance: int = 0  # the number of the last utterance the VAD confirmed (0: none yet)
    onset: float = 0.0  # where it began
    response: Reply | None = None  # the reply in flight (not a speculative one)
    hold: Hold | None = None  # the reply paused while speech over it is judged
    waiting: list[tuple[int, str, float, float]] = field(default_factory=list)  # finals not yet answered
    transcribing: set[int] = field(default_factory=set)  # utterances whose final is on its way
    language: ConversationLanguage = field(default_factory=ConversationLanguage)  # what the person speaks

    def over_reply(self) -> bool:
        """The current utterance is speech over the reply (it holds it)."""
        hold = self.hold
        return hold is not None and hold.utterance == self.utterance

    def idle_state(self) -> State:
        """The state once no reply is in flight."""
        if self.user_speaking:
            return State.USER_SPEAKING
        return State.THINKING if self.transcribing else State.LISTENING
