"""One conversation: the core and the engines, between a device's microphone and speaker.

The pump (``shell/pump.py``) calls :meth:`Session.push_audio` with each
20 ms block of microphone audio, :meth:`Session.take_audio` for reply audio
the speaker has room for, and :meth:`Session.played` with what the speaker
really played; all three are cheap and never block. What the microphone
hears goes through the pure hearing front end (``core/hearing.py``);
what it reports goes to the :class:`~core.turns.Conversation` core,
whose commands the session carries out through one table from command type
to handler: playback commands go to the device (:meth:`attach`), events to
the observers (``on_event``), engine work to the stages. On virtual time the
pump calls :meth:`Session.settle` after each block, so engine work takes no
virtual time; on real time it does not, and the very same code runs
concurrently.

The stages are modules of their own, given what they need and never the
session: hearing and the Whisper passes (``listening.py``, ``heard_audio.py``),
the end of the turn (``turn_end.py``), speaking (``speaking.py``), the tool
runner (``tool_runner.py``), the line (``phone_line.py``: greeting, quiet
line, timers, the end), and the work in flight (``work.py``), through which
every engine call leaves with what it serves.

Tools (``tools``, issue 16) run as the core asks (``RunTool``): each call is
checked against its tool and runs in a task of its own, which is not engine
work: on virtual time the timeline goes on while a tool runs, at the pace of
real time (:meth:`Session.settle`). A barge-in cancels the reply's tools whose policy says so
(``StopTools``); the session's :class:`SessionToolContext` gives the tools the
time, a way to speak later (a timer: due on the session's clock, checked with
every block) and a way to end the conversation (:attr:`Session.ended` is set
once the goodbye has been played).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np

from asr.echo import EchoCanceller
from core.audio import BLOCK_S
from core.commands import (
    CancelResponse,
    CheckInterruption,
    Command,
    CommitSpeculation,
    DiscardSpeculation,
    Emit,
    EndConversation,
    Extract,
    Goodbye,
    PausePlayback,
    PlayHoldSound,
    ResumePlayback,
    RunTool,
    StartResponse,
    StopTools,
    Summarize,
    Synthesize,
    TranscribeFinal,
)
from core.echo_gate import EchoGate
from core.end_of_turn import CheckEndOfTurn
from core.events import Error, Event, StepEntered
from core.hearing import FRAME_S, Heard, Hearing, PartialDue
from core.history import History
from core.near_speech import NearSpeech, PersonLevel
from core.playout import Playout
from core.room import Room
from core.turns import Conversation
from shell.clock import Clock
from shell.config import SessionConfig
from shell.denoising import Denoise, Denoising
from shell.device import AudioDevice, UncontrolledSpeaker
from shell.engines import Engines
from shell.flow_functions import FlowFunctions, resumed_run
from shell.heard_audio import HeardAudio
from shell.hold_sounds import HoldSound
from shell.listening import Listening
from shell.phone_line import CallControl, PhoneLine
from shell.speaking import Speaking
from shell.tool_runner import SessionToolContext, ToolRunner
from shell.tools import Tools
from shell.turn_end import TurnEnd
from shell.work import Serves, Work

log = logging.getLogger("voice.session")

EventSink = Callable[[Event], None]
T = TypeVar("T")


def _weakly(method: Callable[..., T]) -> Callable[..., T | None]:
    """``method``, called through a weak reference to its object (once that is gone: nothing)."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any) -> T | None:
        bound = ref()
        return bound(*args) if bound is not None else None

    return call


class Session:
    def __init__(
        self,
        engines: Engines,
        clock: Clock,
        config: SessionConfig | None = None,
        on_event: EventSink | None = None,
        history: History | None = None,
        lockstep: bool = False,
        tools: Tools | None = None,
        calls: CallControl | None = None,
    ) -> None:
        """``clock``: the session's timeline, which starts with the device's first audio. ``lockstep=True``
        is for virtual time: engine work is taken as instant, so each stage finishes what it was given
        before the stage upstream goes on (a chunk is synthesized before the next LLM delta is read), and
        the order of events no longer depends on the machine. ``tools``: what the model may call (None:
        nothing); ``calls``: the provider's control of a phone call, which an agent's transfer goes through.
        With an agent's steps (``config.flow``) a resumed ``history`` goes on at its last turn's step and state."""
        self.engines = engines
        self.tools = tools  # may be empty yet, and filled by an MCP server's listing
        self.clock = clock
        self.config = cfg = config or SessionConfig()
        self.output_rate = engines.output_rate
        self.lockstep = lockstep
        self._on_event = on_event or (lambda e: None)
        self.errors: list[str] = []
        flow = cfg.flow
        self.flow, resumed = resumed_run(flow, history or History()) if flow is not None else (None, False)
        prompt = cfg.system_prompt if flow is None else None  # in a flow, the agent's role and steps say it
        if (self.tools or flow is not None) and cfg.tools_prompt:
            prompt = f"{prompt} {cfg.tools_prompt}" if prompt else cfg.tools_prompt
        person = PersonLevel()  # learnt by the conversation, compared with by the hearing
        self.conversation = c = Conversation(
            prompt,
            history,
            cfg.barge_in,
            self.output_rate,
            cfg.early_final_s,
            cfg.first_phrase_min_words,
            engines.speculation_budget if cfg.speculate else None,
            tools=None,  # offered by the tool runner, which keeps them up to date
            max_tool_rounds=cfg.max_tool_rounds,
            filler=cfg.filler,
            filler_delay_s=cfg.filler_delay_s,
            language=cfg.language,
            person=person,
            # The engine's token cap: a reply that reaches it was cut mid-sentence.
            reply_length=replace(cfg.reply_length, token_cap=_token_cap(engines.llm)),
            flow=self.flow,
        )
        if cfg.end_of_turn is not None and engines.smart_turn is None:
            raise ValueError("end-of-turn decisions need the end-of-turn model: load it (EngineConfig.smart_turn)")
        partials = cfg.partials if cfg.partials_enabled and engines.asr_partial is not None else None
        if partials is not None and not cfg.speculate:  # a closing partial is there to start the speculation
            partials = replace(partials, closing_after_s=None)
        echo_cancel = cfg.echo_cancel
        threshold = cfg.endpoint.threshold  # of the VAD's probability: a voiced frame
        hearing = Hearing(
            cfg.endpoint,
            vad=engines.new_vad(),
            vad_raw=engines.new_vad() if echo_cancel else None,
            gate=EchoGate() if echo_cancel else None,
            partials=partials,
            budget=engines.partial_budget,
            end_of_turn=cfg.end_of_turn,
            transcripts=cfg.early_final_s is not None,  # the early final of each pause
            near=NearSpeech(person, cfg.near_speech, FRAME_S, threshold, Room(cfg.room, FRAME_S, threshold)),
            # The room is looked for before a noise suppressor (denoise may be turned on mid-session).
            vad_unsuppressed=engines.new_vad() if cfg.room.above_room_db is not None else None,
        )
        linear = echo_cancel and cfg.asr_audio == "linear"
        self._playout = Playout(self.output_rate)
        self._device: AudioDevice | UncontrolledSpeaker = UncontrolledSpeaker()  # until the pump attaches one
        # The stages call back through weak references: no cycle, so a closed session is freed at once.
        run, emit, error, heard = (_weakly(m) for m in (self._run, self._emit, self._error, self._heard))
        self._work = work = Work(error, clock.now)
        audio = HeardAudio(cfg.endpoint, cfg.asr_max_pause_s, hearing, engines.new_vad, work, look_back=linear)
        self._turn_end = TurnEnd(engines, clock, hearing, audio, work, emit, error, heard)
        self._listening = Listening(
            engines, clock, c, hearing, audio, work, run, emit, error, self._turn_end.weigh, echo_cancel, linear,
            cfg.final_tail_s, cfg.interruption_check_window == "full",
            Denoising(cfg.denoise, cfg.denoise_asr, echo_cancel),
        )  # fmt: skip
        self._speaking = Speaking(engines, clock, c, self._playout, work, run, emit, error, lockstep, f"{id(self):x}")
        self._speaking.hold_sound = HoldSound.of(flow.hold, self.output_rate) if flow and flow.hold else None
        self._line = PhoneLine(cfg.call, clock, c, self._playout, run, _weakly(self._in_use), calls, work.spawn)
        functions = FlowFunctions(self.flow, c.history) if self.flow is not None else None
        self._tools = ToolRunner(
            self.tools, clock, c, run, SessionToolContext(self._line, self.flow), cfg.client_tool_timeout_s, functions
        )
        if self.flow is not None:
            self._emit(StepEntered(clock.now(), step=self.flow.step_name, previous="", response=0))
            opening = self.flow.entry_text()
            if self.flow.step.on_enter and not resumed:
                self._line.open_step()  # its hook first, then its words
            elif opening and not resumed:
                self._line.greet(opening)
        self.ended = self._line.ended
        # Every command the core can give, and who carries it out (a type missing here is an error).
        self.handlers: dict[type, Callable[[Any], None]] = {
            Emit: _weakly(self._emit_command),
            TranscribeFinal: self._listening.transcribe_final,
            CheckInterruption: self._listening.check_interruption,
            StartResponse: self._speaking.start,
            Extract: self._speaking.extract,
            Summarize: self._speaking.summarize,
            CommitSpeculation: self._speaking.commit,
            DiscardSpeculation: self._speaking.discard,
            Synthesize: self._speaking.synthesize,
            PlayHoldSound: self._speaking.play_hold_sound,
            PausePlayback: _weakly(self._pause),
            ResumePlayback: _weakly(self._resume),
            CancelResponse: _weakly(self._cancel),
            RunTool: self._tools.run_tool,
            StopTools: self._tools.stop_tools,
            Goodbye: _weakly(self._goodbye),
            EndConversation: _weakly(self._end_conversation),
        }

    @property
    def history(self) -> History:
        return self.conversation.history

    @property
    def _aec(self) -> EchoCanceller | None:
        """The echo canceller (AEC3), native state of its own (the server's memory test looks for it)."""
        return self._listening.aec

    # -- the device's side (through the pump) -------------------------------

    def attach(self, device: AudioDevice) -> None:
        """The speaker that the core's playback commands (pause, resume, flush) go to.
        Called by the pump as it starts, on the event loop: the engines warm up then."""
        self._device = device
        eot = self.config.end_of_turn
        if eot is not None and eot.min_sentence_end is not None:
            self._work.spawn(self._work.call(Serves.BACKGROUND, self.engines.warm_up))

    def push_audio(self, block: np.ndarray, far: np.ndarray | None = None) -> None:
        """Microphone audio: 16 kHz mono float32, contiguous with the previous block. ``far``: what the
        speaker played over the same span (the echo canceller's reference, a continuous stream that may
        run behind); None: the device knows none, and the reference is silence."""
        for heard in self._listening.push(block, far, playing=self._playout.queued > 0):
            self._heard(heard)
        self._tick()

    def _tick(self) -> None:
        """Once a block: timers due, the filler while tools run, a call's greeting and its quiet line,
        the end a tool (or a caller gone quiet) asked for."""
        now = self.clock.now()
        self._line.due(now)
        self._run(self.conversation.tick(now))
        self._line.check_ended()

    def say_later(self, delay_s: float, text: str) -> None:
        """Say ``text`` ``delay_s`` seconds from now on the session's clock (a timer going off)."""
        self._line.say_later(delay_s, text)

    def _heard(self, heard: Heard) -> None:
        """What the hearing front end reported: engine work it asks for to the stages, the rest to the core."""
        if isinstance(heard, PartialDue):
            self._listening.partial(heard)
        elif isinstance(heard, CheckEndOfTurn):
            self._work.spawn(self._turn_end.check(heard, self.conversation.utterance))
        else:
            self._run(self.conversation.heard(heard, self.clock.now()))

    def take_audio(self, n: int) -> tuple[np.ndarray, int | None]:
        """Up to ``n`` samples of reply audio for the speaker (empty: none now), and the reply they belong to.

        Silence is not returned: while paused (after a fade of a few
        milliseconds), or between replies, there is nothing to play.
        """
        r = self.conversation.response
        out, k = self._playout.pull(n)
        return out[:k], (r.id if r is not None else None)

    def played(self, response: int | None, n_samples: int) -> None:
        """The speaker played ``n_samples`` of reply ``response`` (taken with :meth:`take_audio`)."""
        r = self.conversation.response
        # A late report of a reply already cut counts for nothing.
        if n_samples > 0 and r is not None and r.id == response:
            self._run(self.conversation.played(n_samples, self.clock.now()))
            self._line.check_ended()

    def cancel_response(self, reason: str = "client") -> None:
        """Stop the reply in flight now, cut at what was played (a stop button; Realtime's response.cancel)."""
        self._run(self.conversation.cancel_response(self.clock.now(), reason))

    def truncate_response(self, response: int, audio_end_ms: int) -> str | None:
        """The client says it played only the first ``audio_end_ms`` of ``response``: cut its turn there.

        Returns the text the turn now has ("" if it was removed, None if unknown).
        """
        commands, text = self.conversation.truncate(response, audio_end_ms, self.clock.now())
        self._run(commands)
        return text

    def _in_use(self) -> bool:
        """The line is not quiet: work, audio or a tool in flight."""
        return not self.idle or self._tools.running

    @property
    def idle(self) -> bool:
        """Nothing in flight and nothing left to play."""
        c = self.conversation
        return not self._work.busy and not self._playout.queued and c.response is None and not c.user_speaking

    async def settle(self, tick_s: float = BLOCK_S) -> None:
        """Wait until the engines have done all the work asked of them so far. A tool is not
        engine work: its time is the world's. While one runs, this waits up to ``tick_s`` (the
        pump's tick) for it, so that on virtual time the timeline runs at the pace of real
        time meanwhile, as long as it takes, as it would for a person waiting."""
        await self._work.settle()
        await self._tools.wait(tick_s)

    async def aclose(self) -> None:
        """End the conversation: a reply in flight is stored as far as it was played, and stopped.
        Tools that a barge-in does not cancel (a booking) are given their timeout to finish."""
        self._run(self.conversation.end(self.clock.now()))
        await self._tools.close()
        tts = self._speaking.tts_task
        await self._work.cancel(*([tts] if tts else []))

    # -- the client's side (typed turns, client tools) -------------------------

    def set_denoise(self, kind: Denoise) -> None:
        """Noise suppression on or off from the next block of microphone audio."""
        self._listening.set_denoise(kind)

    def set_client_tools(self, specs: list[dict[str, Any]]) -> None:
        """The tools the client runs itself (``[]``: none): offered to the model beside the
        session's own; a call of one goes to the client (a ``tool_call`` event) and waits for
        :meth:`client_tool_output`. ``specs`` as the chat API takes them, each checked."""
        self._tools.set_client_tools(specs)

    def client_tool_output(self, call_id: str, output: str) -> bool:
        """The client's result of call ``call_id``; False: no call of the client's waits for it."""
        return self._tools.client_tool_output(call_id, output)

    def user_text(self, text: str) -> None:
        """A turn the client typed: answered as a spoken one would be."""
        self._run(self.conversation.user_text(text, self.clock.now()))

    def key_pressed(self, key: str) -> None:
        """A key of the caller's keypad (DTMF): one turn per entry, at ``#`` or after 2 s (core/keypad.py)."""
        self._line.key_pressed(key, self.clock.now())

    # -- carrying out the core's commands -----------------------------------

    def _run(self, commands: list[Command]) -> None:
        for cmd in commands:
            handler = self.handlers.get(type(cmd))
            if handler is None:
                raise TypeError(f"no handler for the core's command {cmd!r}")
            handler(cmd)

    def _emit(self, event: Event) -> None:
        try:
            self._on_event(event)
        except Exception:  # a broken sink must not take the conversation down
            log.exception("event sink failed on %s", event.type)

    def _emit_command(self, cmd: Emit) -> None:
        self._emit(cmd.event)

    def _pause(self, cmd: PausePlayback) -> None:
        self._playout.pause()
        self._device.pause()

    def _resume(self, cmd: ResumePlayback) -> None:
        self._playout.resume()
        self._device.resume()

    def _cancel(self, cmd: CancelResponse) -> None:
        """Barge-in: stop generating, synthesizing and playing the reply, now."""
        t = self.clock.now()
        self._playout.clear()
        self._playout.resume()  # the next reply starts playing at once
        self._device.flush()
        self._speaking.cancel(cmd.response, t)
        self._line.reply_cut(cmd.response)

    def _goodbye(self, cmd: Goodbye) -> None:
        """The person said goodbye: the conversation ends after this reply, where the agent can end
        one (a phone call, or one offered the end_conversation tool); elsewhere it only says goodbye."""
        can_end = self.config.call is not None or (self.tools is not None and "end_conversation" in self.tools)
        if self.config.end_on_goodbye and can_end:
            log.info("the person said goodbye: the conversation ends after reply %d", cmd.response)
            self._line.end_after_reply(cmd.response)

    def _end_conversation(self, cmd: EndConversation) -> None:
        """The agent's flow reached its end: the conversation ends once the reply has been heard."""
        log.info("the agent's flow ended the conversation: it ends after reply %d", cmd.response)
        self._line.end_after_reply(cmd.response, cmd.transfer)

    def _error(self, where: str, message: str) -> None:
        self.errors.append(f"{where}: {message}")
        log.error("%s: %s", where, message)
        self._emit(Error(self.clock.now(), where=where, message=message))


def _token_cap(llm: object) -> int | None:
    """The LLM's cap on a reply's tokens (None: not known: a stand-in engine)."""
    generation = getattr(llm, "generation", None)
    return getattr(generation, "max_tokens", None)
