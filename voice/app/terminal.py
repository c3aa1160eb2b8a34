"""What a person at a desk sees: the conversation as lines, and one live status line.

:class:`TerminalView` is fed the pipeline's events and the microphone level;
finished things (what you said, each sentence the assistant says, a cut) are
printed as lines, and the line under them shows the state, a level meter and
the partial transcript, redrawn in place. Without a terminal (output to a file
or a pipe) only the lines are written. No audio, no engines: text out.
"""

from __future__ import annotations

import shutil
import sys
from typing import TextIO

from core.events import (
    AsrFinal,
    AsrPartial,
    Error,
    Event,
    PlaybackPaused,
    PlaybackResumed,
    PlaybackStart,
    ResponseStart,
    SpeechStart,
    Truncate,
    TtsChunk,
    TurnEnd,
)

STATES = {
    "listening": "● listening",
    "user": "● you're speaking",
    "thinking": "… thinking",
    "speaking": "♪ speaking",
    "paused": "‖ paused (you spoke)",
}
METER = " ▁▂▃▄▅▆▇█"


def meter(level_db: float | None, width: int = 8) -> str:
    """A bar for a level from -60 dBFS (empty) to 0 dBFS (full)."""
    if level_db is None:
        return " " * width
    fill = max(0.0, min(1.0, (level_db + 60) / 60)) * width
    full = int(fill)
    rest = METER[round((fill - full) * (len(METER) - 1))] if full < width else ""
    return ("█" * full + rest).ljust(width)[:width]


class TerminalView:
    def __init__(self, out: TextIO | None = None, live: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.live = self.out.isatty() if live is None else live
        self.state = "listening"
        self.partial = ""
        self.level_db: float | None = None
        self._status_shown = False
        self._said: dict[int, list[str]] = {}  # response -> its sentences so far

    # -- input ------------------------------------------------------------------

    def event(self, e: Event) -> None:
        match e:
            case SpeechStart():
                self.state = "paused" if self.state in ("speaking", "paused") else "user"
            case AsrPartial():
                self.partial = e.text
            case AsrFinal():
                self.partial = ""
                if e.text:
                    self._line(f"you:        {e.text}")
            case ResponseStart():
                self.state = "thinking"
                self._said[e.response] = []
            case TtsChunk():
                self._said.setdefault(e.response, []).append(e.text)
                self._line(f"assistant:  {e.text}")
            case PlaybackStart() | PlaybackResumed():
                self.state = "speaking"
            case PlaybackPaused():
                self.state = "paused"
            case Truncate():
                said = " ".join(self._said.get(e.response, []))
                rest = said[len(e.text) :].strip() if said.startswith(e.text) else ""
                self._line(f"✂ cut:       heard {e.text!r}" + (f", not {rest!r}" if rest else ""))
            case TurnEnd():
                self.state = "listening"
                self._said.pop(e.response, None)
            case Error():
                self._line(f"error in {e.where}: {e.message}")
        self.render()

    def level(self, level_db: float | None) -> None:
        self.level_db = level_db

    def message(self, text: str) -> None:
        self._line(text)
        self.render()

    # -- output -----------------------------------------------------------------

    def status_line(self) -> str:
        text = f"{STATES.get(self.state, self.state):<20} {meter(self.level_db)}"
        if self.partial:
            text += f"  {self.partial}"
        width = shutil.get_terminal_size((100, 20)).columns - 1
        return text if len(text) <= width else "…" + text[-(width - 1) :]

    def render(self) -> None:
        if not self.live:
            return
        self.out.write("\r\x1b[2K" + self.status_line())
        self.out.flush()
        self._status_shown = True

    def _line(self, text: str) -> None:
        if self.live and self._status_shown:
            self.out.write("\r\x1b[2K")
        self.out.write(text + "\n")
        self.out.flush()

    def close(self) -> None:
        if self.live and self._status_shown:
            self.out.write("\r\x1b[2K")
            self.out.flush()
