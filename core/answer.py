"""The person's turn: their speech, its transcripts, and the reply that answers it.

The VAD's edges number the utterances; at the endpoint the final pass is asked for (or its
early pass, started in the pause before, is taken: ``early_final_s``), and its transcript is
answered: by committing the speculative reply started on the same words
(:mod:`core.speculation`), else by a new one. Nothing the person says is lost: a final
that comes while a reply is in flight waits and is answered with the next turn, in one reply
(stored when the session ends unanswered); the words that cut a reply are its turn even
should the final pass find none; speech over the reply is judged by
:mod:`core.over_reply`. These rules are about when the person's words become a turn and
a request, kept apart from the reply's course (:mod:`core.reply_flow`) that follows.
"""

from __future__ import annotations

from core.asking import Asking
from core.commands import Command, Emit, Goodbye, TranscribeFinal
from core.events import AsrFinal, ResponseStart, SpeechEnd, SpeechStart
from core.floor import Floor, State
from core.goodbye import is_goodbye
from core.history import Turn
from core.language import Detected
from core.over_reply import OverReply
from core.reply import Reply
from core.reply_flow import ReplyFlow
from core.speculation import EarlyFinal, Speculation
from core.stability import same_words
from core.tool_rounds import ToolRounds


class Answering:
    """The person's turns in one conversation and their answers (see the module's docstring)."""

    def __init__(
        self,
        floor: Floor,
        spec: Speculation,
        tool_rounds: ToolRounds,
        over: OverReply,
        flow: ReplyFlow,
        system_prompt: str | None,
        early_final_s: float | None,
    ) -> None:
        self.floor = floor
        self.spec = spec
        self.tool_rounds = tool_rounds
        self.over = over
        self.flow = flow
        self.asking = Asking(floor, tool_rounds, system_prompt, flow.steps)
        self.early_final_s = early_final_s
        self._early: EarlyFinal | None = None
        self._paused_end: float | None = None  # the person is in a pause after speech that ended here
        # utterance -> loudness of its voiced frames, and of the background during the reply (dB)
        self._levels: dict[int, tuple[float | None, float | None]] = {}
        self._typed = 0  # the last typed turn's utterance number (user_text(): -1, -2, ...)

    def speech_started(self, onset: float, t: float) -> list[Command]:
        """The VAD confirmed speech that began at ``onset``: a new utterance."""
        f = self.floor
        f.user_speaking = True
        f.utterance += 1
        f.onset = onset
        return [Emit(SpeechStart(t, onset=onset, utterance=f.utterance)), *self.over.speech_started(onset, t)]

    def speech_paused(self, end: float, silence_s: float, t: float) -> list[Command]:
        """Speech that reached ``end`` has been followed by ``silence_s`` of silence: the early final may start."""
        f = self.floor
        self._paused_end = end
        early = self._early
        if self.early_final_s is None or silence_s < self.early_final_s - 1e-9 or not f.user_speaking:
            return []
        if early is not None and (early.text is None or early.end == end):
            return []  # one early pass at a time (a stale one still holds the recognizer)
        self._early = EarlyFinal(f.utterance, end)
        return [TranscribeFinal(f.utterance, f.onset, end, True, f.over_reply(), self.asking.question())]

    def early_transcript(
        self,
        utterance: int,
        end: float,
        text: str,
        t: float,
        no_speech_prob: float,
        heard: Detected | None = None,
    ) -> list[Command]:
        """The answer of an early final pass: the final if the endpoint came, else a speculative start
        (asked in the language its words are in: ``heard``)."""
        early = self._early
        if early is None or early.utterance != utterance or early.end != end:
            return []
        if early.stale:
            self._early = None
            return []
        if early.ended:
            self._early = None
            return self.transcript_final(utterance, text, self.floor.onset, end, t, no_speech_prob, heard)
        early.text, early.no_speech_prob, early.heard = text, no_speech_prob, heard
        if text.strip():
            self.floor.language.heard(heard, end - self.floor.onset)
        spec = self.spec.reply
        if spec is not None and spec.provisional and (spec.utterance, spec.end) == (utterance, end):
            if same_words(spec.user_text, text):
                spec.provisional = False  # the closing partial heard it right: the reply goes on
                return []
            return self.spec.discard(t, "transcript") + self.speculate(utterance, end, text, t)
        return self.speculate(utterance, end, text, t)

    def closing_partial(self, utterance: int, end: float, text: str, t: float) -> list[Command]:
        """The partial model's words for the speech up to ``end``: a provisional speculative start."""
        f = self.floor
        if utterance != f.utterance or end != self._paused_end or not f.user_speaking:
            return []  # the person went on, or the turn has ended
        early = self._early
        if early is not None and early.end == end and early.text is not None:
            return []  # the early final is in already
        out = self.speculate(utterance, end, text, t)
        if self.spec.reply is not None and out:
            self.spec.reply.provisional = True
        return out

    def early_failed(self, utterance: int, end: float) -> list[Command]:
        """An early final pass raised: the endpoint's own pass is needed after all."""
        early = self._early
        if early is None or early.utterance != utterance or early.end != end:
            return []
        self._early = None
        if early.ended and not early.stale:
            f = self.floor
            return [TranscribeFinal(utterance, f.onset, end, False, f.over_reply(), self.asking.question())]
        return []

    def speech_continues(self, t: float) -> list[Command]:
        """The person is still speaking at ``t``: an early final or speculation on less is stale."""
        f = self.floor
        self._paused_end = None
        early = self._early
        if early is not None and early.utterance == f.utterance and t > early.end + 1e-9:
            early.stale = True  # spoken past the audio it was given
            if early.text is not None:
                self._early = None
        spec = self.spec.reply
        if spec is not None and spec.utterance == f.utterance and t > spec.end + 1e-9:
            return self.spec.discard(t, "speech")  # the person goes on: its transcript is not the turn
        return []

    def speech_ended(
        self, end: float, t: float, level_db: float | None, background_db: float | None, room: bool = False
    ) -> list[Command]:
        """The endpoint: the final pass is asked for, or the early one's answer taken. ``room``: it was
        the room talking (core/room.py): it ends unheard, as if its final held no words."""
        f = self.floor
        if not f.user_speaking:
            return []
        f.user_speaking = False
        self._levels[f.utterance] = (level_db, background_db)
        f.transcribing.add(f.utterance)
        if f.state is State.USER_SPEAKING:
            f.state = State.THINKING
        ended = SpeechEnd(t, end=end, utterance=f.utterance, level_db=level_db, background_db=background_db, room=room)
        out: list[Command] = [Emit(ended)]
        if room:
            return out + self.transcript_final(f.utterance, "", f.onset, end, t, 1.0)
        spec = self.spec.reply
        if spec is not None and (spec.utterance != f.utterance or spec.end != end):
            out += self.spec.discard(t, "speech")  # started on less than the whole utterance
        early = self._early
        if early is not None and early.utterance == f.utterance and early.end == end and not early.stale:
            if early.text is None:
                early.ended = True  # its answer will be the final
                return out
            self._early = None
            return out + self.transcript_final(
                f.utterance,
                early.text,
                f.onset,
                end,
                t,
                early.no_speech_prob,
                early.heard,
            )
        return [*out, TranscribeFinal(f.utterance, f.onset, end, False, f.over_reply(), self.asking.question())]

    def transcript_final(
        self,
        utterance: int,
        text: str,
        onset: float,
        end: float,
        t: float,
        no_speech_prob: float,
        heard: Detected | None = None,
    ) -> list[Command]:
        """The ASR final for an utterance: judged if over the reply, else answered (or kept waiting).
        Its language (``heard``: as Whisper detected it) becomes the conversation's, unless the
        utterance is too short to tell (core/language.py)."""
        f = self.floor
        over = self.over
        f.transcribing.discard(utterance)
        text = over.words_of(utterance, text)
        if text:
            f.language.heard(heard, end - onset)
        said_in = f.language.reported
        out: list[Command] = [Emit(AsrFinal(t, text=text, utterance=utterance, language=said_in))]
        spec = self.spec.reply
        if spec is not None and spec.utterance == utterance and not same_words(spec.user_text, text):
            out += self.spec.discard(t, "transcript")
        level, background = self._levels.pop(utterance, (None, None))
        hold = f.hold
        if hold is not None and hold.utterance == utterance:
            if over.interrupts(hold, text, no_speech_prob, level, background):
                out += over.barge_in(t, reason="words")
            else:
                return out + over.resume(t, text, reason="backchannel" if text else "noise")
        if not text:
            if f.response is None and not f.waiting:
                f.state = f.idle_state()
            return out
        if level is not None and hold is None:  # the person's own turn: how loud they speak
            over.person.learn(level)
        if f.response is not None:
            f.waiting.append((utterance, text, onset, end))
            return out
        return out + self.answer(utterance, text, onset, end, t)

    def user_text(self, text: str, t: float) -> list[Command]:
        """The client typed ``text``: a turn answered as a final would be, numbered -1, -2, ..."""
        f = self.floor
        text = text.strip()
        if not text:
            return []
        self._typed -= 1
        out: list[Command] = [Emit(AsrFinal(t, text=text, utterance=self._typed, language=f.language.reported))]
        if f.response is not None or f.user_speaking or f.transcribing:
            f.waiting.append((self._typed, text, t, t))  # answered with the next turn
            return out
        out += self.spec.discard(t, "transcript")
        return out + self.answer(self._typed, text, t, t, t)

    def end(self, t: float) -> list[Command]:
        """The conversation ends: the reply is kept as far as heard, the finals not answered are stored."""
        out = self.spec.discard(t, "closed")
        out += self.over.cut(t, "closed")
        # What the person said and was not answered yet is kept all the same.
        waiting, self.floor.waiting = self.floor.waiting, []
        for _, text, onset, end in waiting:
            self.floor.history.add(Turn("user", text, t_start=onset, t_end=end))
        return out

    def answer(self, utterance: int, text: str, onset: float, end: float, t: float) -> list[Command]:
        """Answer the person's final ``text`` (and any said before it that is still unanswered)."""
        f = self.floor
        out: list[Command] = []
        spec = self.spec.reply
        if spec is not None:
            # Its words, on the same conversation (the final may differ in case and punctuation from
            # the closing partial it was started on; the turn is stored as the final says it).
            if (
                spec.utterance == utterance
                and same_words(spec.user_text, text)
                and spec.messages[:-1] == self.asking.messages(text)[:-1]
            ):
                spec.user_text = text
                return self.commit(spec, onset, end, t)
            out += self.spec.discard(t, "transcript")
        # Finals that came while a reply played on are the turn's beginning: one reply to all of it.
        waiting, f.waiting = f.waiting, []
        for _, said, said_onset, said_end in waiting:
            f.history.add(Turn("user", said, t_start=said_onset, t_end=said_end))
        messages = self.asking.messages(text)
        f.history.add(Turn("user", text, t_start=onset, t_end=end, extra=self.asking.said_in()))
        went_on_from = self.over.went_on_from.pop(utterance, "")  # its first half, answered in a reply it cut unheard
        answered = " ".join([*filter(None, [went_on_from]), *(w[1] for w in waiting), text])
        r = f.response = self.flow.new_response(answered, t)
        r.messages = messages
        f.state = State.THINKING
        return [
            *out,
            Emit(ResponseStart(t, response=r.id, utterance=utterance, text=answered)),
            *self.asking.first_request(r, answered, t),
            *self._goodbye(r, answered),
            *self.over.hold_for_later_speech(r, utterance, t),
        ]

    def _goodbye(self, r: Reply, said: str) -> list[Command]:
        """A reply to a goodbye may be the conversation's last."""
        return [Goodbye(r.id)] if is_goodbye(said, self.floor.language.current) else []

    def speculate(self, utterance: int, end: float, text: str, t: float) -> list[Command]:
        """The early final ``text`` of the speech up to ``end`` is in: start the reply to it now, unheard."""
        f = self.floor
        text = text.strip()
        if (
            not self.spec.allowed(text)
            or f.state is not State.USER_SPEAKING  # a reply is in flight, or an earlier turn is not answered
            or f.response is not None
            or f.waiting
            or f.transcribing
            or self.asking.reads_first()  # its request waits for what the person's turn is found to say
            or self.asking.heard_transition(text) is not None  # the flow moves on: not the model's to answer
        ):
            return []
        r = self.flow.new_response(text, t)
        return self.spec.start(r, utterance, end, self.asking.messages(text), self.tool_rounds.offered())

    def commit(self, r: Reply, onset: float, end: float, t: float) -> list[Command]:
        """The endpoint, on the transcript ``r`` was started on: it becomes the reply, from now on."""
        f = self.floor
        f.history.add(Turn("user", r.user_text, t_start=onset, t_end=end, extra=self.asking.said_in()))
        out = self.spec.commit(t)
        f.response = r
        f.state = State.THINKING
        out += self.tool_rounds.run_held(r, t)  # its calls run now that it is the reply
        out += self._goodbye(r, r.user_text)
        return out + self.tool_rounds.next_round(r, t) + self.flow.maybe_finish(r, t)
