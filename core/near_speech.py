"""Speech near the microphone, and speech from across the room (pure).

A TV, a radio or another person talking in the room reaches the microphone too, and the VAD
hears speech in it as readily as in the person's. What tells them apart is the level: the person
speaks close to the microphone, the room's talkers from metres away, 10 to 20 dB quieter.
:class:`PersonLevel` learns how loud the person speaks from the turns the conversation answers
(the voiced frames' mean energy, which the barge-in rules compare with too); :class:`NearSpeech`
then discounts the VAD's speech where the voiced sound of the last ``window_s`` is more than
``below_person_db`` under it. So far speech alone starts no turn and no barge-in, and while the
person speaks over it the pauses between their words are silence to the endpointer, not speech.
Their own quieter words still count up to that margin, and further when they go on after a short
pause of their own with nothing voiced between ("No, | for two people": ``continuation_db``).
Trailing off with no pause, every frame since their voice was at their level counted as theirs,
they may come as much nearer a talker they came in over (LJ001-0005's "... of the fifteenth
century may justly ...", over a TV 10 dB under them).
Before the first turn the voiced sound heard so far stands in for the person's level: a running
mean of the windows that counted (``bootstrap_s``), forgotten at ``forget_db_per_s`` in silence (a
loud sound the VAD took for speech must not leave the session deaf). A running mean, not the
loudest: against the loudest window a question's trailing last word fell under the margin and the
turn was cut before it. The person close to the microphone soon dominates it, so a TV that was on
before they spoke is discounted once they have; what it said before their first words is heard as
theirs. A room that talks without stopping (babble, music: :mod:`core.room`) is found by its floor
instead, before any turn and after: voiced sound that does not stand out of it is not the person's
either, and what was heard as theirs before it was found (the room itself) is forgotten.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from core.levels import mean_db
from core.room import Room

_GAP_FRAMES = 3  # more unvoiced frames than this between two voiced ones make a gap (a word's dip is no gap)


@dataclass(frozen=True)
class NearSpeechConfig:
    # Voiced sound this far under the person's own level is not the person (None: all counts).
    # Over 0.5 s windows (tests/fixtures, Silero's voiced frames): a recorded sentence's windows are
    # within 4.6 dB of its mean 99 times in 100; a TV (JFK, reverberant) 15 dB under the person
    # reaches 8.2 dB under them at most. On 0.25 s windows those were 7.0 and 6.7: not separable.
    below_person_db: float | None = 8.0
    window_s: float = 0.5  # the stretch of voiced frames whose mean level is compared
    forget_db_per_s: float = 1.0  # before the first turn: how fast what was heard is forgotten
    bootstrap_s: float = 0.5  # before the first turn: the running mean's time constant, over voiced frames
    # The person going on after a short pause, quieter: a run of voice that begins after a silent
    # gap, within continuation_s of their last words at their level, the last voice before it
    # theirs, counts up to continuation_db further under their level. Piper's "No, for two
    # people." says "for two people" 8.5 dB under the turns before it, and the whole of it was
    # discarded as far speech (the flows benchmark's booking for two). The same margin, within
    # continuation_s, for their voice trailing off with no pause over a talker they came in over
    # (core/room.py): LJ001-0005 fell 5-8 dB under their level for 1.4 s over a TV 10 dB under
    # them, within 5 dB of its level, and the turn was cut mid-sentence. Not under their own level:
    # a TV 5 dB under them was then heard as them for a second after each of their words.
    continuation_s: float = 1.0
    continuation_db: float = 4.0


class PersonLevel:
    """How loud the person speaks (dB, the mean energy of an utterance's voiced frames),
    learnt from the turns answered as theirs; None before the first."""

    def __init__(self) -> None:
        self.db: float | None = None

    def learn(self, level_db: float) -> None:
        # The running mean of the turns so far, the later ones weighing most: a person who moves
        # closer or further is followed within a turn or two.
        self.db = level_db if self.db is None else (self.db + level_db) / 2


class NearSpeech:
    """Per VAD frame: the speech probability, or 0 where the voiced sound is far under the person."""

    def __init__(
        self, person: PersonLevel, config: NearSpeechConfig, frame_s: float, threshold: float, room: Room | None = None
    ) -> None:
        """``threshold``: the VAD probability above which a frame is voiced; ``room``: a talking
        room's floor, which the person's speech must stand out of (None: not looked for)."""
        self.person = person
        self.room = room
        self.config = config
        self._threshold = threshold
        self._window = max(1, round(config.window_s / frame_s))  # frames
        # (frame, energy, the energy the room hears) of the window's voiced frames
        self._voiced: deque[tuple[int, float, float]] = deque()
        self._frame = 0
        self._forget_db = config.forget_db_per_s * frame_s  # per frame
        self._alpha = min(1.0, frame_s / config.bootstrap_s)
        self.heard_db: float | None = None  # before the first turn: the voiced sound heard, as a running mean
        self.far_frames = 0  # voiced frames discounted so far
        self.window_db: float | None = None  # the voiced sound of the last window_s, as of the last voiced frame
        self.room_window_db: float | None = None  # the same in the sound the room is looked for in
        # Before a suppressor (lets_in): (energy, voiced) of the last window_s, and the frames of a syllable
        self._before: deque[tuple[float, bool]] = deque(maxlen=self._window)
        self._syllable = max(1, round(0.1 / frame_s))
        # The continuation rule: where the person's last voiced frame at their level was, whether the
        # last voiced frame of all was the person's, and whether the run of voice under way (its first
        # frame within continuation_s of theirs) goes on from them.
        self._continuation = round(config.continuation_s / frame_s)
        self._last_near = -(10**9)
        self._last_voiced = -(10**9)
        self._last_was_person = False
        self._continuing = False
        self._run_start = 0  # the first frame of the run of voice under way
        self._last_heard_near = -(10**9)  # the person's last frame at their level over a window of their voice

    def _trailing(self, after_theirs: bool) -> bool:
        """Whether the run of voice under way is the person's sentence trailing off with no pause:
        their voice at their level (over a window of it) in the run within ``continuation_s``, and
        every voiced frame since counted as theirs (``after_theirs``: the frame before did)."""
        last = self._last_heard_near
        return after_theirs and last >= self._run_start and self._frame - last <= self._continuation

    def lets_in(self, prob: float, energy: float) -> bool:
        """Whether a frame as it was before a noise suppressor (its VAD probability and mean
        square) is the person's voice by its level alone, whatever the suppressor made of it.
        Called on every frame while a suppressor is on, before :meth:`__call__`.

        RNNoise takes a voice that comes in over a song or babble for more of the room, and lets
        it through late: with a song 10 dB under the person, the first 0.7 s of "Not at this
        particular" came out of it 30-50 dB down, the utterance opened 1.7 s late, and Whisper
        never heard those words. Sound as loud as the person's own level over the last 0.1 s
        (their syllables' level; a TV 10 dB under them does not reach it) is theirs, if it stands
        out of a talking room over those 0.1 s and over its voiced frames of the last ``window_s``
        (the rule of ``--denoise off``; over 0.1 s alone, babble 5 dB under the person was let
        in, and over the window alone, the babble after the person stopped). Before their
        first turn, standing out of a talking room is the test; with neither known, the
        suppressor decides (it is what keeps a TV out then)."""
        voiced = prob >= self._threshold
        self._before.append((energy, voiced))
        if not voiced:
            return False
        level = mean_db(e for e, _ in list(self._before)[-self._syllable :])
        room = self.room
        talking = room is not None and room.talking
        if room is not None and talking and (room.under(level) or room.under(mean_db(e for e, v in self._before if v))):
            return False
        person = self.person.db
        if person is not None:
            return level >= person
        return talking

    def __call__(self, prob: float, energy: float, room_view: tuple[float, float] | None = None) -> float:
        """``energy``: the frame's mean square, with the assistant's echo taken out; ``room_view``:
        the same frame's (probability, mean square) before a noise suppressor, where the room is
        looked for (None: in this one)."""
        below = self.config.below_person_db
        self._frame += 1
        room = self.room
        if room is not None:
            room(*(room_view or (prob, energy)))
            if room.found:  # what was heard before the room was known was the room
                self.heard_db = None
        if self.heard_db is not None:
            self.heard_db -= self._forget_db
        if prob < self._threshold:
            return prob
        if self._frame - self._last_voiced > _GAP_FRAMES + 1:  # a run of voice begins after a silent gap
            self._run_start = self._frame
            self._continuing = self._last_was_person and self._frame - self._last_near <= self._continuation
        going_on = self._continuing or self._trailing(self._last_was_person)
        self._last_voiced, self._last_was_person = self._frame, False
        voiced = self._voiced
        voiced.append((self._frame, energy, energy if room_view is None else room_view[1]))
        while voiced[0][0] <= self._frame - self._window:
            voiced.popleft()
        level = mean_db(e for _, e, _ in voiced)
        self.window_db = level
        by_the_talker = False  # counted only as the person's voice going on, near a talker's level
        allowance = self.config.continuation_db if going_on else 0.0
        if room is not None:
            # Against the room's floor in the sound it was found in: RNNoise keeps a song's loud
            # bursts and drops its quieter voiced frames, and the bursts alone stood out of it.
            in_room = level if room_view is None else mean_db(r for *_, r in voiced)
            self.room_window_db = in_room
            by_the_talker = going_on and room.under(in_room) and not room.under(in_room, allowance)
            if not by_the_talker:  # the talker's level follows its windows, not the person's trailing words
                room.voiced(in_room)
            if room.under(in_room, allowance):
                self.far_frames += 1
                return 0.0
        if below is None:
            return prob
        person = self.person.db
        if person is None:  # before the first turn: against what has been heard, which what counts moves
            heard = self.heard_db
            if heard is None or level >= heard - below:
                self.heard_db = level if heard is None else heard + self._alpha * (level - heard)
                return prob
            self.far_frames += 1
            return 0.0
        if level >= person - below:
            self._last_was_person = True
            if by_the_talker:  # a TV 5 dB under the person: its own windows must not keep it going on
                return prob
            self._last_near = self._frame
            if len(voiced) * 2 >= self._window:  # not one loud frame at a run's start
                self._last_heard_near = self._frame
            return prob
        if self._continuing and level >= person - below - self.config.continuation_db:
            self._last_was_person = True  # not at their level, but their voice going on after their own pause
            return prob
        self.far_frames += 1
        return 0.0
