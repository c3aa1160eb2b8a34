"""Speech near the microphone, and speech from across the room (pure).

A TV, a radio or another person talking in the room reaches the microphone too, and the VAD
hears speech in it as readily as in the person's. What tells them apart is the level: the person
speaks close to the microphone, the room's talkers from metres away, 10 to 20 dB quieter.
:class:`PersonLevel` learns how loud the person speaks from the turns the conversation answers
(the voiced frames' mean energy, which the barge-in rules compare with too); :class:`NearSpeech`
then discounts the VAD's speech where the last ``window_s`` of voiced sound is more than
``below_person_db`` under it. So far speech alone starts no turn and no barge-in, and while the
person speaks over it the pauses between their words are silence to the endpointer, not speech.
Their own quieter words still count up to that margin. Before the first turn there is nothing
to compare with, and everything counts.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class NearSpeechConfig:
    # Voiced sound this far under the person's own level is not the person (None: all counts).
    # Measured (python -m voice.bench noise): background speech 15 dB under the person.
    below_person_db: float | None = 10.0
    window_s: float = 0.25  # the stretch of voiced frames whose mean level is compared


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

    def __init__(self, person: PersonLevel, config: NearSpeechConfig, frame_s: float, threshold: float) -> None:
        """``threshold``: the VAD probability above which a frame is voiced."""
        self.person = person
        self.config = config
        self._threshold = threshold
        self._voiced: deque[float] = deque(maxlen=max(1, round(config.window_s / frame_s)))
        self.far_frames = 0  # voiced frames discounted so far

    def __call__(self, prob: float, energy: float) -> float:
        """``energy``: the frame's mean square, with the assistant's echo taken out."""
        below = self.config.below_person_db
        person = self.person.db
        if prob < self._threshold or below is None or person is None:
            return prob
        self._voiced.append(energy)
        level = 10 * math.log10(sum(self._voiced) / len(self._voiced) + 1e-12)
        if level >= person - below:
            return prob
        self.far_frames += 1
        return 0.0
