"""A room that talks: babble or music heard under everything, the person's speech over it (pure).

In a café or beside a radio the room is there before the person says anything, and the VAD
hears speech in it as readily as in theirs: it would open an utterance at the session's first
second and hold it open while the room talks on. What tells such a room from the person is that
it never stops: the quietest tenth of what the microphone heard over the last ``window_s`` (the
floor) is itself voiced. Under a running tap, a fan or dishes, and in a quiet room, the floor is
not voiced (the person's own pauses reach it); under babble and songs it is, frame after frame.
Measured on 32 ms frames with a 3 s window (the fixtures' rooms alone, and the person's
recordings over them at 10 and 5 dB): the share of floor frames the VAD calls voiced is 1.00 at
the median in babble and 0.8 in a song, 0.00 under a tap, dishes or silence; while the person
speaks over a tap it is 0.13 at the median and never stays high for long.

Where the floor has been voiced for ``learn_s`` on end, the room talks, and its level is that
floor. :class:`~core.near_speech.NearSpeech` then counts voiced sound as the person's only where
it stands ``above_room_db`` over it: the babble's own 0.5 s windows stay within 6.2 dB of it 95
times in 100 (a song's, 8.9), the person's speech 10 dB over the babble is 12.5 dB over it at the
median. Its level then falls with the floor at once but rises at ``rise_db_per_s`` only: the
person's own speech, filling the window, must not become the floor. An utterance that was all
room when the room is found was never the person's: the hearing ends it as the room's (no
transcript, no reply). The room is forgotten once the floor has been unvoiced for ``learn_s``:
the café went quiet.

A person reading on without pauses fills the window with their own voice, and its quietest
tenth is then voiced too, 6.4 dB under their level (es_fleurs_test_es004, 8 s), where a babble's
own utterance is 5.1 dB over its floor: levels cannot tell them apart. What does is what came
before: an utterance that opened after the floor had been unvoiced for ``learn_s`` (a quiet room:
the same evidence that finds a talking room, heard from the session's first 0.5 s on) is the
person's, and the room is not found while it is open; its voiced floor was theirs and is
forgotten when it ends. A song's quiet instrumental start is not long enough (1.4 s before its
singer came in: answered, when any unvoiced floor would do). The cost: babble that starts in a
room that was quiet for 2 s holds the utterance it opens until it pauses or the person's louder
voice takes it over (:class:`Overtaking`), as before this rule.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from core.levels import mean_db


@dataclass(frozen=True)
class RoomConfig:
    # Voiced sound must stand this far over a talking room's floor to be the person (None: the room
    # is not looked for; --room-db 0). 7 dB: the babble's own windows stay within 6.2 dB of it.
    above_room_db: float | None = 7.0
    window_s: float = 3.0  # the stretch whose quietest tenth is the floor
    floor_percentile: float = 10.0
    floor_margin_db: float = 2.0  # frames this close over the floor's level are the floor
    voiced_share: float = 0.8  # the floor talks where this share of its frames is voiced
    learn_s: float = 2.0  # the floor voiced this long on end: the room talks (unvoiced as long: it stopped)
    # How fast the room's level may rise: the person speaking on for 3 s fills the window, and their
    # own quieter sounds then make its floor (their last word was discounted and the turn held open).
    # A café gets louder slowly; a quieter floor is followed at once.
    rise_db_per_s: float = 1.0
    # Before the person's first turn, a voice that comes in over an utterance open for overtake_after_s,
    # overtake_db over that utterance's level and for overtake_s, is the person's: what opened it
    # was the room (a TV talking when they began). None: never.
    overtake_db: float | None = 6.0
    overtake_after_s: float = 0.5
    overtake_s: float = 0.25
    # The talker overtaken is not the person from then on: voiced sound under its level and this
    # margin is not theirs (a TV's 0.5 s windows stay within 4.1-5.3 dB over its own level 99 times
    # in 100). Its level follows its windows (up within 1 s, down over 10, at most 3 dB over where it was overtaken),
    # and is kept: forgotten while it paused or while the assistant talked over it (the canceller
    # takes the room down with the echo), the TV barged in on the reply. The person came in 6 dB
    # over it, so keeping it costs them nothing unless they speak much more quietly later.
    far_margin_db: float = 5.0
    smooth_frames: int = 3  # each frame's level: the mean energy of the last three (0.1 s)


class Room:
    """Per VAD frame, whether the room talks, and how loud (:attr:`db`; None: it does not)."""

    def __init__(self, config: RoomConfig, frame_s: float, threshold: float) -> None:
        """``threshold``: the VAD probability above which a frame is voiced."""
        self.config = config
        self._threshold = threshold
        self._frames: deque[tuple[float, bool]] = deque(maxlen=max(1, round(config.window_s / frame_s)))
        self._energies: deque[float] = deque(maxlen=config.smooth_frames)
        self._learn = max(1, round(config.learn_s / frame_s))
        self._first = max(1, round(0.5 / frame_s))  # frames heard before the floor says anything
        self._rise_db = config.rise_db_per_s * frame_s  # per frame
        self._run = 0  # frames on end with the floor voiced (> 0) or unvoiced (< 0)
        self.db: float | None = None
        self.found = False  # the last frame made the room known
        self.quiet = False  # the floor has been unvoiced for learn_s (from the session's first 0.5 s on)
        self._quiet_frames = 0
        # The utterance open now (see hears()): its level, and whether it opened on a quiet floor.
        self._speech_db: float | None = None
        self._opened_quiet = False
        self.far_db: float | None = None  # a talker the person's voice came in over (Overtaking)
        self._far_cap = 0.0  # the most far_db may rise to
        self._far_margin = config.far_margin_db
        # Its level rises with its louder passages within a second, and sinks with its quieter ones
        # over ten: a TV's loudness swings by 5 dB from one sentence to the next, and a level that
        # had sunk with a quiet one let the next loud one barge in on the reply.
        self._far_up, self._far_down = min(1.0, frame_s / 1.0), min(1.0, frame_s / 10.0)

    def __call__(self, prob: float, energy: float) -> None:
        """The next frame: its VAD probability and mean square (the assistant's echo taken out)."""
        self.found = False
        if self.config.above_room_db is None:
            return
        self._energies.append(energy)
        level = mean_db(self._energies)
        self._frames.append((level, prob >= self._threshold))
        if len(self._frames) < self._first:
            return
        levels = sorted(lv for lv, _ in self._frames)
        floor = levels[int(len(levels) * self.config.floor_percentile / 100)]
        at_floor = [voiced for lv, voiced in self._frames if lv <= floor + self.config.floor_margin_db]
        talks = sum(at_floor) >= self.config.voiced_share * len(at_floor)
        self._quiet_frames = 0 if talks else self._quiet_frames + 1
        self.quiet = self._quiet_frames >= self._learn
        if len(self._frames) < self._frames.maxlen:  # type: ignore[operator]
            return
        self._run = max(1, self._run + 1) if talks else min(-1, self._run - 1)
        if self._run >= self._learn:
            if self.db is None and self._speech_db is not None and self._theirs(floor):
                return  # the person speaks now: not found while they do
            self.found = self.db is None
            self.db = floor if self.db is None else min(floor, self.db + self._rise_db)
        elif self._run <= -self._learn:
            self.db = None

    def hears(self, utterance_db: float | None) -> None:
        """Before each frame, from the hearing: the level of the utterance open now (None: none)."""
        if utterance_db is not None and self._speech_db is None:
            self._opened_quiet = self.quiet
        elif utterance_db is None and self._speech_db is not None and self._opened_quiet:
            self._run = min(self._run, 0)  # the voiced floor was the person's own voice
        self._speech_db = utterance_db

    def _theirs(self, floor: float) -> bool:
        """Whether the utterance open now is the person's: it opened on a quiet floor, or stands out
        of this one (a person talking over a room not yet found)."""
        assert self._speech_db is not None and self.config.above_room_db is not None
        return self._opened_quiet or self._speech_db >= floor + self.config.above_room_db

    @property
    def talking(self) -> bool:
        """A talking room is known (its floor's level is :attr:`db`)."""
        return self.db is not None

    def under(self, level_db: float, far_allowance_db: float = 0.0) -> bool:
        """Whether voiced sound at ``level_db`` is the room's (its talking floor's, or the talker's
        the person came in over), not the person's over it. Every level here is in the sound the
        room is looked for in: before a noise suppressor where one is on. ``far_allowance_db``:
        how much nearer the talker's level it may come, being the person's voice going on (never
        within 1 dB of it: a talker as loud as the person, 5 dB under them, gets none)."""
        above = self.config.above_room_db
        if self.far_db is not None and level_db < self.far_db + max(1.0, self._far_margin - far_allowance_db):
            return True
        return self.db is not None and above is not None and level_db < self.db + above

    def overtaken(self, level_db: float, person_db: float) -> None:
        """The person's voice, at ``person_db``, came in over a talker at ``level_db`` (:class:`Overtaking`).
        The margin over the talker stays 4.6 dB under the person (how far their own windows fall
        under their level): at 5 dB over a TV, 5 dB of margin cut their sentence in two."""
        self.far_db, self._far_cap = level_db, level_db + 3.0
        self._far_margin = max(1.0, min(self.config.far_margin_db, person_db - level_db - 4.6))

    def voiced(self, level_db: float) -> None:
        """Voiced sound at ``level_db`` (its last 0.5 s): the overtaken talker's, its level follows it."""
        far = self.far_db
        if far is not None and far - 6.0 <= level_db < far + self._far_margin:
            alpha = self._far_up if level_db > far else self._far_down
            self.far_db = min(self._far_cap, far + alpha * (level_db - far))


class Overtaking:
    """Before the person's first turn: whether a louder voice has taken over the open utterance.

    A TV or a radio presenter talks in pauses too short for an endpoint, and is no talking room
    (its pauses are its floor): before any turn, nothing tells it from the person, and the
    utterance it opened ran on through the person's question (a TV 10 dB under them: both of
    their turns missed, 7 replies to the TV). When the voiced sound of the last 0.5 s rises
    ``overtake_db`` over the utterance's level so far, in one that has gone on for
    ``overtake_after_s``, and stays there for ``overtake_s``, someone nearer has begun: the
    utterance so far was the room's, and the person's starts with them. Measured on the
    fixtures' 32 recorded sentences alone (every language), a voice's 0.5 s windows stayed at
    most 4.6 dB over its own utterance's level so far for 0.25 s (LJ001-0001; most under 2.5);
    the person 10 dB over a TV came in 6.0-6.9 dB over its utterance at the median (JFK, who
    pauses, so his voiced frames are loud for his level) and 8.9-10.3 dB (a far talker who does not).
    """

    def __init__(self, config: RoomConfig, frame_s: float) -> None:
        self.config = config
        self._frames = max(1, round(config.overtake_s / frame_s))
        self.base: float | None = None  # the utterance's level when the louder voice came in
        self._run = 0

    def started(self) -> None:
        """A new utterance."""
        self.base, self._run = None, 0

    def __call__(self, utterance_db: float | None, window_db: float | None, age_s: float) -> bool:
        """One voiced frame of an utterance ``age_s`` old, whose voiced frames so far are at
        ``utterance_db`` and the last 0.5 s of them at ``window_db``: True once overtaken."""
        jump = self.config.overtake_db
        if jump is None or utterance_db is None or window_db is None or age_s < self.config.overtake_after_s:
            self.base = None
            return False
        base = utterance_db if self.base is None else self.base
        if window_db < base + jump:
            self.base = None
            return False
        if self.base is None:
            self.base, self._run = base, 0
        self._run += 1
        return self._run >= self._frames
