"""The person's timeline: which turn is said when, fed block by block as the microphone.

Pure: it is given the turns' audio and cues, hears of each reply's first sample (``PlaybackStart``)
and may ask whether the assistant is quiet (``idle``); the pump asks it for each 20 ms block. A turn
starts at its cue:

- ``at``: at that time on the timeline (once the turn before is over);
- ``after_reply_start``: that long after the first reply that starts playing after the turn before
  began (a barge-in, a cough over the reply);
- ``after_reply_end``: that long after the assistant is quiet again (nothing to hear, nothing in
  flight), at least QUIET_AFTER_S after the turn before ended: right after speech, the endpoint
  has not come yet, and quiet means nothing.

A cue that has not come ``max_wait_s`` after the turn before ended starts the turn anyway, marked
``waited_out`` (the expectation that needed it fails with that said). After the last turn, ``more``
(a caller who answers what is asked) may give further turns, one at a time, as the replies come;
once it has none, the feed waits for quiet, then listens ``listen_s`` more (a phone line's prompt,
a timer), and ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from core.audio import ASR_BLOCK, BLOCK_S
from core.events import Event, PlaybackStart
from voice.scenario.person import TurnAudio
from voice.scenario.spec import Cue

QUIET_AFTER_S = 1.0  # as replay.replay_turns: idle right after speech means nothing yet


@dataclass(frozen=True)
class Placed:
    """Where a turn went on the timeline (seconds): its audio, and the sound in it."""

    index: int
    start: float
    speech_start: float
    speech_end: float
    end: float
    waited_out: bool = False  # its cue never came; it was started after the longest wait

    def to_json(self) -> dict:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in self.__dict__.items()}


class MoreTurns(Protocol):
    """Turns decided as the conversation goes (``voice.scenario.caller.CallerFeed``)."""

    @property
    def done(self) -> bool: ...

    def next_turn(self, now: float, quiet_s: float | None) -> tuple[TurnAudio, Cue] | None: ...


class Feed:
    """The microphone of a scenario: ``source(i)`` is block ``i`` (None: the scenario is over)."""

    def __init__(
        self,
        turns: list[tuple[TurnAudio, Cue]],
        idle: Callable[[], bool],
        listen_s: float = 0.0,
        max_wait_s: float = 30.0,
        room: np.ndarray | None = None,
        more: MoreTurns | None = None,
        press: Callable[[str], None] | None = None,
    ) -> None:
        """``room``: a sound under everything, looped from the start (None: a quiet room);
        ``press``: a key of the phone's keypad pressed (a keypad turn's keys, at their times)."""
        self.turns = list(turns)
        self.more = more
        self.press = press
        self._keys: list[tuple[float, str]] = []  # keys still to press, at their times
        self.room = room if room is not None and len(room) else None
        self.idle = idle
        self.listen_s = listen_s
        self.max_wait_s = max_wait_s
        self.placed: list[Placed] = []
        self._reply_starts: list[float] = []
        self._playing: tuple[np.ndarray, int] | None = None  # the turn's audio and where it is in it
        self._quiet_from: float | None = None  # when the assistant was first found quiet, while it stays so
        self._silence = np.zeros(ASR_BLOCK, dtype=np.float32)

    def on_event(self, event: Event) -> None:
        if isinstance(event, PlaybackStart):
            self._reply_starts.append(event.t)

    def source(self, i: int) -> np.ndarray | None:
        block = self._person(i)
        if block is None or self.room is None:
            return block
        return block + np.take(self.room, np.arange(i * ASR_BLOCK, (i + 1) * ASR_BLOCK), mode="wrap")

    def _person(self, i: int) -> np.ndarray | None:
        now = i * BLOCK_S
        block = self._block(now)
        self._press_keys(now)  # after a turn that starts now, so its first key is pressed now too
        return block

    def _press_keys(self, now: float) -> None:
        while self._keys and self._keys[0][0] <= now + 1e-9:
            _, key = self._keys.pop(0)
            if self.press is not None:
                self.press(key)

    def _block(self, now: float) -> np.ndarray | None:
        if self._playing is None:
            nxt = len(self.placed)
            if nxt == len(self.turns) and self.more is not None and not self.more.done:
                added = self.more.next_turn(now, self._quiet_for(now))
                if added is not None:
                    self.turns.append(added)
                elif now - self._last_end < self.max_wait_s + self.listen_s:
                    return self._silence
            if nxt == len(self.turns):
                return None if self._over(now) else self._silence
            if self._due(now, *self.turns[nxt]):
                self._start(now, nxt)
        if self._playing is not None:
            audio, pos = self._playing
            block = audio[pos : pos + ASR_BLOCK]
            self._playing = (audio, pos + ASR_BLOCK) if pos + ASR_BLOCK < len(audio) else None
            return np.pad(block, (0, ASR_BLOCK - len(block))) if len(block) < ASR_BLOCK else block
        return self._silence

    @property
    def _last_end(self) -> float:
        return self.placed[-1].end if self.placed else 0.0

    def _quiet_for(self, now: float) -> float | None:
        """How long the assistant has been quiet (None: it is not, or it is too soon to say)."""
        if now < self._last_end + QUIET_AFTER_S or not self.idle():
            self._quiet_from = None
            return None
        if self._quiet_from is None:
            self._quiet_from = now
        return now - self._quiet_from

    def _due(self, now: float, turn: TurnAudio, cue: Cue) -> bool:
        quiet = self._quiet_for(now)  # kept up to date whatever the cue
        if now - self._last_end >= self.max_wait_s:
            return True
        if cue.kind == "at":
            return now >= cue.seconds
        if cue.kind == "after_reply_start":
            since = self.placed[-1].start if self.placed else 0.0
            started = [t for t in self._reply_starts if t >= since]
            return bool(started) and now >= started[0] + cue.seconds
        return quiet is not None and quiet >= cue.seconds

    def _start(self, now: float, index: int) -> None:
        turn, _ = self.turns[index]
        waited_out = now - self._last_end >= self.max_wait_s
        self.placed.append(
            Placed(index, now, now + turn.speech_start, now + turn.speech_end, now + turn.duration, waited_out)
        )
        self._playing = (turn.audio, 0)
        self._keys += [(now + at, key) for at, key in turn.keys]
        self._quiet_from = None

    def _over(self, now: float) -> bool:
        """After the last turn: quiet for ``listen_s`` (or waited the longest)."""
        quiet = self._quiet_for(now)
        return (quiet is not None and quiet >= self.listen_s) or now - self._last_end >= self.max_wait_s + self.listen_s
