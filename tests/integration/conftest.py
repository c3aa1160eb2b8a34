"""The real engines, loaded once per test session and shared by every test."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
import pytest_asyncio

from core.events import Event, event_from_json
from shell.clock import MonotonicClock, VirtualClock
from shell.config import SessionConfig
from shell.engines import EngineConfig, Engines, load_engines
from shell.models import FASTEST_LLM
from shell.session import Session
from shell.tools import Tools
from transport.files import load_audio
from transport.replay import replay

E = TypeVar("E", bound=Event)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def engines() -> Engines:
    """The session's engines, on the fastest bundled model: these tests check what is heard and
    when; what the default model says is measured by ``voice.bench answers``."""
    eng = await asyncio.to_thread(load_engines, EngineConfig(llm_model=FASTEST_LLM))
    yield eng
    await eng.aclose()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def qwen(tmp_path_factory):
    """The model that can call tools (Qwen2.5-Coder-0.5B-Instruct), embedded, loaded once."""
    from llm.base import GenerationConfig
    from llm.vllm_engine import VLLMEngine
    from shell.models import TOOL_PARSERS, llm_model_path

    engine = await asyncio.to_thread(
        VLLMEngine,
        llm_model_path("qwen2.5-coder-0.5b"),
        tmp_path_factory.mktemp("vllm-qwen"),
        GenerationConfig(max_tokens=64),
        tool_parser=TOOL_PARSERS["qwen2.5-coder-0.5b"],
    )
    yield engine
    await engine.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def with_qwen(engines, qwen) -> Engines:
    """The shared engines with the model that calls tools."""
    import dataclasses

    return dataclasses.replace(engines, llm=qwen)


@pytest.fixture(scope="module")
def say():
    """Piper (joe) speaking texts, with the pauses (seconds, numbers) between them, at a person's level."""
    from core.audio import ASR_RATE
    from shell import models
    from tts.piper_tts import PiperTTS

    tts = PiperTTS(models.voice_path("joe"), ASR_RATE)

    def speak(*texts_and_pauses: str | float) -> np.ndarray:
        parts = [np.zeros(ASR_RATE // 2, dtype=np.float32)]
        for item in texts_and_pauses:
            if isinstance(item, float | int):
                parts.append(np.zeros(round(item * ASR_RATE), dtype=np.float32))
            else:
                parts += [0.5 * p.audio for p in tts.synthesize(item)]
        parts.append(np.zeros(ASR_RATE, dtype=np.float32))
        return np.concatenate(parts).astype(np.float32)

    return speak


@dataclass
class Run:
    events: list[Event]
    transcript: list[dict[str, Any]]
    reply: np.ndarray
    rate: int
    errors: list[str]

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    def user_text(self) -> str:
        return " ".join(t["text"] for t in self.transcript if t["role"] == "user")


async def run_replay(
    engines: Engines,
    audio: np.ndarray | Path,
    fast: bool = True,
    config: SessionConfig | None = None,
    tools: Tools | None = None,
) -> Run:
    if isinstance(audio, Path):
        audio = load_audio(audio)
    events: list[Event] = []
    clock = VirtualClock() if fast else MonotonicClock()
    session = Session(engines, clock, config, on_event=events.append, lockstep=fast, tools=tools)
    try:
        result = await replay(session, audio, settle=fast)
    finally:
        await session.aclose()
    for e in events:  # every event must serialise, and read back
        assert event_from_json(json.loads(json.dumps(e.to_json()))) == e
    return Run(events, session.history.to_json(), result.reply, engines.output_rate, session.errors)


@pytest.fixture
def replay_run():
    return run_replay


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def voice_server(engines, tmp_path_factory):
    """The WebSocket server on a free loopback port, with the shared engines and a store.

    ``.url`` is its http:// address (the page at /, our protocol at /ws, the
    Realtime dialect at /v1/realtime)."""
    from transport.ws_server import ServerConfig, VoiceServer
    from voice.app.conversations import Conversations
    from voice.app.store import ConversationStore

    store = ConversationStore.open(tmp_path_factory.mktemp("db") / "conversations.db")
    server = VoiceServer(engines, ServerConfig(port=0), conversations=Conversations(store))
    await server.start()
    server.url = f"http://127.0.0.1:{server.port}"
    server.ws_url = f"ws://127.0.0.1:{server.port}/ws"
    yield server
    await server.close()
    store.close()
