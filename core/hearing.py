"""The hearing front end: microphone frames in, what the person did out (pure).

Everything the session decides about the microphone before the turn-taking
core sees it lives here: which VAD view to believe while the assistant talks
(the echo gate), how loud the person and the background are, the speech edges
(the endpointer), when the person's turn is over (the end-of-turn decisions),
and when a partial transcript is due (the partial budget). The models are
injected as callables, or run by the caller on what this asks for, so all of
it runs in unit tests on recorded frames without onnxruntime.

Per 32 ms frame, :meth:`Hearing.push` may report one of::

    SpeechOnset, OnsetDropped, SpeechStart     (from the endpointer)
    Ended            the endpoint, with the utterance's and the background's loudness
    SpeechContinues  a voiced frame inside an utterance (how long the person has spoken)
    SpeechPaused     a silent frame inside an utterance, before the endpoint

and, after either of the last two, :class:`PartialDue` when a partial pass
should start (the per-utterance schedule and the budget shared by every
session allow it).

The endpoint. Without an end-of-turn model it is silence alone: the
endpointer's hangover (``EndpointConfig.hangover_s``, 0.5 s). With one
(``end_of_turn``, see ``core/end_of_turn.py``), after a
:class:`SpeechPaused` :meth:`Hearing.push` may also report a
:class:`~core.end_of_turn.CheckEndOfTurn`: the caller scores the
utterance's audio from its onset (with the pre-roll) to ``until`` with the
model, off the audio path, and gives the probability to
:meth:`Hearing.turn_checked`, which may return the endpoint then and there
(the endpointer leaves the utterance: the next words start a new one). The
endpointer's own hangover becomes ``max_wait_s``, the fallback: it ends a
pause the model never called finished. A voiced frame makes the check in
flight stale; :meth:`Hearing.transcript` lets a transcript of the speech so
far (the early final) weigh in: with ``transcripts=True`` the caller gives one
for each pause, and a "finished" from the model waits for it (up to
``transcript_wait_s``), so that unfinished words ("Not at this particular")
hold the turn open; the endpoint may then come from :meth:`Hearing.transcript`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from core.audio import ASR_RATE, VAD_FRAME
from core.budget import Budget
from core.echo_gate import EchoGate
from core.end_of_turn import CheckEndOfTurn, EndOfTurn, EndOfTurnCommand, EndOfTurnConfig
from core.endpointing import (
    NO_SPEECH_BELOW,
    EndpointConfig,
    Endpointer,
    OnsetDropped,
    SpeechEnd,
    SpeechOnset,
    SpeechStart,
)
from core.events import EndOfTurnDecision
from core.levels import BackgroundMeter, LevelMeter
from core.near_speech import NearSpeech
from core.partials import PartialConfig, PartialPolicy
from core.room import Overtaking

FRAME_S = VAD_FRAME / ASR_RATE

SpeechProbability = Callable[[np.ndarray], float]  # one VAD_FRAME of 16 kHz audio -> P(speech)


@dataclass(frozen=True)
class Ended:
    """The endpoint: speech that ended at ``end`` was followed by the hangover's silence,
    or by an end-of-turn check that called the turn finished at ``t``."""

    end: float
    t: float
    level_db: float | None  # loudness of the utterance's voiced frames
    background_db: float | None  # of the microphone without speech during the reply
    room: bool = False  # it was the room talking (core/room.py), never the person: not a turn


@dataclass(frozen=True)
class SpeechContinues:
    """A voiced frame inside an utterance: the person has spoken until ``t``."""

    t: float


@dataclass(frozen=True)
class SpeechPaused:
    """A silent frame inside an utterance: speech up to ``end``, then ``silence_s`` of silence."""

    end: float
    silence_s: float


@dataclass(frozen=True)
class PartialDue:
    """Start a partial pass on the utterance's audio from ``onset`` on; tell
    :meth:`Hearing.partial_finished` when it is done (that releases the budget)."""

    policy: PartialPolicy
    onset: float
    # A closing partial: the speech ended here and the pause after it has begun (see
    # PartialConfig.closing_after_s); its words go to Conversation.closing_partial. None: a preview.
    end: float | None = None


@dataclass(frozen=True)
class TurnChecked:
    """What an end-of-turn check's answer decided (:meth:`Hearing.turn_checked`)."""

    # end: the turn is over; wait: not yet; hold: finished by the sound of it, the transcript
    # decides when it comes; stale, failed: the answer counted for nothing
    decision: EndOfTurnDecision
    trails_off: bool  # the transcript of the speech so far trails off, and weighed the probability down
    ended: Ended | None  # the endpoint (decision "end")


@dataclass(frozen=True)
class TranscriptWeighed:
    """What a pause's transcript decided (:meth:`Hearing.transcript`)."""

    unfinished: bool  # its words are an unfinished sentence (or trail off): they hold the turn open
    ended: Ended | None  # the endpoint, when the model had said finished and the words agree


Heard = SpeechOnset | OnsetDropped | SpeechStart | Ended | SpeechContinues | SpeechPaused | PartialDue | CheckEndOfTurn


class Hearing:
    """One session's microphone, frame by frame.

    ``vad`` scores the echo-cancelled signal. With ``gate`` (echo
    cancellation on), ``vad_raw`` scores the raw microphone too and the gate
    decides which view counts (see :class:`~core.echo_gate.EchoGate`).
    ``partials``: the schedule of partial passes (None: no partials);
    ``budget``: the cap on partial passes in flight over all sessions.
    ``end_of_turn``: an end-of-turn model decides when the turn is over, and
    the endpointer's hangover becomes its ``max_wait_s`` (None: silence alone,
    ``endpoint.hangover_s``).
    """

    def __init__(
        self,
        endpoint: EndpointConfig,
        vad: SpeechProbability,
        vad_raw: SpeechProbability | None = None,
        gate: EchoGate | None = None,
        partials: PartialConfig | None = None,
        budget: Budget | None = None,
        end_of_turn: EndOfTurnConfig | None = None,
        transcripts: bool = False,
        near: NearSpeech | None = None,
        vad_unsuppressed: SpeechProbability | None = None,
    ) -> None:
        """``transcripts``: the caller gives :meth:`transcript` a transcript of each pause;
        ``near``: speech far under the person's own level does not count (None: all counts);
        ``vad_unsuppressed``: the VAD of the sound before the noise suppressor, where a talking room
        is looked for when one is on (RNNoise turns babble into bursts over a silence it made,
        and the room's floor is lost; None: the room is looked for in what the VAD hears)."""
        if (gate is None) != (vad_raw is None):
            raise ValueError("the echo gate needs the raw microphone's VAD, and only it does")
        self.end_of_turn = EndOfTurn(end_of_turn, transcripts) if end_of_turn is not None else None
        if end_of_turn is not None:  # the model decides; silence alone ends the turn only at max_wait_s
            endpoint = dataclasses.replace(endpoint, hangover_s=end_of_turn.max_wait_s)
        self.endpoint = endpoint
        self.endpointer = Endpointer(endpoint, FRAME_S)
        self._vad = vad
        self._vad_raw = vad_raw
        self._vad_unsuppressed = vad_unsuppressed
        self.gate = gate
        self.near = near
        room = near.room if near is not None else None
        self._overtaking = Overtaking(room.config, FRAME_S) if room is not None else None
        self._partials = partials
        self._budget = budget if budget is not None else Budget()
        self.level = LevelMeter()  # loudness of the current utterance's voiced frames
        # The same in the sound the room is looked for in (before a noise suppressor): RNNoise lets a
        # voice in over babble quietly and then loud, and in its output the person's own words came
        # in 6 dB over their first ones, as if over a TV (their question ended as the room's).
        self.room_level = LevelMeter()
        self.background = BackgroundMeter()  # and of the rest, while the assistant plays
        self.frames = 0  # frames scored so far
        self.utterance_onset = 0.0
        self.partial: PartialPolicy | None = None  # the current utterance's schedule
        # The silences inside the current utterance that the person spoke on after, (start, end)
        # on the timeline (what Whisper hears shortened: core/audio.py, shorten_pauses).
        self.pauses: list[tuple[float, float]] = []
        self._pause: tuple[float, float] | None = None  # the silence it is in now
        self._cleaned = np.zeros(0, dtype=np.float32)
        self._raw = np.zeros(0, dtype=np.float32)
        self._far = np.zeros(0, dtype=np.float32)
        self._unsuppressed = np.zeros(0, dtype=np.float32)

    @property
    def heard_s(self) -> float:
        """Audio scored so far, in seconds: the end of the last frame on the session's timeline."""
        return self.frames * FRAME_S

    def push(
        self,
        cleaned: np.ndarray,
        raw: np.ndarray,
        far: np.ndarray,
        playing: bool,
        unsuppressed: np.ndarray | None = None,
    ) -> list[Heard]:
        """The next microphone samples: echo-cancelled, raw (the same span), and what the speaker
        played over it (a continuous stream; it may run behind). ``playing``: reply audio is
        queued, so frames without speech measure the background the assistant talks over;
        ``unsuppressed``: ``cleaned`` before the noise suppressor (None: none is on)."""
        self._cleaned = np.concatenate([self._cleaned, cleaned])
        self._raw = np.concatenate([self._raw, raw])
        if self.gate is not None:
            self._far = np.concatenate([self._far, far])
        if unsuppressed is not None and self._vad_unsuppressed is not None:
            self._unsuppressed = np.concatenate([self._unsuppressed, unsuppressed])
        out: list[Heard] = []
        while len(self._cleaned) >= VAD_FRAME:
            frame, self._cleaned = self._cleaned[:VAD_FRAME], self._cleaned[VAD_FRAME:]
            raw_frame, self._raw = self._raw[:VAD_FRAME], self._raw[VAD_FRAME:]
            far_frame, self._far = self._far[:VAD_FRAME], self._far[VAD_FRAME:]
            out += self._frame(frame, raw_frame, far_frame, playing, self._room_view())
        return out

    def _room_view(self) -> tuple[float, float] | None:
        """The next frame of the sound before the suppressor, as the room hears it: its VAD
        probability and mean square (None: no suppressor on, the room hears what the VAD does)."""
        vad = self._vad_unsuppressed
        if vad is None or len(self._unsuppressed) < VAD_FRAME:
            return None
        frame, self._unsuppressed = self._unsuppressed[:VAD_FRAME], self._unsuppressed[VAD_FRAME:]
        return vad(frame), float(np.mean(frame.astype(np.float64) ** 2))

    def partial_finished(self, policy: PartialPolicy, text: str | None) -> tuple[str, str] | None:
        """A partial pass came back (``text`` None: it failed). Returns (stable, unstable) when the
        current utterance's partial changed."""
        self._budget.release()
        if text is None:
            policy.running = False
            return None
        changed = policy.finished(text)
        return changed if policy is self.partial else None

    def turn_checked(self, check: CheckEndOfTurn, probability: float | None, t: float) -> TurnChecked:
        """The end-of-turn model's answer to ``check`` at ``t`` (``probability`` None: the model
        raised, and this pause is left to silence). On "end" the utterance is over now: ``ended``
        is its endpoint, with the same loudness figures as the hangover's, and the next voiced
        frames start a new utterance. An answer for speech the person has since continued, or for
        an utterance already ended, is "stale" and changes nothing."""
        eot = self.end_of_turn
        if eot is None:
            raise ValueError("no end-of-turn model: nothing was checked")
        if eot.pending != check.check:
            return TurnChecked("stale", False, None)
        if probability is None:
            eot.failed(check.check, t)
            return TurnChecked("failed", False, None)
        trails = eot.trails_off
        ended = None
        for heard in self._end_of_turn(eot.answer(check.check, probability, t), t):
            if isinstance(heard, Ended):
                ended = heard
        if ended is not None:
            return TurnChecked("end", trails, ended)
        return TurnChecked("hold" if eot.holding else "wait", trails, None)

    def transcript(
        self, text: str, end: float, t: float, sentence_end: float | None = None
    ) -> TranscriptWeighed | None:
        """A transcript of the utterance's speech up to ``end`` (the early final), with the LLM's
        probability that its sentence ends there (None: not asked). One that trails off ("...
        and") weighs the end-of-turn model's answers down in this pause, and one the LLM reads as
        unfinished overrules its "finished". None: it does not count (no end-of-turn model, or
        the person spoke on past ``end``)."""
        eot = self.end_of_turn
        if eot is None:
            return None
        commands = eot.transcript(text, end, t, sentence_end)
        if commands is None:
            return None
        ended = next((h for h in self._end_of_turn(commands, t) if isinstance(h, Ended)), None)
        return TranscriptWeighed(eot.words_hold, ended)

    def _end_of_turn(self, commands: list[EndOfTurnCommand], t: float) -> list[Heard]:
        """The end-of-turn decisions as what was heard: checks to run, or the endpoint now."""
        out: list[Heard] = []
        for cmd in commands:
            if isinstance(cmd, CheckEndOfTurn):
                out.append(cmd)
                continue
            edge = self.endpointer.end_now(t)
            if edge is not None:
                out.append(self._ended(edge))
        return out

    def _ended(self, edge: SpeechEnd) -> Ended:
        self.partial = None
        return Ended(edge.end, edge.t, self.level.db, self.background.db)

    def _frame(
        self, frame: np.ndarray, raw: np.ndarray, far: np.ndarray, playing: bool, room_view: tuple[float, float] | None
    ) -> list[Heard]:
        t = self.frames * FRAME_S
        self.frames += 1
        prob = self._vad(frame)
        unsuppressed = self._unsuppressed_voice(prob, room_view)
        if unsuppressed is not None:
            prob = unsuppressed[0]
        if self.gate is not None and self._vad_raw is not None:
            self.gate.far_frame(far)
            prob = self.gate(self._vad_raw(raw), prob, raw, frame)
        near = self.gate.near_energy(raw, frame) if self.gate is not None else float(np.mean(frame**2))
        if unsuppressed is not None:  # its level as it was before the suppressor took it down
            near = max(near, unsuppressed[1])
        if self.near is not None:
            if self.near.room is not None:
                self.near.room.hears(self.room_level.db if self.endpointer.in_speech else None)
            prob = self.near(prob, near, room_view)
            if (dropped := self._rooms(prob, t)) is not None:
                return [dropped]
        ep = self.endpointer
        was_pending = ep.in_speech or ep.pending_onset is not None
        edge = ep.push(prob, t)
        if prob >= self.endpoint.threshold:
            if not was_pending:
                self.level.reset()  # the first voiced frame of what may become an utterance
                self.room_level.reset()
            self.level.add(near)
            self.room_level.add(near if room_view is None else room_view[1])
        elif prob < NO_SPEECH_BELOW and playing:
            self.background.add(near)  # what the microphone hears while the assistant talks
        eot = self.end_of_turn
        if isinstance(edge, SpeechStart):
            self.utterance_onset = edge.onset
            if self._overtaking is not None:
                self._overtaking.started()
            self.partial = PartialPolicy(self._partials) if self._partials is not None else None
            self.pauses, self._pause = [], None
            if eot is not None:
                eot.speech_started(edge.onset, edge.t)
            return [edge]
        if isinstance(edge, SpeechEnd):
            if eot is not None:  # max_wait_s of silence: the model never called it finished
                eot.speech_ended(edge.t)
            return [self._ended(edge)]
        if edge is not None:
            return [edge]
        if not ep.in_speech:
            return []
        # A voiced frame says how long the person has really spoken (the hangover's silence does not count).
        end_t = t + FRAME_S
        out: list[Heard]
        if ep.silence_s == 0.0:
            if self._pause is not None:  # the person went on after it
                self.pauses.append(self._pause)
                self._pause = None
            out = [SpeechContinues(end_t)]
            if eot is not None:
                eot.speech_continues(end_t)
        else:
            self._pause = (ep.last_voiced_end, ep.last_voiced_end + ep.silence_s)
            out = [SpeechPaused(ep.last_voiced_end, ep.silence_s)]
            if eot is not None:
                out += self._end_of_turn(eot.speech_paused(ep.last_voiced_end, ep.silence_s, end_t), end_t)
                if not ep.in_speech:
                    return out  # ended now: no partial of an utterance that is over
        due = self._partial_due(ep.last_voiced_end if ep.silence_s > 0.0 else None)
        if due is not None:
            out.append(due)
        return out

    def _unsuppressed_voice(self, prob: float, room_view: tuple[float, float] | None) -> tuple[float, float] | None:
        """The frame's (probability, mean square) before the noise suppressor, where that heard the
        person's voice and the suppressor's output did not; None: the suppressor's output stands.
        (RNNoise took a voice coming in over a song for the room: ``NearSpeech.lets_in``.)"""
        if room_view is None or self.near is None:
            return None
        theirs = self.near.lets_in(*room_view)
        if not theirs or prob >= self.endpoint.threshold or room_view[0] < self.endpoint.threshold:
            return None
        return room_view

    def _rooms(self, prob: float, t: float) -> Ended | None:
        """The utterance open now ends as the room's (core/room.py) if the room was just found
        talking and its voiced frames never stood out of the room's floor (it opened on the
        room's own sound), or if, before the person's first turn, a louder voice has taken it over."""
        near, ep, level = self.near, self.endpointer, self.room_level.db
        if near is None or near.room is None or not ep.in_speech:
            return None
        found = near.room.found and level is not None and near.room.under(level)
        overtaken = (
            near.person.db is None
            and prob >= self.endpoint.threshold
            and self._overtaking is not None
            and self._overtaking(level, near.room_window_db, t - self.utterance_onset)
        )
        if not (found or overtaken):
            return None
        if overtaken and self._overtaking is not None and self._overtaking.base is not None:
            near.room.overtaken(self._overtaking.base, near.room_window_db or self._overtaking.base)
        edge = ep.end_now(t)
        assert edge is not None
        if self.end_of_turn is not None:
            self.end_of_turn.speech_ended(t)
        return dataclasses.replace(self._ended(edge), room=True)

    def _partial_due(self, paused_after: float | None) -> PartialDue | None:
        """A partial pass to start now, if one is due; ``paused_after``: the speech ended there
        and the person is in the pause after it (None: speaking)."""
        policy = self.partial
        if policy is None:
            return None
        if not self._budget.available:
            # Shed load: partials are previews, and with many sessions they would
            # queue for the recognizer and take the cores the finals need.
            return None
        audio_s = self.heard_s - self.utterance_onset
        silence_s = self.endpointer.silence_s
        if paused_after is not None and policy.closing_due(audio_s, paused_after, silence_s):
            policy.closes(paused_after)
        elif policy.due(audio_s, silence_s):
            paused_after = None
        else:
            return None
        policy.started(audio_s)
        self._budget.take()
        return PartialDue(policy, self.utterance_onset, paused_after)
