"""The engines a process loads once and every session shares."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import onnxruntime

from asr.smart_turn import SmartTurn
from asr.vad import SileroVAD, load_session
from asr.whisper import WhisperRecognizer
from core.budget import Budget
from core.voices import VoiceTable
from llm.base import LLM, GenerationConfig
from shell import models
from shell.scheduler import EngineQueue
from shell.voices import Voice, Voices

log = logging.getLogger(__name__)


@dataclass
class EngineConfig:
    asr_model: str = "base"
    partial_model: str | None = "tiny.en"  # None: no partial hypotheses
    smart_turn: bool = True  # the end-of-turn model (Smart Turn), for --turn-detector smart-turn
    # The default voice and the voices given per language (--voice), and the languages whose
    # voices are loaded at start (the others on their first reply): shell/voices.py.
    voices: VoiceTable = field(default_factory=VoiceTable)
    languages: tuple[str, ...] = ("en",)
    llm_model: str = models.DEFAULT_LLM
    # vLLM's tool parser for the embedded model's calls (None: the one its name is known to need;
    # a model without one cannot be offered tools).
    tool_parser: str | None = None
    llm_url: str | None = None  # an OpenAI-compatible server instead of the embedded engine
    # More servers of the same model: two or more URLs in all (with llm_url) make an LLMPool.
    llm_urls: tuple[str, ...] = ()
    # Several servers: a conversation's replies go to the one that caches its prefix (llm/pool.py).
    llm_affinity: bool = True
    llm_compile: bool = False  # torch.compile in the embedded engine (slow start on the CPU)
    llm_dtype: str | None = None  # the embedded engine's weights (None: llm.vllm_engine.default_dtype())
    device: str = "auto"
    # Silence encoded after each utterance (None: Whisper's full 30 s window, ~4x slower on a CPU).
    asr_window_pad_s: float | None = 3.0
    output_rate: int = 24000
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    cache_dir: Path = models.ROOT / ".cache"

    def server_urls(self) -> list[str]:
        """``llm_url`` then ``llm_urls``, each once (a trailing slash does not make another server)."""
        urls: list[str] = []
        for u in ([self.llm_url] if self.llm_url else []) + list(self.llm_urls):
            if u and u.rstrip("/") not in urls:
                urls.append(u.rstrip("/"))
        return urls

    @property
    def llm_tool_parser(self) -> str | None:
        return self.tool_parser or models.TOOL_PARSERS.get(self.llm_model)

    def check_models(self) -> None:
        """Raise MissingModelError before anything slow is loaded."""
        models.asr_model_path(self.asr_model)
        if self.partial_model:
            models.asr_model_path(self.partial_model)
        Voices(self.voices, self.output_rate).check()
        models.vad_model_path()
        if self.smart_turn:
            models.smart_turn_model_path()
        if not self.server_urls():
            models.llm_model_path(self.llm_model)


@dataclass
class Engines:
    vad_session: onnxruntime.InferenceSession
    asr_final: WhisperRecognizer
    asr_partial: WhisperRecognizer | None
    llm: LLM
    voices: Voices
    output_rate: int
    load_times: dict[str, float] = field(default_factory=dict)
    smart_turn: SmartTurn | None = None  # the end-of-turn model (None: not loaded; silence ends turns)
    # Partial passes running now over all sessions (event-loop thread only): past
    # its cap, sessions skip partials rather than queue them.
    partial_budget: Budget = field(default_factory=Budget)
    # Speculative replies (started on the early final, before the endpoint) in flight
    # over all sessions: one, since its first chunk takes the one TTS thread that every
    # session's reply needs; past it a turn's reply starts at the endpoint, as without.
    speculation_budget: Budget = field(default_factory=Budget)
    # One queue and thread each, shared by every session, most urgent work first
    # (shell/scheduler.py): the final pass never queues behind a partial pass, and
    # TTS never waits for ASR.
    final_executor: EngineQueue = field(default_factory=lambda: EngineQueue("asr-final"))
    partial_executor: EngineQueue = field(default_factory=lambda: EngineQueue("asr-partial"))
    tts_executor: EngineQueue = field(default_factory=lambda: EngineQueue("tts"))
    # The end-of-turn check (70-100 ms) has its own too: it must not wait behind a
    # final pass (~1 s) or a partial, since the turn's endpoint waits for it. No
    # budget: each session has at most one check in flight, so at most one per
    # session is queued, and a check answered late is only a later endpoint
    # (max_wait_s still ends the turn).
    turn_executor: EngineQueue = field(default_factory=lambda: EngineQueue("end-of-turn"))

    _warm_up: asyncio.Task | None = field(default=None, init=False, repr=False)

    async def warm_up(self) -> None:
        """Make the LLM's first next-token reading as quick as the rest: vLLM sets up its
        logprobs path on the first request that asks for them (1.8 s here, then ~50 ms), and
        the first turn's end-of-turn decision would wait for it. Once per engines, shared by
        every session that asks (on the event loop that serves them); a failure is logged and
        left to the session's own reading (which reports it)."""
        loop = asyncio.get_running_loop()
        if self._warm_up is None or self._warm_up.get_loop() is not loop:
            self._warm_up = loop.create_task(self._read_once(), name="llm-warm-up")
        await asyncio.shield(self._warm_up)

    async def _read_once(self) -> None:
        try:
            await self.llm.next_token_probabilities("Hello there")
        except Exception as e:
            log.warning("LLM warm-up: %r", e)

    @property
    def queues(self) -> tuple[EngineQueue, ...]:
        return (self.final_executor, self.partial_executor, self.tts_executor, self.turn_executor)

    def schedule_by_urgency(self, on: bool) -> None:
        """Most urgent work first (the default), or every queue in arrival order, as before issue 32
        (for benchmarks that compare the two in one run)."""
        for queue in self.queues:
            queue.priority = on

    @property
    def tts(self) -> Voice:
        """The default voice (benchmarks and tools that speak English)."""
        return self.voices.default

    def new_vad(self) -> SileroVAD:
        """A VAD stream of its own (its recurrent state is per stream), on the shared model."""
        return SileroVAD(self.vad_session)

    async def aclose(self) -> None:
        await self.llm.close()
        for queue in self.queues:
            queue.shutdown(wait=False, cancel_futures=True)


def make_llm(cfg: EngineConfig) -> LLM:
    """The embedded engine, one server's client, or a pool over several servers."""
    urls = cfg.server_urls()
    if len(urls) > 1:
        from llm.pool import LLMPool

        return LLMPool(urls, generation=cfg.generation, affinity=cfg.llm_affinity)
    if urls:
        from llm.openai_http import OpenAIChatClient

        return OpenAIChatClient(urls[0], generation=cfg.generation)
    from llm.vllm_engine import VLLMEngine

    return VLLMEngine(
        models.llm_model_path(cfg.llm_model),
        cfg.cache_dir,
        cfg.generation,
        enforce_eager=not cfg.llm_compile,
        dtype=cfg.llm_dtype,
        tool_parser=cfg.llm_tool_parser,
    )


class LoadInterrupted(KeyboardInterrupt):
    """Ctrl+C while the engines were loading; what had started is stopped.

    A KeyboardInterrupt, so a caller that treats Ctrl+C as exit code 130 needs
    nothing more, and can tell this one apart to say so in one line.
    """


def load_engines(cfg: EngineConfig, cancelled: threading.Event | None = None) -> Engines:
    """Load every engine once (seconds to a minute: see the README).

    Blocking. ``cancelled`` is looked at between engines: once set, the engines
    loaded so far are closed and LoadInterrupted is raised; so are they when
    loading one fails.
    """
    cfg.check_models()
    times: dict[str, float] = {}
    llm: LLM | None = None

    def go_on() -> None:
        if cancelled is not None and cancelled.is_set():
            raise LoadInterrupted

    def timed(name: str, fn):
        go_on()
        t0 = time.monotonic()
        value = fn()
        times[name] = round(time.monotonic() - t0, 2)
        return value

    try:
        llm = timed("llm", lambda: make_llm(cfg))
        vad = timed("vad", lambda: load_session(models.vad_model_path()))
        asr_final = timed(
            "asr_final",
            lambda: WhisperRecognizer(models.asr_model_path(cfg.asr_model), cfg.device, pad_s=cfg.asr_window_pad_s),
        )
        asr_partial = None
        if cfg.partial_model:
            asr_partial = timed(
                "asr_partial",
                lambda: WhisperRecognizer(
                    models.asr_model_path(cfg.partial_model), cfg.device, cpu_threads=1, pad_s=cfg.asr_window_pad_s
                ),
            )
        voices = Voices(cfg.voices, cfg.output_rate)
        timed("tts", lambda: voices.load(cfg.languages))
        smart_turn = timed("smart_turn", lambda: SmartTurn(models.smart_turn_model_path())) if cfg.smart_turn else None
        go_on()
    except BaseException:
        if llm is not None:  # the embedded engine's processes would outlive us
            asyncio.run(llm.close())
        raise
    return Engines(vad, asr_final, asr_partial, llm, voices, cfg.output_rate, times, smart_turn=smart_turn)


async def start_engines(cfg: EngineConfig) -> Engines:
    """``load_engines`` in a thread of its own, for the event loop; cancellable.

    On Ctrl+C asyncio.run cancels the main task. Cancelled while loading, this
    kills the engine processes still starting (vLLM cannot abort a start: see
    llm/vllm_engine.py), waits for the loading thread to give up, so that no
    process starts after it returns, and raises LoadInterrupted. The wait is
    at most the seconds the thread needs to start vLLM's processes, if they
    were not started yet (its imports), or to finish the engine it loads and
    close the embedded one in order, if it had started. A second Ctrl+C
    meanwhile ends it at once (KeyboardInterrupt).
    """
    loop = asyncio.get_running_loop()
    loaded: asyncio.Future[Engines] = loop.create_future()
    cancelled = threading.Event()

    def settle(result: Engines | None, error: BaseException | None) -> None:
        if error is None:
            loaded.set_result(result)
        else:
            loaded.set_exception(error)

    def load() -> None:
        try:
            result, error = load_engines(cfg, cancelled), None
        except BaseException as e:
            result, error = None, e
        with suppress(RuntimeError):  # the loop is closed: a second Ctrl+C did not wait
            loop.call_soon_threadsafe(settle, result, error)

    # A daemon thread: a load given up on is never waited for at exit.
    threading.Thread(target=load, name="load-engines", daemon=True).start()
    try:
        return await asyncio.shield(loaded)
    except asyncio.CancelledError:
        cancelled.set()
        from llm.vllm_engine import kill_starting_engines

        while not loaded.done():
            kill_starting_engines()
            await asyncio.wait({loaded}, timeout=0.2)
        if loaded.exception() is None:  # it had just finished
            await loaded.result().aclose()
        raise LoadInterrupted from None
