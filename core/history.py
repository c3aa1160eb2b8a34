"""The conversation so far: finalized turns only.

A user turn is added at the ASR final, an assistant turn when its playback
ended (or, later, when it was cut), a tool turn when the tool's call has a
result (ok, error, cancelled or timeout: every call here has one). What is
still in flight lives in the playback ledger, never here, so nothing partial
can be stored as final.

A :class:`HistoryListener` hears of every turn added, changed (a finished
reply cut after the fact) and removed: that is how turns are persisted
(``voice.app.store.TurnRecorder``) without the conversation knowing of a store.

``python -m voice.history list|show ID|export ID`` reads the stored
conversations (``voice/history_cli.py``).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

log = logging.getLogger(__name__)

Role = Literal["user", "assistant", "tool"]
ToolStatus = Literal["ok", "error", "cancelled", "timeout"]

# An assistant turn the person cut off is sent to the LLM as the words they
# heard followed by this marker, so that the model knows it was interrupted
# there (and neither repeats nor assumes the unheard rest).
INTERRUPTED_MARKER = " [interrupted by the user]"


@dataclass
class ToolUse:
    """A tool turn's call: the model asked ``name`` with ``arguments`` (its JSON text, as it wrote
    it); the turn's ``text`` is the result the model was told."""

    call_id: str
    name: str
    arguments: str
    status: ToolStatus
    duration_s: float = 0.0
    server: str = ""  # the MCP server that ran it ("": a tool of the session's own, or the client's)


@dataclass
class Turn:
    role: Role
    text: str
    t_start: float | None = None  # seconds on the session's timeline
    t_end: float | None = None
    generated_text: str | None = None  # assistant: everything the LLM produced
    interrupted: bool = False
    response: int | None = None  # assistant and tool: the reply's id in its session
    extra: dict[str, Any] = field(default_factory=dict)
    tool: ToolUse | None = None  # role "tool": the call whose result ``text`` is

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        d.update(extra)
        if d.get("tool") and not d["tool"]["server"]:
            del d["tool"]["server"]  # the stored shape of a tool turn from before MCP servers
        return {k: v for k, v in d.items() if (v is not None and v is not False) or k == "text"}


class HistoryListener(Protocol):
    """Told of each change to a :class:`History`, after it was made."""

    def added(self, turn: Turn) -> None: ...

    def changed(self, turn: Turn) -> None: ...

    def removed(self, turn: Turn) -> None: ...


@dataclass
class History:
    turns: list[Turn] = field(default_factory=list)
    # Hears of every turn added, changed and removed. What it raises is logged
    # and goes no further: a failing listener never breaks the conversation.
    listener: HistoryListener | None = field(default=None, repr=False, compare=False)

    def add(self, turn: Turn) -> Turn:
        if not turn.text.strip():
            raise ValueError("an empty turn is not stored")
        self.turns.append(turn)
        self._tell("added", turn)
        return turn

    def changed(self, turn: Turn) -> None:
        """``turn`` (one of ours) was modified in place, e.g. cut to the words heard."""
        if any(t is turn for t in self.turns):
            self._tell("changed", turn)

    def remove(self, turn: Turn) -> None:
        """Take back a turn: only for an assistant turn the client says was never heard."""
        kept = [t for t in self.turns if t is not turn]
        if len(kept) == len(self.turns):
            return
        self.turns = kept
        self._tell("removed", turn)

    def _tell(self, what: str, turn: Turn) -> None:
        if self.listener is None:
            return
        try:
            getattr(self.listener, what)(turn)
        except Exception:
            log.exception("history listener failed on a turn %s", what)

    def messages(self, system_prompt: str | None, since: int = 0, opening: bool = True) -> list[dict[str, Any]]:
        """Chat messages for the next LLM request.

        Tool turns of one reply that follow each other become the assistant's message that
        made the calls, then one ``tool`` message per result, as chat templates want them:
        a call is only ever here with its result. (The words the reply spoke around its
        calls are in its assistant turn, which comes after them.)

        What the assistant said unasked before anyone spoke (a call's greeting) is told in
        the system message, not as the conversation's first message: opened by an
        assistant message, Qwen2.5-Coder-0.5B called no tool at all (0 of 5 spoken requests
        that needed one; it made up the time), and with the opening in the system message
        it called 3 of the same 5, as it does with no opening.

        ``since``: the first turn the context holds (an agent's step that starts anew); a call
        is never cut from its result, so the tool turns there are skipped. ``opening=False``:
        the opening is left out (an agent's flow said it, word for word: told it, the 0.5B
        model said it again in place of its answers)."""
        turns = self.turns[since:]
        while since and turns and turns[0].tool is not None and turns[0].role == "tool":
            turns = turns[1:]
        i = 0
        while i < len(turns) and turns[i].role == "assistant" and turns[i].tool is None:
            i += 1
        opened = " ".join(f'"{t.text}"' for t in turns[:i] if t.text) if opening else ""
        if opened:
            said = f"You opened the conversation by saying {opened}."
            system_prompt = f"{system_prompt} {said}" if system_prompt else said
        out: list[dict[str, Any]] = []
        if system_prompt:
            out.append({"role": "system", "content": system_prompt})
        while i < len(turns):
            t = turns[i]
            if t.tool is None:
                content = t.text + INTERRUPTED_MARKER if t.interrupted else t.text
                out.append({"role": t.role, "content": content})
                i += 1
                continue
            j = i
            while j < len(turns) and turns[j].tool is not None and turns[j].response == t.response:
                j += 1
            out.append(tool_calls_message("", [u.tool for u in turns[i:j] if u.tool is not None]))
            out += [tool_result_message(u.tool, u.text) for u in turns[i:j] if u.tool is not None]
            i = j
        return out

    def last_user_turn(self) -> int:
        """The index of the person's last turn (the number of turns if none): where the current turn
        begins, which a step whose context starts anew still holds."""
        return next((i for i in range(len(self.turns) - 1, -1, -1) if self.turns[i].role == "user"), len(self.turns))

    def to_json(self) -> list[dict[str, Any]]:
        return [t.to_json() for t in self.turns]


def tool_calls_message(content: str, calls: list[ToolUse]) -> dict[str, Any]:
    """The assistant's message that made ``calls`` (OpenAI's shape, which chat templates take)."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or "{}"}}
            for c in calls
        ],
    }


def tool_result_message(call: ToolUse, result: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.call_id, "name": call.name, "content": result}
