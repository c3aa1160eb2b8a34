"""Speech over the reply: the reply paused on its onset, then cut or resumed.

The policy (which speech takes the floor) is :mod:`core.barge_in`; this module applies
it to the reply in flight. The reply pauses on the speech's onset, before the VAD confirms
it: noise that does not become speech resumes it; speech is checked by its words every
``commit_s`` while it goes on, and at its final; words that interrupt cut the reply to what
was heard before the pause (:mod:`core.truncation`), the others (a backchannel, noise)
resume it. A stop button, the end of the conversation and a client's truncate cut it the
same way. It lives apart from the person's turn (:mod:`core.answer`) because it is
one rule with its own state (the hold, the words that cut, the person's loudness), asked at
several of the turn's moments.
"""

from __future__ import annotations

from collections.abc import Callable

from core.barge_in import BargeInPolicy, without_echo_lead
from core.commands import CheckInterruption, Command, Emit, PausePlayback, ResumePlayback
from core.events import (
    Backchannel,
    BargeInReason,
    InterruptionCheck,
    PlaybackPaused,
    PlaybackResumed,
    ResumeReason,
)
from core.floor import Floor, State
from core.near_speech import PersonLevel
from core.reply import Hold, Reply
from core.truncation import HeardReplies


class OverReply:
    """Speech over one conversation's replies (see the module's docstring)."""

    def __init__(self, floor: Floor, policy: BargeInPolicy, heard_replies: HeardReplies, person: PersonLevel) -> None:
        self.floor = floor
        self.policy = policy
        self.heard_replies = heard_replies
        self.person = person  # the person's loudness in the turns answered so far
        # utterance -> the words with which it cut the reply, and the reply's words played as it began (Hold.echo_lead)
        self.cut_by: dict[int, tuple[str, str]] = {}
        # Whether the reply may end now (it was resumed): the reply's course decides, set by the conversation.
        self.finish: Callable[[Reply, float], list[Command]] = lambda r, t: []
        # A reply is cut by the person: what an agent's flow makes of it (core/steps.py), set by the conversation.
        self.on_cut: Callable[[Reply, float], list[Command]] = lambda r, t: []
        # utterance -> the words of the turn it went on from, whose reply it cut before that made a
        # sound: "No, | at eight." is answered, and read by an agent's flow, as one turn.
        self.went_on_from: dict[int, str] = {}
        # Whether words said on from the turn a reply answers ask what that turn did (an agent's flow
        # reads them: core/asking.py): then the reply plays on. Set by the conversation.
        self.says_the_same: Callable[[Reply, str], bool] = lambda r, text: False

    def onset(self, onset: float, t: float) -> list[Command]:
        """The VAD heard voiced frames from ``onset`` on: the reply pauses while they are judged."""
        f = self.floor
        r = f.response
        if r is None or f.hold is not None:
            return []
        f.hold = self._hold(None, onset, t, r)
        f.state = State.PAUSED
        return [PausePlayback(), Emit(PlaybackPaused(t, response=r.id, utterance=None))]

    def _hold(self, utterance: int | None, onset: float, t: float, r: Reply) -> Hold:
        """The reply ``r`` paused at ``t`` on speech from ``onset``."""
        played = r.ledger.played
        lead_samples = round((t - onset + self.policy.echo_lead_s) * self.heard_replies.output_rate)
        lead = r.ledger.words_played_between(played - lead_samples, played)
        return Hold(utterance, onset, t, played, echo_lead=lead)

    def echo(self, hold: Hold) -> str:
        """The reply's words that the speech ``hold`` paused on may carry as their echo: those any of
        whose audio had played when it is judged (:meth:`~core.reply.Hold.played_out`, as its cut counts).
        The words still to play cannot be: in "Wait, four people." said as "A table for 8..." began,
        "four people" was no backchannel for sharing "for" with the reply's unplayed words."""
        r = self.floor.response
        if r is None:
            return ""
        return r.ledger.words_played_between(0, hold.played_out(r.ledger))

    def words_of(self, utterance: int, text: str) -> str:
        """The words of ``utterance``'s final pass that are the person's (asked once): those with
        which it cut the reply, should the pass find none; without the reply's own words that lead
        them, where it began over the reply (the canceller's residual of what was playing)."""
        cut_with, lead = self.cut_by.pop(utterance, ("", ""))
        text = text.strip() or cut_with
        hold = self.floor.hold
        lead = hold.echo_lead if hold is not None and hold.utterance == utterance else lead
        return without_echo_lead(text, lead, self.floor.language.current, self.policy.min_echo_similarity)

    def onset_dropped(self, t: float) -> list[Command]:
        """The voiced frames of the last onset did not become speech: the reply goes on."""
        hold = self.floor.hold
        if hold is None or hold.utterance is not None:
            return []
        return self.resume(t, "", reason="noise")

    def speech_started(self, onset: float, t: float) -> list[Command]:
        """The VAD confirmed speech (utterance ``floor.utterance``) from ``onset``: over the reply, it holds it."""
        f = self.floor
        r = f.response
        hold = f.hold
        if r is not None and hold is not None and hold.utterance is None:
            hold.utterance = f.utterance  # paused on its onset already
            hold.onset = onset
        elif r is not None and hold is None:
            f.hold = self._hold(f.utterance, onset, t, r)
            f.state = State.PAUSED
            return [PausePlayback(), Emit(PlaybackPaused(t, response=r.id, utterance=f.utterance))]
        elif f.state is State.LISTENING:
            f.state = State.USER_SPEAKING
        return []

    def speech_continues(self, t: float) -> list[Command]:
        """The speech over the reply goes on at ``t``: its words are checked every ``commit_s``."""
        f = self.floor
        hold = f.hold
        if hold is None or hold.utterance != f.utterance or hold.checking:
            return []
        if t - hold.onset - hold.checked_at < self.policy.commit_s:
            return []
        hold.checking = True
        hold.checked_at = t - hold.onset
        return [CheckInterruption(hold.utterance, hold.onset, t)]

    def checked(
        self,
        utterance: int,
        text: str,
        t: float,
        no_speech_prob: float,
        level_db: float | None,
        background_db: float | None,
    ) -> list[Command]:
        """The words of the speech over the reply so far (a CheckInterruption's answer)."""
        hold = self.floor.hold
        if hold is None or hold.utterance != utterance:
            return []
        hold.checking = False
        check = InterruptionCheck(
            t,
            utterance=utterance,
            text=text,
            no_speech_prob=no_speech_prob,
            level_db=level_db,
            background_db=background_db,
        )
        out: list[Command] = [Emit(check)]
        if self.interrupts(hold, text, no_speech_prob, level_db, background_db):
            self.cut_by[utterance] = (text, hold.echo_lead)
            out += self.barge_in(t, reason="words")
        return out

    def interrupts(
        self, hold: Hold, text: str, no_speech_prob: float, level_db: float | None, background_db: float | None
    ) -> bool:
        """Whether the words ``text`` of the speech ``hold`` paused on take the floor (the policy's
        rules, with the reply's words played and whether the person went on before it made a sound);
        where they went on and do, the turn they went on from is noted (``went_on_from``)."""
        r = self.floor.response
        if r is None:
            return False
        went_on = r.playback_started_at is None or hold.onset <= r.playback_started_at + self.policy.went_on_s
        language = self.floor.language.current
        echo = self.echo(hold)
        if not self.policy.interrupts(
            text, echo, no_speech_prob, level_db, self.person.db, background_db, language, went_on=went_on
        ):
            return False
        if went_on and self.says_the_same(r, text):
            return False
        if went_on and hold.utterance is not None:
            hold.went_on = True
            self.went_on_from[hold.utterance] = r.user_text
        return True

    def hold_for_later_speech(self, r: Reply, utterance: int, t: float) -> list[Command]:
        """Reply ``r`` to ``utterance`` starts while the person has gone on speaking (their speech
        went on over the endpoint, before the reply began): that speech is over the reply as much
        as any, so the reply is held, before any of it plays, until its words are judged."""
        f = self.floor
        later = f.utterance
        if later == utterance or f.hold is not None or not (f.user_speaking or later in f.transcribing):
            return []
        f.hold = Hold(later, f.onset, t, 0)
        f.state = State.PAUSED
        return [PausePlayback(), Emit(PlaybackPaused(t, response=r.id, utterance=later))]

    def cut(self, t: float, reason: BargeInReason) -> list[Command]:
        """Cut the reply in flight (if any) where it is now, unasked by speech (a stop button, the end)."""
        f = self.floor
        r = f.response
        if r is None:
            return []
        if f.hold is None:
            f.hold = Hold(None, t, t, r.ledger.played)
        return self.barge_in(t, reason)

    def truncate(self, r: Reply, samples: int, t: float) -> list[Command]:
        """The client played only the first ``samples`` of the reply in flight ``r``: it is cut there."""
        f = self.floor
        if f.hold is None:
            f.hold = Hold(None, t, t, min(samples, r.ledger.played))
        r.ledger.played = min(r.ledger.played, samples)
        f.hold.played = min(f.hold.played, samples)
        return self.barge_in(t, "truncate")

    def resume(self, t: float, text: str, reason: ResumeReason) -> list[Command]:
        """The speech (or noise) that paused the reply was not an interruption."""
        f = self.floor
        hold, f.hold = f.hold, None
        r = f.response
        out: list[Command] = []
        if reason == "backchannel":
            out.append(Emit(Backchannel(t, utterance=hold.utterance if hold else None, text=text)))
        if r is None:
            return out
        f.state = State.SPEAKING if r.playback_started_at is not None else State.THINKING
        out += [ResumePlayback(), Emit(PlaybackResumed(t, response=r.id, reason=reason))]
        return out + self.finish(r, t)

    def barge_in(self, t: float, reason: BargeInReason) -> list[Command]:
        """Cut the reply to what was heard before the pause, and stop everything else."""
        f = self.floor
        hold, f.hold = f.hold, None
        r = f.response
        if r is None or hold is None:
            return []
        out = self.on_cut(r, t) + self.heard_replies.cut(r, hold, t, reason)
        f.response = None
        f.state = f.idle_state()
        return out
