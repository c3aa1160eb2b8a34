"""The conversation so far: finalized turns only.

A user turn is added at the ASR final, an assistant turn when its playback
ended (or, later, when it was cut). What is still in flight lives in the
playback ledger, never here, so nothing partial can be stored as final.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant"]

# An assistant turn the person cut off is sent to the LLM as the words they
# heard followed by this marker, so that the model knows it was interrupted
# there (and neither repeats nor assumes the unheard rest).
INTERRUPTED_MARKER = " [interrupted by the user]"


@dataclass
class Turn:
    role: Role
    text: str
    t_start: float | None = None  # seconds on the session's timeline
    t_end: float | None = None
    generated_text: str | None = None  # assistant: everything the LLM produced
    interrupted: bool = False
    response: int | None = None  # assistant: the reply's id in its session
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        d.update(extra)
        return {k: v for k, v in d.items() if (v is not None and v is not False) or k == "text"}


@dataclass
class History:
    turns: list[Turn] = field(default_factory=list)

    def add(self, turn: Turn) -> Turn:
        if not turn.text.strip():
            raise ValueError("an empty turn is not stored")
        self.turns.append(turn)
        return turn

    def remove(self, turn: Turn) -> None:
        """Take back a turn: only for an assistant turn the client says was never heard."""
        self.turns = [t for t in self.turns if t is not turn]

    def messages(self, system_prompt: str | None) -> list[dict[str, str]]:
        """Chat messages for the next LLM request."""
        out: list[dict[str, str]] = []
        if system_prompt:
            out.append({"role": "system", "content": system_prompt})
        for t in self.turns:
            content = t.text + INTERRUPTED_MARKER if t.interrupted else t.text
            out.append({"role": t.role, "content": content})
        return out

    def to_json(self) -> list[dict[str, Any]]:
        return [t.to_json() for t in self.turns]
