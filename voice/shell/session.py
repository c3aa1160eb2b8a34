"""One conversation: the core and the engines, between a device's microphone and speaker.

The pump (``voice/shell/pump.py``) calls :meth:`Session.push_audio` with each
20 ms block of microphone audio, :meth:`Session.take_audio` for reply audio
the speaker has room for, and :meth:`Session.played` with what the speaker
really played; all three are cheap and never block. What the microphone
hears goes through the pure hearing front end (``voice/core/hearing.py``);
engine work (ASR, the end-of-turn model, LLM, TTS) runs in tasks and worker
threads, and everything it produces goes back through the hearing front end
or the :class:`~voice.core.turns.Conversation` core,
whose commands the session carries out: playback commands go to the device
(:meth:`attach`), events to the observers (``on_event``). On virtual time the
pump calls :meth:`Session.settle` after each block, so engine work takes no
virtual time; on real time it does not, and the very same code runs
concurrently.

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

import asyncio
import contextlib
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import numpy as np

from asr.echo import EchoCanceller, LinearEchoCanceller
from asr.whisper import Transcript
from voice.core.audio import ASR_RATE, BLOCK_S, VAD_FRAME, AudioBuffer, shorten_pauses
from voice.core.call import CallConfig, IdleAction, IdleWatch
from voice.core.echo_gate import EchoGate
from voice.core.end_of_turn import CheckEndOfTurn, EndOfTurnConfig, sentence_end_probability
from voice.core.endpointing import EndpointConfig, OnsetDropped, SpeechOnset, SpeechStart, speech_run_start
from voice.core.events import AsrPartial, EndOfTurnCheck, EndOfTurnText, Error, Event, LlmCancelled, TtsCancelled
from voice.core.hearing import Ended, Heard, Hearing, PartialDue, SpeechContinues, SpeechPaused
from voice.core.history import History
from voice.core.partials import PartialConfig, PartialPolicy
from voice.core.playout import Playout
from voice.core.tool_calls import ToolCallDelta
from voice.core.turns import (
    BargeInPolicy,
    CancelResponse,
    CheckInterruption,
    Command,
    CommitSpeculation,
    Conversation,
    DiscardSpeculation,
    Emit,
    PausePlayback,
    ResumePlayback,
    RunTool,
    StartResponse,
    StopTools,
    Synthesize,
    TranscribeFinal,
)
from voice.shell.clock import Clock
from voice.shell.device import AudioDevice, UncontrolledSpeaker
from voice.shell.engines import Engines
from voice.tools import Tool, ToolResult, Tools
from voice.tools.arguments import SchemaArguments

log = logging.getLogger("voice.session")

# How far before the VAD's onset speech over the reply may have begun, unheard by it,
# and how much quieter than that speech a frame may be and still be part of it.
ONSET_LOOKBACK_S = 1.0
ONSET_LEVEL_DB = 12.0


def _level_db(audio: np.ndarray) -> float:
    return 10 * float(np.log10(np.mean(audio.astype(np.float64) ** 2) + 1e-12)) if len(audio) else -120.0


EventSink = Callable[[Event], None]


@dataclass(frozen=True)
class SessionConfig:
    system_prompt: str = (
        "You are a friendly voice assistant. Your replies are spoken aloud, so answer in one to three short "
        "sentences of plain text, with no lists, markdown or emoji."
    )
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    # The end-of-turn model decides when the person's turn is over, and silence alone
    # only after its max_wait_s (None: silence alone, endpoint.hangover_s, as before it;
    # --turn-detector silence). The engines must have the model loaded (EngineConfig.smart_turn).
    end_of_turn: EndOfTurnConfig | None = field(default_factory=EndOfTurnConfig)
    partials: PartialConfig = field(default_factory=PartialConfig)
    partials_enabled: bool = True
    barge_in: BargeInPolicy = field(default_factory=BargeInPolicy)
    echo_cancel: bool = True  # remove the assistant's own voice from the microphone
    # What the ASR (and Smart Turn) hear with echo_cancel: "linear", the echo the
    # reference explains subtracted (SpeexDSP), which keeps the onset of speech over
    # a reply; "suppressed", AEC3's output, as the VAD hears it (before issue 15).
    asr_audio: Literal["linear", "suppressed"] = "linear"
    final_tail_s: float = 0.1  # audio after the last voiced frame given to the final pass
    # Silence after which the final pass starts, before the endpoint (None: at the endpoint).
    # At least final_tail_s, so the pass has its tail.
    early_final_s: float | None = 0.128
    # Silences inside an utterance longer than this are shortened to it in what Whisper hears
    # (voice/core/audio.py, shorten_pauses); None: as they were.
    asr_max_pause_s: float | None = 0.3
    # The first chunk of a reply may end before a conjunction once it has this many words (None: never).
    first_phrase_min_words: int | None = 5
    # Start the reply on the early final, before the endpoint, unheard until the endpoint confirms
    # its transcript (Engines.speculation_budget caps them over all sessions); needs early_final_s.
    speculate: bool = True
    # Tools (when the session is given some): how many times one reply may ask the model with
    # them before it must answer in words, and what is said once when they keep it quiet.
    # One: Qwen2.5-Coder-0.5B, offered the tools again with a result, calls again (an empty
    # call, or end_conversation) instead of answering; a larger model may chain calls with more.
    max_tool_rounds: int = 1
    client_tool_timeout_s: float = 30.0  # a call the client runs (Realtime): its output within this
    # Added to the system prompt when there are tools: a 0.5B model answered a tool's result
    # with JSON ({"response_type": "text"}) or with "This response indicates that ...", and
    # called one for chat and facts more often without the first sentence (scripts/bench_tools).
    tools_prompt: str = (
        "Call a tool only when the request cannot be answered without it; answer anything else (chat, jokes,"
        " facts, advice) in words. When a tool gives you a result, tell the person the answer in one short"
        " spoken sentence of plain words."
    )
    filler: str | None = "One moment."
    filler_delay_s: float = 1.0
    # A phone call: a greeting before the caller speaks, and what is done when the line goes quiet (None: not a call).
    call: CallConfig | None = None


class SessionToolContext:
    """What the session's tools may ask of it (:class:`voice.tools.ToolContext`)."""

    def __init__(self, session: Session) -> None:
        self._session = weakref.ref(session)  # not a cycle: a closed session is freed at once

    def now(self) -> datetime:
        return datetime.now().astimezone()

    def say_later(self, delay_s: float, text: str) -> None:
        session = self._session()
        if session is not None:
            session.say_later(delay_s, text)

    def end_conversation(self) -> None:
        session = self._session()
        if session is not None:
            session.end_after_reply()


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
    ) -> None:
        """``clock``: the session's timeline, which starts with the device's first audio.
        ``lockstep=True`` is for virtual time: engine work is taken as instant, so each
        stage finishes what it was given before the stage upstream goes on (a chunk is
        synthesized before the next LLM delta is read). The order of events then no
        longer depends on the machine. ``tools``: what the model may call (None: nothing)."""
        self.engines = engines
        self.tools = tools if tools else None
        self.clock = clock
        self.config = config or SessionConfig()
        self.output_rate = engines.output_rate
        self._on_event = on_event or (lambda e: None)
        prompt = self.config.system_prompt
        if self.tools and self.config.tools_prompt:
            prompt = f"{prompt} {self.config.tools_prompt}" if prompt else self.config.tools_prompt
        self.conversation = Conversation(
            prompt,
            history,
            self.config.barge_in,
            self.output_rate,
            self.config.early_final_s,
            self.config.first_phrase_min_words,
            engines.speculation_budget if self.config.speculate else None,
            tools=self.tools.specs() if self.tools else None,
            max_tool_rounds=self.config.max_tool_rounds,
            filler=self.config.filler,
            filler_delay_s=self.config.filler_delay_s,
        )
        cfg = self.config
        if cfg.end_of_turn is not None and engines.smart_turn is None:
            raise ValueError("end-of-turn decisions need the end-of-turn model: load it (EngineConfig.smart_turn)")
        partials = cfg.partials if cfg.partials_enabled and engines.asr_partial is not None else None
        if partials is not None and not cfg.speculate:  # a closing partial is there to start the speculation
            partials = replace(partials, closing_after_s=None)
        echo_cancel = cfg.echo_cancel
        self._hearing = Hearing(
            cfg.endpoint,
            vad=engines.new_vad(),
            vad_raw=engines.new_vad() if echo_cancel else None,
            gate=EchoGate() if echo_cancel else None,
            partials=partials,
            budget=engines.partial_budget,
            end_of_turn=cfg.end_of_turn,
            transcripts=cfg.early_final_s is not None,  # the early final of each pause
        )
        self._aec = EchoCanceller() if echo_cancel else None
        self._asr_aec = LinearEchoCanceller() if echo_cancel and cfg.asr_audio == "linear" else None
        self._reading: tuple[str, float] | None = None  # the LLM's last reading of a pause's words: (prompt, P(ends))
        self._asr_onset = (-1.0, -1.0)  # the VAD's onset of speech over the reply, and where the ASR hears it begin
        self._audio = AudioBuffer(ASR_RATE)  # what the ASR hears (echo-cancelled), on the session's timeline
        self._playout = Playout(self.output_rate)
        self._device: AudioDevice | UncontrolledSpeaker = UncontrolledSpeaker()  # until the pump attaches one
        self._llm_tasks: dict[int, asyncio.Task] = {}
        self._tts_cancel: tuple[int, threading.Event] | None = None  # the chunk being synthesized
        self._cancelled: set[int] = set()
        self._held: dict[int, list[np.ndarray]] = {}  # speculative replies' audio, until committed
        self._tts_queue: asyncio.Queue[Synthesize] = asyncio.Queue()
        self._tts_task: asyncio.Task | None = None
        self._tts_pending = 0
        self._tts_idle = asyncio.Event()
        self._tts_idle.set()
        self.lockstep = lockstep
        self._tasks: set[asyncio.Task] = set()
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.errors: list[str] = []
        # call id -> its reply, whether a barge-in cancels it, the task running (or awaiting) it
        self._tool_tasks: dict[str, tuple[int, bool, asyncio.Task]] = {}
        # Tools the client runs (Realtime's function calls): name -> its arguments' JSON schema checker.
        self._client_tools: dict[str, SchemaArguments] = {}
        self._client_results: dict[str, asyncio.Future[str]] = {}  # call id -> the client's output
        self._tool_context = SessionToolContext(self)
        self._alarms: list[tuple[float, str]] = []  # (due on the session's clock, what to say)
        self._ending = False  # a tool ended the conversation: over once the reply has been played
        call = self.config.call
        self._greeting = call.greeting if call is not None else None  # said at the first block, then None
        self._idle_watch = IdleWatch(call.idle) if call is not None and call.idle is not None else None
        self.ended = asyncio.Event()

    @property
    def history(self) -> History:
        return self.conversation.history

    # -- the device's side (through the pump) -------------------------------

    def attach(self, device: AudioDevice) -> None:
        """The speaker that the core's playback commands (pause, resume, flush) go to.
        Called by the pump as it starts, on the event loop: the engines warm up then."""
        self._device = device
        eot = self.config.end_of_turn
        if eot is not None and eot.min_sentence_end is not None:
            self._spawn(self.engines.warm_up())

    def push_audio(self, block: np.ndarray, far: np.ndarray | None = None) -> None:
        """Microphone audio: 16 kHz mono float32, contiguous with the previous block.

        ``far``: what the speaker played over the same span (the echo
        canceller's reference, a continuous stream that may run behind);
        None: the device knows none, and the reference is silence.
        """
        raw = block
        if far is None:
            far = np.zeros(len(block), dtype=np.float32)
        asr = block
        if self._aec is not None:
            block = self._aec.process(raw, far)
            # Both cancellers return the same whole 10 ms frames of the same input.
            asr = self._asr_aec.process(raw, far) if self._asr_aec is not None else block
            raw = raw[: len(block)]
        self._audio.append(asr)
        for heard in self._hearing.push(block, raw, far, playing=self._playout.queued > 0):
            self._heard(heard)
        self._tick()

    def _tick(self) -> None:
        """Once a block: timers due, the filler while tools run, a call's greeting and its quiet line,
        the end a tool (or a caller gone quiet) asked for."""
        now = self.clock.now()
        if self._greeting:  # the assistant speaks first, without waiting for the caller
            self._run(self.conversation.announce(self._greeting, now))
            self._greeting = None
        if self._idle_watch is not None:
            self._watch_the_line(now)
        while self._alarms and self._alarms[0][0] <= now:
            _, text = self._alarms.pop(0)
            self._run(self.conversation.announce(text, now))
        self._run(self.conversation.tick(now))
        self._check_ended()

    def _watch_the_line(self, now: float) -> None:
        watch = self._idle_watch
        assert watch is not None
        action = watch.check(now, not self.idle or bool(self._tool_tasks), self.conversation.user_speaking)
        if action is IdleAction.PROMPT:
            self._run(self.conversation.announce(watch.policy.prompt, now))
        elif action is IdleAction.HANG_UP:
            log.info("the line has been quiet after %d prompts: saying goodbye", watch.prompted)
            self._run(self.conversation.announce(watch.policy.goodbye, now))

    def _check_ended(self) -> None:
        c = self.conversation
        hung_up = self._idle_watch is not None and self._idle_watch.hanging_up
        if (self._ending or hung_up) and c.response is None and not self._playout.queued and not c.user_speaking:
            self.ended.set()

    def say_later(self, delay_s: float, text: str) -> None:
        """Say ``text`` ``delay_s`` seconds from now on the session's clock (a timer going off)."""
        self._alarms.append((self.clock.now() + delay_s, text))
        self._alarms.sort(key=lambda a: a[0])

    def end_after_reply(self) -> None:
        """End the conversation once the reply in flight has been played: :attr:`ended` is set then."""
        self._ending = True

    def _heard(self, heard: Heard) -> None:
        """What the hearing front end reported, to the core (or to the engines)."""
        now = self.clock.now()
        c = self.conversation
        if isinstance(heard, SpeechContinues):
            self._run(c.speech_continues(heard.t))
        elif isinstance(heard, SpeechPaused):
            self._run(c.speech_paused(heard.end, heard.silence_s, now))
        elif isinstance(heard, PartialDue):
            self._partial(heard)
        elif isinstance(heard, CheckEndOfTurn):
            self._spawn(self._check_end_of_turn(heard, c.utterance))
        elif isinstance(heard, SpeechOnset):
            self._run(c.speech_onset(heard.onset, now))
        elif isinstance(heard, OnsetDropped):
            self._run(c.onset_dropped(now))
        elif isinstance(heard, SpeechStart):
            self._run(c.speech_started(heard.onset, now))
        elif isinstance(heard, Ended):
            self._run(c.speech_ended(heard.end, now, heard.level_db, heard.background_db))

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
            self._check_ended()

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

    @property
    def idle(self) -> bool:
        """Nothing in flight and nothing left to play."""
        c = self.conversation
        return self._busy == 0 and not self._playout.queued and c.response is None and not c.user_speaking

    async def settle(self, tick_s: float = BLOCK_S) -> None:
        """Wait until the engines have done all the work asked of them so far. A tool is not
        engine work: its time is the world's. While one runs, this waits up to ``tick_s`` (the
        pump's tick) for it, so that on virtual time the timeline runs at the pace of real
        time meanwhile, as long as it takes, as it would for a person waiting."""
        while self._busy:
            self._idle.clear()
            await self._idle.wait()
        if self._tool_tasks:
            await asyncio.wait([task for _, _, task in self._tool_tasks.values()], timeout=tick_s)

    async def aclose(self) -> None:
        """End the conversation: a reply in flight is stored as far as it was played, and stopped.
        Tools that a barge-in does not cancel (a booking) are given their timeout to finish."""
        self._run(self.conversation.end(self.clock.now()))
        for call_id in list(self._client_results):  # the client is gone: nobody will answer
            self._tool_tasks[call_id][2].cancel()
        running = [task for _, _, task in self._tool_tasks.values()]
        if running:
            await asyncio.wait(running)
        for task in list(self._tasks) + ([self._tts_task] if self._tts_task else []):
            task.cancel()
        for task in list(self._tasks) + ([self._tts_task] if self._tts_task else []):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- carrying out the core's commands -----------------------------------

    def _run(self, commands: list[Command]) -> None:
        for cmd in commands:
            if isinstance(cmd, Emit):
                self._emit(cmd.event)
            elif isinstance(cmd, TranscribeFinal):
                self._spawn(self._transcribe_final(cmd))
            elif isinstance(cmd, StartResponse):
                if cmd.speculative:
                    self._held[cmd.response] = []
                self._llm_tasks[cmd.response] = self._spawn(self._generate(cmd))
            elif isinstance(cmd, CommitSpeculation):
                for audio in self._held.pop(cmd.response, []):
                    self._playout.append(audio)
            elif isinstance(cmd, DiscardSpeculation):
                self._held.pop(cmd.response, None)
                self._stop(cmd.response)
            elif isinstance(cmd, CheckInterruption):
                self._spawn(self._check_interruption(cmd))
            elif isinstance(cmd, PausePlayback):
                self._playout.pause()
                self._device.pause()
            elif isinstance(cmd, ResumePlayback):
                self._playout.resume()
                self._device.resume()
            elif isinstance(cmd, CancelResponse):
                self._cancel(cmd.response)
            elif isinstance(cmd, RunTool):
                self._run_tool(cmd)
            elif isinstance(cmd, StopTools):
                for response, cancel, task in list(self._tool_tasks.values()):
                    if response == cmd.response and cancel:
                        task.cancel()
            elif isinstance(cmd, Synthesize):
                self._work_started()
                self._tts_pending += 1
                self._tts_idle.clear()
                self._tts_queue.put_nowait(cmd)
                if self._tts_task is None:
                    self._tts_task = asyncio.get_running_loop().create_task(self._tts_worker())

    def _emit(self, event: Event) -> None:
        try:
            self._on_event(event)
        except Exception:  # a broken sink must not take the conversation down
            log.exception("event sink failed on %s", event.type)

    def _cancel(self, response: int) -> None:
        """Barge-in: stop generating, synthesizing and playing ``response``, now."""
        t = self.clock.now()
        self._playout.clear()
        self._playout.resume()  # the next reply starts playing at once
        self._device.flush()
        generating, dropped, synthesizing = self._stop(response)
        if generating:
            self._emit(LlmCancelled(t, response=response))
        if dropped or synthesizing:
            self._emit(TtsCancelled(t, response=response, chunks_dropped=dropped))

    def _stop(self, response: int) -> tuple[bool, int, bool]:
        """Stop generating and synthesizing ``response``. Returns whether it was still generating,
        how many chunks queued for synthesis were dropped, and whether one was being synthesized."""
        self._cancelled.add(response)
        task = self._llm_tasks.pop(response, None)
        generating = task is not None and not task.done()
        if generating:
            # The task's stream is closed on cancellation, which aborts the request in the engine.
            task.cancel()
        # Chunks still queued for synthesis are dropped here; the worker skips
        # any it has already taken, and the one in progress stops at its next sentence.
        queued = [self._tts_queue.get_nowait() for _ in range(self._tts_queue.qsize())]
        dropped = 0
        for cmd in queued:
            if cmd.response == response:
                dropped += 1
                self._tts_finished()
            else:
                self._tts_queue.put_nowait(cmd)
        current = self._tts_cancel
        synthesizing = current is not None and current[0] == response
        if synthesizing:
            current[1].set()
        return generating, dropped, synthesizing

    def _spawn(self, coro) -> asyncio.Task:
        self._work_started()
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self._tasks.discard(t)
            self._work_done()
            if not t.cancelled() and t.exception() is not None:
                self._error("internal", repr(t.exception()))

        task.add_done_callback(done)
        return task

    def _work_started(self) -> None:
        self._busy += 1
        self._idle.clear()

    def _work_done(self) -> None:
        self._busy -= 1
        if self._busy == 0:
            self._idle.set()

    def _error(self, where: str, message: str) -> None:
        self.errors.append(f"{where}: {message}")
        log.error("%s: %s", where, message)
        self._emit(Error(self.clock.now(), where=where, message=message))

    # -- ASR ------------------------------------------------------------------

    def _utterance_audio(self, onset: float, end: float, for_asr: bool = True) -> np.ndarray:
        """The audio of the utterance that began at ``onset`` up to ``end``, with its pre-roll; for
        Whisper (``for_asr``) with its long pauses shortened (``asr_max_pause_s``)."""
        start = onset - self.config.endpoint.preroll_s
        audio = self._audio.slice(start, end)
        keep = self.config.asr_max_pause_s
        pauses = self._hearing.pauses
        if not for_asr or keep is None or not pauses:
            return audio
        t0 = max(self._audio.start, round(start * ASR_RATE)) / ASR_RATE
        return shorten_pauses(audio, t0, pauses, keep)

    def _over_reply_audio(self, onset: float, end: float) -> np.ndarray:
        """Speech over the reply, from where it began in what the ASR hears.

        The VAD hears AEC3's output, whose suppressor can swallow the first words
        of speech over the reply: in one fixture the VAD's onset came 0.58 s late,
        after "For the", with no echo in the input at all. The linear canceller's
        output kept them, so the onset is moved back to where the run of speech
        that reaches it begins there (at most ONSET_LOOKBACK_S): frames the VAD
        calls speech, within ONSET_LEVEL_DB of the speech's own level after the
        onset, so the canceller's residual echo before it does not count."""
        if self._asr_aec is None:
            return self._utterance_audio(onset, end)
        if self._asr_onset[0] != onset:
            start = max(0.0, onset - ONSET_LOOKBACK_S)
            before = self._audio.slice(start, onset)
            before = before[len(before) % VAD_FRAME :]  # whole frames, the last one ending at the onset
            own_db = _level_db(self._audio.slice(onset, onset + 0.3))
            vad = self.engines.new_vad()
            frames = [before[i * VAD_FRAME : (i + 1) * VAD_FRAME] for i in range(len(before) // VAD_FRAME)]
            # Silero runs on every frame, in order: its state carries from one to the next.
            heard = [(vad(f), _level_db(f)) for f in frames]
            probabilities = [p if db >= own_db - ONSET_LEVEL_DB else 0.0 for p, db in heard]
            first = speech_run_start(probabilities, self.config.endpoint.threshold)
            self._asr_onset = (onset, onset - (len(frames) - first) * VAD_FRAME / ASR_RATE)
        return self._utterance_audio(self._asr_onset[1], end)

    def _partial(self, due: PartialDue) -> None:
        audio = self._utterance_audio(due.onset, self._audio.end / ASR_RATE)
        self._spawn(self._transcribe_partial(due.policy, audio, due.end, self.conversation.utterance))

    async def _transcribe_partial(
        self, policy: PartialPolicy, audio: np.ndarray, closes: float | None = None, utterance: int = 0
    ) -> None:
        """A partial pass; ``closes``: it is the closing pass of the pause after speech that ended
        there (of ``utterance``), whose words may start the speculative reply."""
        loop = asyncio.get_running_loop()
        text: str | None = None
        try:
            text = await loop.run_in_executor(self.engines.partial_executor, self.engines.asr_partial.transcribe, audio)
        except Exception as e:  # a failed partial is only a missed preview
            self._error("asr_partial", repr(e))
        changed = self._hearing.partial_finished(policy, text)
        if changed is not None:
            stable, unstable = changed
            self._emit(AsrPartial(self.clock.now(), text=f"{stable} {unstable}".strip(), stable=stable))
        if closes is not None and text:

            def speculate() -> None:
                self._run(self.conversation.closing_partial(utterance, closes, text, self.clock.now()))

            # Its words are read for the end of the turn too: in real time they come 200-400 ms
            # before the early final's, and a "finished" from Smart Turn need not wait for that
            # pass. The early final's words, when they come before the endpoint, replace them.
            await self._weigh_transcript(utterance, text, closes, speculate)

    async def _check_end_of_turn(self, cmd: CheckEndOfTurn, utterance: int) -> None:
        """Is the utterance so far a finished turn? Smart Turn on its audio, on its own thread.
        A failure is reported and leaves the pause to silence (the max wait): the turn is kept."""
        audio = self._utterance_audio(cmd.onset, cmd.until, for_asr=False)  # the pauses as they were: they are its cue
        loop = asyncio.get_running_loop()
        probability: float | None = None
        try:
            probability = await loop.run_in_executor(
                self.engines.turn_executor, self.engines.smart_turn.probability, audio
            )
        except Exception as e:
            self._error("end_of_turn", repr(e))
        now = self.clock.now()
        checked = self._hearing.turn_checked(cmd, probability, now)
        self._emit(
            EndOfTurnCheck(
                now,
                utterance=utterance,
                probability=probability,
                silence_s=cmd.until - cmd.end,
                decision=checked.decision,
                trails_off=checked.trails_off,
            )
        )
        if checked.ended is not None:
            self._heard(checked.ended)

    async def _weigh_transcript(self, utterance: int, text: str, end: float, speculate: Callable[[], None]) -> None:
        """A transcript of a pause (its closing partial, then its early final), to the end-of-turn
        decision: does the sentence end there? The LLM's next-token probabilities of the words as
        plain text say (one short prefill, beside the speculative reply ``speculate`` starts; the
        same words read again are not asked again); a failure leaves it to the sound."""
        hears = self._hearing.end_of_turn
        wants = hears is not None and hears.wants_transcript(end)
        prompt = hears.reading(text, end) if hears is not None else None
        reads = prompt is not None
        # In lockstep the reading runs alone, then the reply: a request's logprobs in vLLM depend
        # on what it is batched with, and virtual time must repeat exactly. In real time the
        # reply goes first: its first token is on the critical path.
        if not (self.lockstep and reads):
            speculate()
        sentence_end: float | None = None
        if prompt is not None:
            if self._reading is not None and self._reading[0] == prompt:
                sentence_end = self._reading[1]  # the early final heard what the closing partial did
            else:
                try:
                    top = await self.engines.llm.next_token_probabilities(prompt)
                    sentence_end = sentence_end_probability(top)
                    self._reading = (prompt, sentence_end)
                except Exception as e:
                    self._error("end_of_turn_text", repr(e))
            if self.lockstep:
                speculate()
        if not wants:
            return
        weighed = self._hearing.transcript(text, end, self.clock.now(), sentence_end)
        if weighed is None:
            return  # the person spoke on: it no longer describes this pause
        self._emit(
            EndOfTurnText(
                self.clock.now(),
                utterance=utterance,
                text=text,
                sentence_end=sentence_end,
                unfinished=weighed.unfinished,
                ended=weighed.ended is not None,
            )
        )
        if weighed.ended is not None:
            self._heard(weighed.ended)

    async def _check_interruption(self, cmd: CheckInterruption) -> None:
        audio = self._over_reply_audio(cmd.onset, cmd.t)
        loop = asyncio.get_running_loop()
        recognize = functools.partial(self.engines.asr_final.recognize, full_window=True)
        try:
            heard = await loop.run_in_executor(self.engines.final_executor, recognize, audio)
        except Exception as e:  # undecided: the final transcript decides instead
            self._error("asr_check", repr(e))
            heard = Transcript("", 1.0)
        h = self._hearing
        self._run(
            self.conversation.interruption_checked(
                cmd.utterance, heard.text, self.clock.now(), heard.no_speech_prob, h.level.db, h.background.db
            )
        )

    async def _transcribe_final(self, cmd: TranscribeFinal) -> None:
        end = cmd.end + self.config.final_tail_s
        # Speech that began over a reply (checked over it, or still held), from where it began.
        began_over_reply = cmd.over_reply or self._asr_onset[0] == cmd.onset
        audio = self._over_reply_audio(cmd.onset, end) if began_over_reply else self._utterance_audio(cmd.onset, end)
        loop = asyncio.get_running_loop()
        # Over the reply, Whisper's full window: on a short one it invents more words in noise.
        recognize = functools.partial(self.engines.asr_final.recognize, full_window=cmd.over_reply)
        try:
            heard = await loop.run_in_executor(self.engines.final_executor, recognize, audio)
        except Exception as e:
            if cmd.early:  # the endpoint's own pass runs instead, if the endpoint came
                self._error("asr_early_final", repr(e))
                self._run(self.conversation.early_failed(cmd.utterance, cmd.end))
                return
            # The utterance is reported, not silently dropped; the turn is not stored.
            self._error("asr_final", repr(e))
            heard = Transcript("", 1.0)
        if cmd.early:

            def speculate() -> None:
                self._run(
                    self.conversation.early_transcript(
                        cmd.utterance, cmd.end, heard.text, self.clock.now(), heard.no_speech_prob
                    )
                )

            await self._weigh_transcript(cmd.utterance, heard.text, cmd.end, speculate)
            return
        self._run(
            self.conversation.transcript_final(
                cmd.utterance,
                heard.text,
                cmd.onset,
                cmd.end,
                self.clock.now(),
                heard.no_speech_prob,
            )
        )

    # -- LLM --------------------------------------------------------------------

    async def _generate(self, cmd: StartResponse) -> None:
        request_id = f"{id(self):x}-{cmd.response}" + (f".{cmd.round}" if cmd.round else "")
        error: str | None = None
        tools: dict[str, Any] = {"tools": cmd.tools} if cmd.tools else {}
        stream = self.engines.llm.stream(cmd.messages, request_id, **tools)
        c = self.conversation
        try:
            async for delta in stream:
                if isinstance(delta, ToolCallDelta):
                    self._run(c.llm_tool_call(cmd.response, delta, self.clock.now()))
                    continue
                self._run(c.llm_delta(cmd.response, delta, self.clock.now()))
                if self.lockstep:
                    await self._tts_idle.wait()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # LLMError or an engine crash: end the reply with what was generated
            error = f"{type(e).__name__}: {e}"
            self._error("llm", error)
        finally:
            await stream.aclose()
            self._llm_tasks.pop(cmd.response, None)
        self._run(self.conversation.llm_done(cmd.response, self.clock.now(), error))

    # -- tools --------------------------------------------------------------------

    def set_client_tools(self, specs: list[dict[str, Any]]) -> None:
        """The tools the client runs itself (``[]``: none): offered to the model beside the
        session's own; a call of one goes to the client (a ``tool_call`` event) and waits for
        :meth:`client_tool_output`. ``specs`` as the chat API takes them, each checked."""
        checkers = {}
        for spec in specs:
            function = spec["function"]
            checkers[function["name"]] = SchemaArguments(function.get("parameters") or {"type": "object"})
        self._client_tools = checkers
        own = self.tools.specs() if self.tools else []
        ours = [s for s in own if s["function"]["name"] not in checkers]
        self.conversation.tools = (ours + list(specs)) or None

    def client_tool_output(self, call_id: str, output: str) -> bool:
        """The client's result of call ``call_id``; False: no call of the client's waits for it."""
        waiting = self._client_results.pop(call_id, None)
        if waiting is None or waiting.done():
            return False
        waiting.set_result(output)
        return True

    def user_text(self, text: str) -> None:
        """A turn the client typed: answered as a spoken one would be."""
        self._run(self.conversation.user_text(text, self.clock.now()))

    def _run_tool(self, cmd: RunTool) -> None:
        """Check the call against its tool; run it in a task of its own, or answer why it cannot run."""
        loop = asyncio.get_running_loop()
        if cmd.call.name in self._client_tools:
            try:
                self._client_tools[cmd.call.name].check(cmd.call.arguments)
                why = None
            except ValueError as e:
                why = str(e)
            if why is None:
                task = loop.create_task(self._await_client(cmd))
                self._tool_tasks[cmd.call.id] = (cmd.response, True, task)
                return
            checked: tuple[Tool, dict[str, Any]] | str = why
        else:
            checked = self.tools.check(cmd.call) if self.tools is not None else "no tools are offered"
        if isinstance(checked, str):
            result = f"The call was not run: {checked}."
            now = self.clock.now()
            self._run(self.conversation.tool_finished(cmd.response, cmd.call, "error", result, 0.0, now, ran=False))
            return
        tool, arguments = checked
        task = loop.create_task(self._call_tool(cmd, tool, arguments))
        self._tool_tasks[cmd.call.id] = (cmd.response, tool.options.cancel_on_barge_in, task)

    async def _await_client(self, cmd: RunTool) -> None:
        """A call of the client's: its output, within ``client_tool_timeout_s``."""
        start = time.monotonic()
        waiting = self._client_results[cmd.call.id] = asyncio.get_running_loop().create_future()
        timeout = self.config.client_tool_timeout_s
        try:
            result = ToolResult("ok", await asyncio.wait_for(waiting, timeout), time.monotonic() - start)
        except TimeoutError:
            said = f"the client did not answer {cmd.call.name} within {timeout:g} s"
            result = ToolResult("timeout", said, time.monotonic() - start)
        except asyncio.CancelledError:
            why = f"{cmd.call.name} was cancelled: the person spoke over the reply"
            result = ToolResult("cancelled", why, time.monotonic() - start)
        finally:
            self._tool_tasks.pop(cmd.call.id, None)
            self._client_results.pop(cmd.call.id, None)
        status, content, took = result.status, result.content, result.duration_s
        self._run(self.conversation.tool_finished(cmd.response, cmd.call, status, content, took, self.clock.now()))

    async def _call_tool(self, cmd: RunTool, tool: Tool, arguments: dict[str, Any]) -> None:
        start = time.monotonic()
        try:
            result = await tool.run(arguments, self._tool_context)
        except asyncio.CancelledError:  # a barge-in (StopTools), or the session closing
            why = f"{tool.name} was cancelled: the person spoke over the reply"
            result = ToolResult("cancelled", why, time.monotonic() - start)
        finally:
            self._tool_tasks.pop(cmd.call.id, None)
        status, content, took = result.status, result.content, result.duration_s
        self._run(self.conversation.tool_finished(cmd.response, cmd.call, status, content, took, self.clock.now()))

    # -- TTS ----------------------------------------------------------------------

    async def _tts_worker(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            cmd = await self._tts_queue.get()
            try:
                if cmd.response not in self._cancelled:
                    await self._synthesize(loop, cmd)
            finally:
                self._tts_finished()

    def _tts_finished(self) -> None:
        self._tts_pending -= 1
        if self._tts_pending == 0:
            self._tts_idle.set()
        self._work_done()

    async def _synthesize(self, loop: asyncio.AbstractEventLoop, cmd: Synthesize) -> None:
        pieces: asyncio.Queue = asyncio.Queue()
        cancel = threading.Event()
        end = object()

        def work() -> None:
            try:
                for piece in self.engines.tts.synthesize(cmd.text, cancel, exact=self.lockstep):
                    loop.call_soon_threadsafe(pieces.put_nowait, piece)
            except Exception as e:
                loop.call_soon_threadsafe(pieces.put_nowait, e)
            finally:
                loop.call_soon_threadsafe(pieces.put_nowait, end)

        self._tts_cancel = (cmd.response, cancel)
        future = loop.run_in_executor(self.engines.tts_executor, work)
        error: str | None = None
        first = True
        try:
            while (piece := await pieces.get()) is not end:
                if isinstance(piece, Exception):
                    error = repr(piece)
                    continue
                if cancel.is_set():
                    continue  # cancelled by a barge-in: drop what is still coming
                held = self._held.get(cmd.response)
                if held is not None:
                    held.append(piece.audio)  # speculative: played only once committed
                else:
                    self._playout.append(piece.audio)
                self._run(
                    self.conversation.tts_audio(
                        cmd.response, cmd.chunk, piece.text, len(piece.audio), piece.words, self.clock.now(), first
                    )
                )
                first = False
        finally:
            cancel.set()
            self._tts_cancel = None
            await future
        if cmd.response in self._cancelled:
            return
        if error:
            self._error("tts", error)
        self._run(self.conversation.tts_done(cmd.response, cmd.chunk, self.clock.now()))
