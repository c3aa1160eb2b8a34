"""One conversation: wires a transport to the core and the engines.

The transport calls :meth:`Session.push_audio` with each block of microphone
audio and :meth:`Session.pull_audio` for each block the speaker plays; both
are cheap and never block. Engine work (ASR, LLM, TTS) runs in tasks and
worker threads, and everything it produces goes through the
:class:`~voice.core.turns.Conversation` core, whose commands the session carries
out. On virtual time the transport calls :meth:`Session.settle` after each
block, so engine work takes no virtual time; on real time it does not, and the
very same code runs concurrently.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import soxr

from asr.echo import EchoCanceller
from asr.vad import FRAME, SileroVAD
from asr.whisper import Transcript
from voice.core.audio import ASR_RATE, AudioBuffer
from voice.core.echo_gate import EchoGate
from voice.core.endpointing import EndpointConfig, Endpointer, OnsetDropped, SpeechEnd, SpeechOnset, SpeechStart
from voice.core.events import AsrPartial, Error, Event, LlmCancelled, TtsCancelled
from voice.core.history import History
from voice.core.levels import BackgroundMeter, LevelMeter
from voice.core.partials import PartialConfig, PartialPolicy
from voice.core.playout import Playout
from voice.core.turns import (
    BargeInPolicy,
    CancelResponse,
    CheckInterruption,
    Command,
    Conversation,
    Emit,
    PausePlayback,
    ResumePlayback,
    StartResponse,
    Synthesize,
    TranscribeFinal,
)
from voice.shell.clock import Clock
from voice.shell.engines import Engines

log = logging.getLogger("voice.shell.session")

EventSink = Callable[[Event], None]


@dataclass(frozen=True)
class SessionConfig:
    system_prompt: str = (
        "You are a friendly voice assistant. Your replies are spoken aloud, so answer in one to three short "
        "sentences of plain text, with no lists, markdown or emoji."
    )
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    partials: PartialConfig = field(default_factory=PartialConfig)
    partials_enabled: bool = True
    barge_in: BargeInPolicy = field(default_factory=BargeInPolicy)
    echo_cancel: bool = True  # remove the assistant's own voice from the microphone
    final_tail_s: float = 0.1  # audio after the last voiced frame given to the final pass
    # Silence after which the final pass starts, before the endpoint (None: at the endpoint).
    # At least final_tail_s, so the pass has its tail.
    early_final_s: float | None = 0.128
    # The first chunk of a reply may end before a conjunction once it has this many words (None: never).
    first_phrase_min_words: int | None = 5


class Session:
    def __init__(
        self,
        engines: Engines,
        clock: Clock,
        config: SessionConfig | None = None,
        on_event: EventSink | None = None,
        history: History | None = None,
        lockstep: bool = False,
        reports_playback: bool = False,
    ) -> None:
        """``lockstep=True`` is for virtual time: engine work is taken as
        instant, so each stage finishes what it was given before the stage
        upstream goes on (a chunk is synthesized before the next LLM delta is
        read). The order of events then no longer depends on the machine.

        ``reports_playback=True`` is for a speaker the session does not drive
        (a network client): the transport takes the reply audio with
        :meth:`take_audio` and reports what was actually played with
        :meth:`audio_played`, which is what the playback ledger then counts.
        Otherwise :meth:`pull_audio` plays and counts in one step."""
        self.engines = engines
        self.clock = clock
        self.config = config or SessionConfig()
        self.output_rate = engines.output_rate
        self._on_event = on_event or (lambda e: None)
        self.conversation = Conversation(
            self.config.system_prompt,
            history,
            self.config.barge_in,
            self.output_rate,
            self.config.early_final_s,
            self.config.first_phrase_min_words,
            remote_playback=reports_playback,
        )
        self._vad = SileroVAD(engines.vad_session)
        self._endpointer = Endpointer(self.config.endpoint, FRAME / ASR_RATE)
        self._audio = AudioBuffer(ASR_RATE)
        self._pending_vad = np.zeros(0, dtype=np.float32)
        self._frames = 0  # VAD frames scored so far
        self._partial: PartialPolicy | None = None
        self._level = LevelMeter()  # loudness of the current utterance's voiced frames
        self._background = BackgroundMeter()  # and of the rest, during the reply
        self._utterance_onset = 0.0
        self._playout = Playout(self.output_rate)
        self._aec = EchoCanceller() if self.config.echo_cancel else None
        self._gate = EchoGate() if self.config.echo_cancel else None
        self._vad_raw = SileroVAD(engines.vad_session) if self.config.echo_cancel else None
        self._pending_raw = np.zeros(0, dtype=np.float32)  # microphone before cancellation, for the gate
        self._pending_far = np.zeros(0, dtype=np.float32)
        # What the speaker played, at 16 kHz: the echo canceller's reference.
        self._far = np.zeros(0, dtype=np.float32)
        self._to_16k = soxr.ResampleStream(self.output_rate, ASR_RATE, 1, dtype="float32")
        self._llm_tasks: dict[int, asyncio.Task] = {}
        self._tts_cancel: tuple[int, threading.Event] | None = None  # the chunk being synthesized
        self._cancelled: set[int] = set()
        self._tts_queue: asyncio.Queue[Synthesize] = asyncio.Queue()
        self._tts_task: asyncio.Task | None = None
        self._tts_pending = 0
        self._tts_idle = asyncio.Event()
        self._tts_idle.set()
        self.lockstep = lockstep
        self.reports_playback = reports_playback
        self._far_given = False  # the transport passes the reference with each block
        self._tasks: set[asyncio.Task] = set()
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.errors: list[str] = []

    @property
    def history(self) -> History:
        return self.conversation.history

    # -- the transport's side ----------------------------------------------

    def push_audio(self, block: np.ndarray, far: np.ndarray | None = None) -> None:
        """Microphone audio: 16 kHz mono float32, contiguous with the previous block.

        The speaker's output pulled just before spans the same time (the
        transport lines them up), and is the echo canceller's reference.
        ``far``: that reference, given by a transport that knows better (a
        sound card's timestamps line the two up); the played audio then is not used.
        """
        raw = block
        if self._aec is not None:
            if far is not None:
                self._far_given = True
                far = np.pad(far[: len(block)], (0, max(0, len(block) - len(far))))
            else:
                far, self._far = self._far[: len(block)], self._far[len(block) :]
                if self.reports_playback and len(far) < len(block):
                    # Played reports come in bursts, not per block: a gap is silence then.
                    far = np.pad(far, (0, len(block) - len(far)))
            self._pending_far = np.concatenate([self._pending_far, far])
            block = self._aec.process(block, far)
            raw = raw[: len(block)]  # the canceller returns whole 10 ms frames
        self._audio.append(block)
        self._pending_vad = np.concatenate([self._pending_vad, block])
        self._pending_raw = np.concatenate([self._pending_raw, raw])
        while len(self._pending_vad) >= FRAME:
            frame, self._pending_vad = self._pending_vad[:FRAME], self._pending_vad[FRAME:]
            raw_frame, self._pending_raw = self._pending_raw[:FRAME], self._pending_raw[FRAME:]
            t = self._frames * FRAME / ASR_RATE
            self._frames += 1
            prob = self._vad(frame)
            if self._gate is not None and self._vad_raw is not None:
                far_frame, self._pending_far = self._pending_far[:FRAME], self._pending_far[FRAME:]
                self._gate.far_frame(far_frame)
                prob = self._gate(self._vad_raw(raw_frame), prob, raw_frame, frame)
            was_pending = self._endpointer.in_speech or self._endpointer.pending_onset is not None
            edge = self._endpointer.push(prob, t)
            near = self._gate.near_energy(raw_frame, frame) if self._gate is not None else float(np.mean(frame**2))
            if prob >= self.config.endpoint.threshold:
                if not was_pending:
                    self._level.reset()  # the first voiced frame of what may become an utterance
                self._level.add(near)
            elif prob < 0.3 and self._playout.queued:
                self._background.add(near)  # what the microphone hears while the assistant talks
            now = self.clock.now()
            if isinstance(edge, SpeechOnset):
                self._run(self.conversation.speech_onset(edge.onset, now))
            elif isinstance(edge, OnsetDropped):
                self._run(self.conversation.onset_dropped(now))
            elif isinstance(edge, SpeechStart):
                self._utterance_onset = edge.onset
                self._partial = PartialPolicy(self.config.partials) if self.config.partials_enabled else None
                self._run(self.conversation.speech_started(edge.onset, now))
            elif isinstance(edge, SpeechEnd):
                self._partial = None
                self._run(self.conversation.speech_ended(edge.end, now, self._level.db, self._background.db))
            elif self._endpointer.in_speech:
                if self._endpointer.silence_s == 0.0:
                    # A voiced frame: how long the person has really been speaking
                    # (the hangover's silence does not count).
                    self._run(self.conversation.speech_continues(t + FRAME / ASR_RATE))
                else:
                    end = self._endpointer.last_voiced_end
                    self._run(self.conversation.speech_paused(end, self._endpointer.silence_s, now))
                self._maybe_partial(now)

    def pull_audio(self, n: int) -> np.ndarray:
        """The next ``n`` samples for the speaker (silence when there is no reply)."""
        out, played = self._playout.pull(n)
        if self._aec is not None:
            self._far = np.concatenate([self._far, self._to_16k.resample_chunk(out)])
        if played:
            self._run(self.conversation.played(played, self.clock.now()))
        return out

    def take_audio(self, n: int) -> tuple[np.ndarray, int | None]:
        """Up to ``n`` samples of reply audio to send (empty: none now), and the response they belong to.

        For ``reports_playback`` sessions: nothing counts as played until
        :meth:`audio_played` says so. Silence is not returned: while paused, or
        between replies, there is nothing to send.
        """
        r = self.conversation.response
        out, k = self._playout.pull(n)
        return out[:k], (r.id if r is not None else None)

    def audio_played(self, audio: np.ndarray, response: int | None) -> None:
        """The client played ``audio`` (taken with :meth:`take_audio` for ``response``)."""
        if not len(audio):
            return
        if self._aec is not None and not self._far_given:
            self._far = np.concatenate([self._far, self._to_16k.resample_chunk(audio)])
        r = self.conversation.response
        if r is not None and r.id == response:  # a late report of a reply already cut counts for nothing
            self._run(self.conversation.played(len(audio), self.clock.now()))

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

    async def settle(self) -> None:
        """Wait until the engines have done all the work asked of them so far."""
        while self._busy:
            self._idle.clear()
            await self._idle.wait()

    async def aclose(self) -> None:
        """End the conversation: a reply in flight is stored as far as it was played, and stopped."""
        self._run(self.conversation.end(self.clock.now()))
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
                self._llm_tasks[cmd.response] = self._spawn(self._generate(cmd))
            elif isinstance(cmd, CheckInterruption):
                self._spawn(self._check_interruption(cmd))
            elif isinstance(cmd, PausePlayback):
                self._playout.pause()
            elif isinstance(cmd, ResumePlayback):
                self._playout.resume()
            elif isinstance(cmd, CancelResponse):
                self._cancel(cmd.response)
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
        self._cancelled.add(response)
        self._playout.clear()
        self._playout.resume()  # the next reply starts playing at once
        task = self._llm_tasks.pop(response, None)
        if task is not None and not task.done():
            # The task's stream is closed on cancellation, which aborts the request in the engine.
            task.cancel()
            self._emit(LlmCancelled(t, response=response))
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
        if current is not None and current[0] == response:
            current[1].set()
        if dropped or (current is not None and current[0] == response):
            self._emit(TtsCancelled(t, response=response, chunks_dropped=dropped))

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

    def _utterance_audio(self, onset: float, end: float) -> np.ndarray:
        return self._audio.slice(onset - self.config.endpoint.preroll_s, end)

    def _maybe_partial(self, now: float) -> None:
        policy = self._partial
        if policy is None or self.engines.asr_partial is None:
            return
        if self.engines.partials_in_flight >= self.engines.max_partials_in_flight:
            # Shed load: partials are previews, and with many sessions they would
            # queue for the recognizer and take the cores the finals need.
            return
        audio_s = self._frames * FRAME / ASR_RATE - self._utterance_onset
        if policy.due(audio_s, self._endpointer.silence_s):
            policy.started(audio_s)
            audio = self._utterance_audio(self._utterance_onset, self._audio.end / ASR_RATE)
            self.engines.partials_in_flight += 1
            self._spawn(self._transcribe_partial(policy, audio))

    async def _transcribe_partial(self, policy: PartialPolicy, audio: np.ndarray) -> None:
        loop = asyncio.get_running_loop()
        try:
            text = await loop.run_in_executor(self.engines.partial_executor, self.engines.asr_partial.transcribe, audio)
        except Exception as e:  # a failed partial is only a missed preview
            policy.running = False
            self._error("asr_partial", repr(e))
            return
        finally:
            self.engines.partials_in_flight -= 1
        changed = policy.finished(text)
        if changed is not None and policy is self._partial:
            stable, unstable = changed
            self._emit(AsrPartial(self.clock.now(), text=f"{stable} {unstable}".strip(), stable=stable))

    async def _check_interruption(self, cmd: CheckInterruption) -> None:
        audio = self._utterance_audio(cmd.onset, cmd.t)
        loop = asyncio.get_running_loop()
        recognize = functools.partial(self.engines.asr_final.recognize, full_window=True)
        try:
            heard = await loop.run_in_executor(self.engines.final_executor, recognize, audio)
        except Exception as e:  # undecided: the final transcript decides instead
            self._error("asr_check", repr(e))
            heard = Transcript("", 1.0)
        self._run(
            self.conversation.interruption_checked(
                cmd.utterance, heard.text, self.clock.now(), heard.no_speech_prob, self._level.db, self._background.db
            )
        )

    async def _transcribe_final(self, cmd: TranscribeFinal) -> None:
        audio = self._utterance_audio(cmd.onset, cmd.end + self.config.final_tail_s)
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
            self._run(
                self.conversation.early_transcript(
                    cmd.utterance, cmd.end, heard.text, self.clock.now(), heard.no_speech_prob
                )
            )
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
        request_id = f"{id(self):x}-{cmd.response}"
        error: str | None = None
        stream = self.engines.llm.stream(cmd.messages, request_id)
        try:
            async for delta in stream:
                self._run(self.conversation.llm_delta(cmd.response, delta, self.clock.now()))
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
