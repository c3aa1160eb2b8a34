"""Speaking: the LLM's reply, its synthesis, the audio held for a speculative reply, and stopping it all.

A reply's tokens stream from the LLM into the core (:meth:`Speaking.start`);
the chunks the core asks to be synthesized go through one TTS worker, in
order, and their audio goes to the playout, or is held while the reply is a
speculation (:meth:`Speaking.commit` plays it, :meth:`Speaking.discard` drops
it). A barge-in stops a reply's generation and synthesis at once
(:meth:`Speaking.stop`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np

from core.commands import (
    Command,
    CommitSpeculation,
    DiscardSpeculation,
    Extract,
    PlayHoldSound,
    StartResponse,
    Summarize,
    Synthesize,
)
from core.events import Event, LlmCancelled, TtsCancelled
from core.playout import Playout
from core.tool_calls import ToolCallDelta
from core.turns import Conversation
from shell.clock import Clock
from shell.engines import Engines
from shell.hold_sounds import HoldSound
from shell.tools.arguments import SchemaArguments
from shell.work import Serves, Work


class Speaking:
    """The LLM requests and the TTS worker of one session."""

    def __init__(
        self,
        engines: Engines,
        clock: Clock,
        conversation: Conversation,
        playout: Playout,
        work: Work,
        run: Callable[[list[Command]], None],
        emit: Callable[[Event], None],
        error: Callable[[str, str], None],
        lockstep: bool,
        request_prefix: str,
    ) -> None:
        """``run``: carries out the core's commands; ``request_prefix``: the session's part of its
        LLM requests' ids (unique among the sessions sharing the engine)."""
        self.engines = engines
        self.clock = clock
        self.conversation = conversation
        self._playout = playout
        self._work = work
        self._run = run
        self._emit = emit
        self._error = error
        self.lockstep = lockstep
        self._request_prefix = request_prefix
        self._llm_tasks: dict[int, asyncio.Task] = {}
        self._summary_task: asyncio.Task | None = None  # the conversation's summary being written
        self._summaries = 0
        self.hold_sound: HoldSound | None = None  # the agent's (shell/hold_sounds.py), set by the session
        self._tts_cancel: tuple[int, threading.Event] | None = None  # the chunk being synthesized
        self._cancelled: set[int] = set()
        self.held: dict[int, list[np.ndarray]] = {}  # speculative replies' audio, until committed
        self._tts_queue: asyncio.Queue[Synthesize] = asyncio.Queue()
        self.tts_task: asyncio.Task | None = None
        self._tts_pending = 0
        self._tts_idle = asyncio.Event()
        self._tts_idle.set()

    # -- the core's commands -------------------------------------------------------

    def start(self, cmd: StartResponse) -> None:
        if cmd.speculative:
            self.held[cmd.response] = []
        self._llm_tasks[cmd.response] = self._work.spawn(self._generate(cmd))

    def extract(self, cmd: Extract) -> None:
        self._llm_tasks[cmd.response] = self._work.spawn(self._extract(cmd))

    def summarize(self, cmd: Summarize) -> None:
        """A summary of the conversation so far, written in the background (core/summary.py); a newer
        request replaces one still being written."""
        if self._summary_task is not None:
            self._summary_task.cancel()
        self._summaries += 1  # each its own request id: the one cancelled may still be in the engine
        self._summary_task = self._work.spawn(self._summarize(cmd, f"{self._request_prefix}-summary{self._summaries}"))

    async def _summarize(self, cmd: Summarize, request_id: str) -> None:
        stream = self._work.call(Serves.BACKGROUND, self.engines.llm.stream, cmd.messages, request_id)
        try:
            text = await _text_of(stream)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the engine failed: the summary before it is kept
            self._error("llm", f"the summary of {cmd.upto} turns: {type(e).__name__}: {e}")
            return
        self.conversation.summarized(cmd.upto, text)

    def play_hold_sound(self, cmd: PlayHoldSound) -> None:
        """The next piece of the agent's hold sound, played as part of the reply (core/hold_sound.py)."""
        if cmd.response not in self._cancelled:  # (silence where none was loaded: the reply's ledger counts it)
            hold = self.hold_sound
            self._playout.append(hold.take(cmd.n_samples) if hold else np.zeros(cmd.n_samples, np.float32))

    def commit(self, cmd: CommitSpeculation) -> None:
        for audio in self.held.pop(cmd.response, []):
            self._playout.append(audio)

    def discard(self, cmd: DiscardSpeculation) -> None:
        self.held.pop(cmd.response, None)
        self.stop(cmd.response)

    def synthesize(self, cmd: Synthesize) -> None:
        self._work.started()
        self._tts_pending += 1
        self._tts_idle.clear()
        self._tts_queue.put_nowait(cmd)
        if self.tts_task is None:
            self.tts_task = asyncio.get_running_loop().create_task(self._tts_worker())

    def cancel(self, response: int, t: float) -> None:
        """Barge-in: stop generating and synthesizing ``response`` (its audio is cleared by the caller),
        and say what was stopped."""
        generating, dropped, synthesizing = self.stop(response)
        if generating:
            self._emit(LlmCancelled(t, response=response))
        if dropped or synthesizing:
            self._emit(TtsCancelled(t, response=response, chunks_dropped=dropped))

    def stop(self, response: int) -> tuple[bool, int, bool]:
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

    # -- LLM -------------------------------------------------------------------------

    async def _generate(self, cmd: StartResponse) -> None:
        request_id = f"{self._request_prefix}-{cmd.response}" + (f".{cmd.round}" if cmd.round else "")
        error: str | None = None
        tools: dict[str, Any] = {"tools": cmd.tools} if cmd.tools else {}
        serves = Serves.BACKGROUND if cmd.speculative else Serves.AUDIO  # a speculation may be discarded
        stream = self._work.call(serves, self.engines.llm.stream, cmd.messages, request_id, **tools)
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

    async def _extract(self, cmd: Extract) -> None:
        """What the person said of the step's fields: the model's JSON, held to the schema while it
        is written and checked by the one argument checker once whole ({}: it failed, said why)."""
        request_id = f"{self._request_prefix}-{cmd.response}.fields"
        stream = self._work.call(
            Serves.AUDIO, self.engines.llm.stream, cmd.messages, request_id, json_schema=cmd.schema
        )
        values: dict[str, Any] = {}
        try:
            values = SchemaArguments(cmd.schema).check(await _text_of(stream))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the engine failed, or wrote what the schema does not hold: nothing is kept
            self._error("llm", f"the fields of reply {cmd.response}: {type(e).__name__}: {e}")
        finally:
            self._llm_tasks.pop(cmd.response, None)
        self._run(self.conversation.extracted(cmd.response, values, self.clock.now()))

    # -- TTS -------------------------------------------------------------------------

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
        self._work.done()

    async def _synthesize(self, loop: asyncio.AbstractEventLoop, cmd: Synthesize) -> None:
        pieces: asyncio.Queue = asyncio.Queue()
        cancel = threading.Event()
        end = object()

        def synthesis() -> None:
            try:
                voice = self.engines.voices.speaking(cmd.language)
                for piece in voice.synthesize(cmd.text, cancel, exact=self.lockstep):
                    loop.call_soon_threadsafe(pieces.put_nowait, piece)
            except Exception as e:
                loop.call_soon_threadsafe(pieces.put_nowait, e)
            finally:
                loop.call_soon_threadsafe(pieces.put_nowait, end)

        self._tts_cancel = (cmd.response, cancel)
        # A speculative reply's speech is held until it is committed, and may be discarded.
        serves = Serves.BACKGROUND if cmd.response in self.held else Serves.AUDIO
        future = self._work.in_thread(serves, self.engines.tts_executor, synthesis)
        error: str | None = None
        first = True
        try:
            while (piece := await pieces.get()) is not end:
                if isinstance(piece, Exception):
                    error = repr(piece)
                    continue
                if cancel.is_set():
                    continue  # cancelled by a barge-in: drop what is still coming
                held = self.held.get(cmd.response)
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


async def _text_of(stream: AsyncIterator[str | ToolCallDelta]) -> str:
    """All the text of an LLM request's stream (no call is asked for), which is closed however it ends."""
    text = ""
    try:
        async for delta in stream:
            if not isinstance(delta, ToolCallDelta):
                text += delta
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    return text
