"""A person who answers what the assistant asks (a scenario's ``caller:``).

A fixed script cannot answer again: when a detail is misheard and asked for once more, its next
line answers the wrong question ("Yes." taken as the time). A caller instead hears each reply and
says the line of the first answer whose words are in it, as a person on a booking line would, so a
flow is measured on whether it ends with the right booking and how many turns that took.

Pure: it hears the session's events (what each reply said) and, when the person's feed has
nothing left to say, is asked for its next line. The lines are known up front (the runner renders
them all before the conversation starts), so a caller's conversation is as exact as a script's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from core.events import Event, PlaybackStart, TtsChunk, TurnEnd
from core.words import words
from voice.scenario.person import TurnAudio
from voice.scenario.spec import Answer, Caller, Cue, Line

AFTER_REPLY_S = 0.5  # a caller answers this long after the assistant is quiet, as NEXT_CUE


def holds(text: str, phrase: str) -> bool:
    """Whether ``text`` holds ``phrase``, or one of its ``|`` alternatives, as whole words."""
    said = f" {' '.join(words(text))} "
    return any(f" {' '.join(words(p))} " in said for p in phrase.split("|") if words(p))


def questions(text: str) -> str:
    """The sentences of ``text`` that ask (end in "?"); all of it where none does."""
    asked = re.findall(r"[^.!?]*\?", text)
    return " ".join(asked) if asked else text


@dataclass
class CallerTurns:
    """The caller in a conversation: which line to say next, and when."""

    caller: Caller
    said: list[Line] = field(default_factory=list)  # the caller's lines, in order
    _replies: dict[int, str] = field(default_factory=dict)  # each reply's text so far
    _since: set[int] = field(default_factory=set)  # replies since the caller last spoke
    _playing: list[tuple[int, float]] = field(default_factory=list)  # replies started since then, and when
    _asked: dict[int, int] = field(default_factory=dict)  # times each answer was given
    _over_done: set[int] = field(default_factory=set)  # the interruptions (over_s answers) already said
    _done: bool = False

    def on_event(self, event: Event) -> None:
        if isinstance(event, TtsChunk):
            self._replies[event.response] = f"{self._replies.get(event.response, '')} {event.text}".strip()
            self._since.add(event.response)
        elif isinstance(event, TurnEnd):
            if event.text:
                self._replies[event.response] = event.text  # what was played, if it was cut
            self._since.add(event.response)
        elif isinstance(event, PlaybackStart):
            self._playing.append((event.response, event.t))

    @property
    def done(self) -> bool:
        return self._done or len(self.said) >= self.caller.max_turns

    def next_line(self, now: float, quiet_s: float | None) -> tuple[Line, float] | None:
        """The next line and when to start it (seconds on the timeline), or None: nothing to say
        yet. ``quiet_s``: how long the assistant has been quiet (None: it is not). A finished
        reply that no answer matches, with no ``otherwise``, ends the caller."""
        if self.done:
            return None
        over = self._over_line()
        if over is not None:
            return over
        if quiet_s is None or quiet_s < AFTER_REPLY_S or not self._since:
            return None
        # The newest reply first, and its questions: a person answers the last thing asked.
        for response in sorted(self._since, reverse=True):
            heard = self._replies.get(response, "")
            asked = questions(heard)
            for i, answer in enumerate(self.caller.answers):
                if answer.over_s is None and any(holds(asked, w) for w in answer.when):
                    return self._say(self._line(i, answer, heard), now)
        if self.caller.otherwise:
            return self._say(self.caller.otherwise, now)
        self._done = True
        return None

    def _over_line(self) -> tuple[Line, float] | None:
        for i, answer in enumerate(self.caller.answers):
            if answer.over_s is None or i in self._over_done:
                continue
            for response, start in self._playing:
                heard = self._replies.get(response, "")
                if any(holds(heard, w) for w in answer.when):
                    self._over_done.add(i)
                    return self._say(self._line(i, answer, heard), start + answer.over_s)
        return None

    def _line(self, i: int, answer: Answer, heard: str) -> Line:
        for phrase, line in answer.unless:
            if not holds(heard, phrase):
                return line
        n = self._asked.get(i, 0)
        self._asked[i] = n + 1
        return answer.say[min(n, len(answer.say) - 1)]

    def _say(self, line: Line, at: float) -> tuple[Line, float]:
        self.said.append(line)
        self._since.clear()
        self._playing.clear()
        return line, at


class CallerFeed:
    """The caller's lines as the feed's further turns: each rendered up front (``audio``; keys as a
    keypad turn), started
    at its time; done once the caller is, or the conversation was ended (``ended``)."""

    def __init__(self, caller: CallerTurns, audio: dict[Line, TurnAudio], ended: Callable[[], bool]) -> None:
        self.caller = caller
        self.audio = audio
        self.ended = ended

    @property
    def done(self) -> bool:
        return self.caller.done or self.ended()

    def next_turn(self, now: float, quiet_s: float | None) -> tuple[TurnAudio, Cue] | None:
        line = None if self.ended() else self.caller.next_line(now, quiet_s)
        return None if line is None else (self.audio[line[0]], Cue("at", line[1]))
