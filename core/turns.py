"""Turn-taking: who holds the floor, and what to do next.

:class:`Conversation` is the pipeline's core. It performs no I/O and reads no
clock: the session feeds it what happened (speech edges from the VAD, the ASR
final, LLM deltas, synthesized chunks, samples played), each with the time on
the session's timeline, and it answers with :data:`Command` objects that the
session carries out (:mod:`core.commands`). Every rule about turn-taking
lives in the core, in the module of its concern, to which the conversation
delegates; here is the one surface the shell calls.

States::

    LISTENING ──speech──▶ USER_SPEAKING ──endpoint──▶ THINKING ──first audio──▶ SPEAKING
        ▲                                    (ASR final, LLM)                  │    ▲
        │                                                      speech onset    ▼    │ backchannel,
        │                                                                    PAUSED ─┘ noise: resume
        │                                                                      │ real speech: barge-in
        └──────────── playback ended ◀── SPEAKING        USER_SPEAKING ◀───────┘ (cut to what was heard)

The person's speech is segmented the whole time, whatever the assistant does.

Barge-in: the policy (what speech over the reply takes the floor) is
:mod:`core.barge_in`; the reply pauses on the speech's onset
(:meth:`Conversation.speech_onset`) and is cut or resumed by :mod:`core.over_reply`.

Nothing the person says is lost. Speech that goes on after an endpoint is
speech over the reply, whenever the reply starts: one that starts while the
person is speaking again (their final came after they went on) starts held,
and that speech is judged like any other over it. The reply's own words
discount it only if they could have been played (synthesized before the
pause): before then it cannot be their echo. The words that cut a reply are
its turn even should the final pass find none. Finals that came while a reply
played on without being judged (an earlier one held it) are answered with the
next turn, in one reply, and stored when the session ends unanswered.

Where each concern lives: the state they share, who holds the floor
(:mod:`core.floor`); the person's turn, its transcripts and the reply
that answers it (:mod:`core.answer`); speech over the reply
(:mod:`core.over_reply`); the reply's course, from its request to its
last sample played, and announcements (:mod:`core.reply_flow`); the
reply in flight and its tool-round state (:mod:`core.reply`),
the reply started before the endpoint (:mod:`core.speculation`), tool
calls, their rounds and the filler (:mod:`core.tool_rounds`), what of a
reply was heard and is stored (:mod:`core.truncation`), the words of a
transcript (:mod:`core.words`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core import endpointing  # its SpeechStart is the VAD's edge; events.SpeechStart is the event
from core.answer import Answering
from core.barge_in import BargeInPolicy
from core.budget import Budget
from core.commands import Command
from core.endpointing import OnsetDropped, SpeechOnset
from core.events import BargeInReason
from core.floor import Floor, State
from core.flow import FlowRun
from core.hearing import Ended, Heard, SpeechContinues, SpeechPaused
from core.history import History, ToolStatus
from core.language import ConversationLanguage, Detected, LanguageConfig
from core.ledger import Word
from core.near_speech import PersonLevel
from core.over_reply import OverReply
from core.reply import Reply
from core.reply_flow import ReplyFlow
from core.reply_length import ReplyLength
from core.speculation import Speculation
from core.tool_calls import ToolCall, ToolCallDelta
from core.tool_rounds import ToolRounds
from core.truncation import HeardReplies


class Conversation:
    """The turn-taking state machine of one session."""

    def __init__(
        self,
        system_prompt: str | None = None,
        history: History | None = None,
        barge_in: BargeInPolicy | None = None,
        output_rate: int = 24000,
        early_final_s: float | None = 0.128,
        first_phrase_min_words: int | None = 5,
        speculation: Budget | None = None,
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tool_rounds: int = 1,
        filler: str | None = "One moment.",
        filler_delay_s: float = 1.0,
        language: LanguageConfig | None = None,
        person: PersonLevel | None = None,
        reply_length: ReplyLength | None = None,
        flow: FlowRun | None = None,
    ) -> None:
        """``early_final_s``: silence after which the final ASR pass starts, before the endpoint
        (None: only at the endpoint). If the person goes on speaking its answer is dropped; if not,
        the endpoint finds the transcript ready or on its way, the hangover's wait spent on the ASR.
        ``speculation``: the budget of speculative replies over all sessions
        (None: the reply starts at the endpoint); see the module's docstring.
        ``tools``: the specs of the tools offered to the model (None: none); a reply
        asks the model at most ``max_tool_rounds`` times with them, then once more without.
        ``filler``: said once a reply when tools have kept it quiet ``filler_delay_s`` (None: never).
        ``language``: the language spoken (None: English); ``person``: their loudness, learnt here;
        ``reply_length``: how much of a reply is said (None: all of it); ``flow``: the agent's steps
        (None: one prompt, every tool offered), whose functions the shell answers as tools."""
        self._floor = Floor(history if history is not None else History(), language=ConversationLanguage(language))
        self._tool_rounds = ToolRounds(tools, max_tool_rounds, filler, filler_delay_s)
        self._spec = Speculation(speculation)
        heard_replies = HeardReplies(self._floor.history, output_rate)
        self._over = OverReply(self._floor, barge_in or BargeInPolicy(), heard_replies, person or PersonLevel())
        self._flow = ReplyFlow(
            self._floor, self._spec, self._tool_rounds, heard_replies, output_rate, first_phrase_min_words, reply_length
        )
        self._turn = Answering(
            self._floor, self._spec, self._tool_rounds, self._over, self._flow, system_prompt, early_final_s
        )
        self._over.finish, self._over.on_cut = self._flow.maybe_finish, self._flow.steps.reply_cut
        self._flow.answer = self._turn.answer
        self._tool_rounds.flow, self._tool_rounds.restate = flow, self._turn.asking.step_messages
        self._tool_rounds.on_step_entered = self._flow.steps.entered
        self._tool_rounds.on_step_call = self._flow.steps.call_done
        self._tool_rounds.on_hook = self._flow.steps.hook_done
        self._flow.steps.turn_read = self._turn.asking.read_turn
        self._over.says_the_same = self._turn.asking.says_the_same
        heard_replies.extra = flow.snapshot if flow is not None else dict

    def offer_tools(
        self, specs: list[dict[str, Any]] | None, servers: dict[str, str], grounded: Iterable[str] = ()
    ) -> None:
        """Tools offered from the next request on (None: none), their MCP servers, those grounded (core/grounded.py)."""
        self._tool_rounds.tools, self._tool_rounds.servers = specs or None, dict(servers)
        self._tool_rounds.grounded = frozenset(grounded)

    @property
    def state(self) -> State:
        return self._floor.state

    @property
    def user_speaking(self) -> bool:
        return self._floor.user_speaking

    @property
    def history(self) -> History:
        return self._floor.history

    @property
    def user_level_db(self) -> float | None:
        """The person's loudness in the turns answered so far (dB; None: none yet)."""
        return self._over.person.db

    @property
    def system_prompt(self) -> str | None:
        """The instructions the model reads first; the shell may set them (a Realtime session.update)."""
        return self._turn.asking.system_prompt

    @system_prompt.setter
    def system_prompt(self, prompt: str | None) -> None:
        self._turn.asking.system_prompt = prompt

    @property
    def output_rate(self) -> int:
        return self._flow.output_rate

    @property
    def response(self) -> Reply | None:
        return self._floor.response

    @property
    def speculation(self) -> Reply | None:
        """The speculative reply in flight (None: none)."""
        return self._spec.reply

    @property
    def utterance(self) -> int:
        """The number of the last utterance the VAD confirmed (0: none yet)."""
        return self._floor.utterance

    @property
    def paused(self) -> bool:
        return self._floor.hold is not None

    # -- the person -------------------------------------------------------

    def heard(self, heard: Heard, t: float) -> list[Command]:
        """What the hearing front end (:meth:`~core.hearing.Hearing.push`) reported, at
        ``t`` on the session's clock: the speech edges, each frame inside an utterance, the
        endpoint. ``PartialDue`` and ``CheckEndOfTurn`` ask for engine work, not a turn-taking
        decision: the shell runs them itself; given one, this returns [] and changes nothing.
        A voiced frame is dated by its own time, the other edges by ``t``, when the session heard of them."""
        if isinstance(heard, SpeechContinues):
            return self.speech_continues(heard.t)
        if isinstance(heard, SpeechPaused):
            return self.speech_paused(heard.end, heard.silence_s, t)
        if isinstance(heard, SpeechOnset):
            return self.speech_onset(heard.onset, t)
        if isinstance(heard, OnsetDropped):
            return self.onset_dropped(t)
        if isinstance(heard, endpointing.SpeechStart):
            return self.speech_started(heard.onset, t)
        if isinstance(heard, Ended):
            return self._turn.speech_ended(heard.end, t, heard.level_db, heard.background_db, heard.room)
        return []  # PartialDue, CheckEndOfTurn: engine work, the shell's

    def speech_onset(self, onset: float, t: float) -> list[Command]:
        """The VAD heard voiced frames from ``onset`` on: maybe speech, not confirmed yet."""
        return self._over.onset(onset, t)

    def onset_dropped(self, t: float) -> list[Command]:
        """The voiced frames of the last :meth:`speech_onset` did not become speech."""
        return self._over.onset_dropped(t)

    def speech_started(self, onset: float, t: float) -> list[Command]:
        """The VAD confirmed speech that began at ``onset`` (pre-roll excluded)."""
        return self._turn.speech_started(onset, t)

    def speech_paused(self, end: float, silence_s: float, t: float) -> list[Command]:
        """Speech that reached ``end`` has been followed by ``silence_s`` of silence, no endpoint yet."""
        return self._turn.speech_paused(end, silence_s, t)

    def early_transcript(
        self,
        utterance: int,
        end: float,
        text: str,
        t: float,
        no_speech_prob: float = 0.0,
        heard: Detected | None = None,
    ) -> list[Command]:
        """The answer of an early final pass (a ``TranscribeFinal(early=True)``); ``heard``: its language."""
        return self._turn.early_transcript(utterance, end, text, t, no_speech_prob, heard)

    def closing_partial(self, utterance: int, end: float, text: str, t: float) -> list[Command]:
        """The partial model's words for all the speech up to ``end``, heard at the start of the
        pause after it: a speculative reply may start on them, before the early final (whose
        Whisper pass takes 150-300 ms more here), which keeps it if it hears the same words."""
        return self._turn.closing_partial(utterance, end, text, t)

    def early_failed(self, utterance: int, end: float) -> list[Command]:
        """An early final pass raised: the endpoint's own pass is needed after all."""
        return self._turn.early_failed(utterance, end)

    def speech_continues(self, t: float) -> list[Command]:
        """The person is still speaking at ``t`` (called once per VAD frame)."""
        return self._turn.speech_continues(t) + self._over.speech_continues(t)

    def interruption_checked(
        self,
        utterance: int,
        text: str,
        t: float,
        no_speech_prob: float = 0.0,
        level_db: float | None = None,
        background_db: float | None = None,
    ) -> list[Command]:
        """The words of the speech over the reply so far (a CheckInterruption's answer);
        ``level_db``: the loudness of its voiced frames so far; ``background_db``: of the
        microphone without speech during the reply."""
        return self._over.checked(utterance, text, t, no_speech_prob, level_db, background_db)

    def speech_ended(
        self, end: float, t: float, level_db: float | None = None, background_db: float | None = None
    ) -> list[Command]:
        """The endpoint: speech that ended at ``end`` was followed by enough silence;
        ``level_db``: the loudness of its voiced frames (``background_db``: as in
        :meth:`interruption_checked`)."""
        return self._turn.speech_ended(end, t, level_db, background_db)

    def transcript_final(
        self,
        utterance: int,
        text: str,
        onset: float,
        end: float,
        t: float,
        no_speech_prob: float = 0.0,
        heard: Detected | None = None,
    ) -> list[Command]:
        """The ASR final for an utterance; empty text means it held no words. ``heard``: its language."""
        return self._turn.transcript_final(utterance, text, onset, end, t, no_speech_prob, heard)

    @property
    def language(self) -> ConversationLanguage:
        """The language the conversation is in (the last utterance's, or the one it is held to)."""
        return self._floor.language

    def user_text(self, text: str, t: float) -> list[Command]:
        """The client typed ``text`` (Realtime's user message item): a turn of the person's, answered
        as a final transcript would be. Its utterance numbers are negative: it was not heard."""
        return self._turn.user_text(text, t)

    # -- the assistant ----------------------------------------------------

    def llm_delta(self, response: int, text: str, t: float) -> list[Command]:
        """Words of the model's for reply ``response``."""
        return self._flow.llm_delta(response, text, t)

    def llm_tool_call(self, response: int, delta: ToolCallDelta, t: float) -> list[Command]:
        """A piece of a tool call the model is writing: the call goes to its tool once whole."""
        return self._flow.llm_tool_call(response, delta, t)

    def llm_done(self, response: int, t: float, error: str | None = None) -> list[Command]:
        """The model's generation for reply ``response`` ended (``error``: how it failed)."""
        return self._flow.llm_done(response, t, error)

    def tool_finished(
        self,
        response: int,
        call: ToolCall,
        status: ToolStatus,
        result: str,
        duration_s: float,
        t: float,
        ran: bool = True,
        say: bool = False,
    ) -> list[Command]:
        """A ``RunTool``'s ``result`` (what the model is told), stored as a tool turn; the reply waiting for it goes
        on (core/tool_rounds.py). ``ran=False``: refused unrun (no such tool, bad arguments); ``say``: a hook's Say."""
        return self._flow.tool_finished(response, call, status, result, duration_s, t, ran, say)

    def extracted(self, response: int, values: dict[str, Any], t: float) -> list[Command]:
        """What reply ``response``'s ``Extract`` found the person said of the step's fields ({}: none)."""
        return self._flow.extracted(response, values, t)

    def summarized(self, upto: int, text: str) -> None:
        """A ``Summarize``'s answer: ``text`` summarizes the history's first ``upto`` turns (core/summary.py)."""
        self._flow.summarized(upto, text)

    def open_step(self, t: float) -> list[Command]:
        """The agent's start step opens the conversation: its ``on_enter`` hook, then its words (a reply)."""
        return self._flow.open_step(t)

    def announce(self, text: str, t: float) -> list[Command]:
        """Say ``text`` unasked (a timer that went off), now or once the floor is free: a reply like any other."""
        return self._flow.announce(text, t)

    def tick(self, t: float) -> list[Command]:
        """Time passes (called every few tens of milliseconds): a filler if the reply has been quiet
        too long since its calls went out (the tools, then the model asked again with their
        results); what was to be said unasked, once the floor is free."""
        return self._flow.tick(t)

    def tts_audio(
        self, response: int, chunk: int, text: str, n_samples: int, words: list[Word], t: float, first: bool
    ) -> list[Command]:
        """Audio for (part of) a chunk is ready and queued for playback."""
        return self._flow.tts_audio(response, chunk, text, n_samples, words, t, first)

    def tts_done(self, response: int, chunk: int, t: float) -> list[Command]:
        """Chunk ``chunk`` of reply ``response`` is all synthesized."""
        return self._flow.tts_done(response, t)

    def played(self, n_samples: int, t: float) -> list[Command]:
        """``n_samples`` of reply audio were played, the first of them at ``t``."""
        return self._flow.played(n_samples, t)

    def cancel_response(self, t: float, reason: BargeInReason = "client") -> list[Command]:
        """The client stops the reply in flight (a stop button): cut it at what was played."""
        return self._over.cut(t, reason)

    def end(self, t: float) -> list[Command]:
        """The conversation ends (the client left, Ctrl+C): a reply in flight is kept as far as it was heard."""
        return self._turn.end(t)

    def truncate(self, response: int, audio_end_ms: int, t: float) -> tuple[list[Command], str | None]:
        """The client played only the first ``audio_end_ms`` of ``response`` (OpenAI's item truncate):
        a reply in flight is cut there like a barge-in, a finished one's turn shortened to the words heard
        by then (none: removed). Returns the commands, and the turn's text now (None: no such response)."""
        samples = max(0, round(audio_end_ms * self.output_rate / 1000))
        r = self._floor.response
        if r is not None and r.id == response:
            return self._over.truncate(r, samples, t), self._over.heard_replies.text(response)
        return self._over.heard_replies.truncate(response, audio_end_ms, t)
