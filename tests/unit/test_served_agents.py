"""Several agents on one server (``--agent NAME=FILE``), each session choosing one by name.

The options as ``voice.run`` reads them, and sessions over the real WebSocket server with the
stand-in engines: hello's ``agent`` picks the flow whose start step is said first; a name the
server does not have is an ``unknown_agent`` error, and the session goes on with the default.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from stand_in_engines import StandInEngines, StandInLLM, StandInRecognizer, silence
from websockets.asyncio.client import connect

from core.flow import Flow, Step
from shell.config import SessionConfig
from transport.protocol import Configure, float_to_pcm16
from transport.routes import dialect_for
from transport.server_types import ServedAgent
from transport.twilio import TwilioProtocol
from transport.ws_server import ServerConfig, VoiceServer
from voice.agent import load_agent
from voice.app.agents import AgentOption, AgentOptionError, agent_options
from voice.app.options import build_parser
from voice.app.runtime import UsageError, run_setup

ROOT = Path(__file__).resolve().parents[2]
RESTAURANT = str(ROOT / "agents" / "restaurant.yaml")
GREETING = "Luigi's, good evening. How can I help?"
DESK = Flow(role="A help desk.", steps={"hello": Step("hello", say="Help desk, how can I help?")}, start="hello")


def test_agent_options_are_named_or_take_their_files_name():
    assert agent_options(["agents/restaurant.yaml", "desk=agents/desk.py"]) == [
        AgentOption("restaurant", "agents/restaurant.yaml"),
        AgentOption("desk", "agents/desk.py"),
    ]
    with pytest.raises(AgentOptionError, match="two agents are named 'a'"):
        agent_options(["a=x.yaml", "a=y.yaml"])


def test_a_file_whose_name_has_an_equals_sign_is_still_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("a=b.yaml").write_text("")
    assert agent_options(["a=b.yaml"]) == [AgentOption("a=b", "a=b.yaml")]


def setup_of(*argv: str):
    return run_setup(build_parser().parse_args(["--llm-model", "qwen2.5-coder-0.5b", *argv]))


def test_several_agents_are_for_a_server():
    with pytest.raises(UsageError, match="several agents are for a server"):
        setup_of("--agent", f"one={RESTAURANT}", "--agent", f"two={RESTAURANT}")


def test_a_server_holds_each_agent_by_name_the_first_the_default_each_with_its_own_tools():
    setup = setup_of("--serve", "--agent", RESTAURANT, "--agent", f"luigi={RESTAURANT}", "--tools", "builtin")
    assert list(setup.agents) == ["restaurant", "luigi"]
    first, second = setup.agents.values()
    assert first.flow is setup.session.flow and first.tools is setup.tools
    assert second.tools is not None and second.tools is not first.tools
    names = {t.name for t in second.tools}
    assert {"book_table", "get_current_time"} <= names  # its own, and --tools'


async def session_messages(server: VoiceServer, hello: dict, seconds: float = 1.5) -> list[dict]:
    """What a client that said ``hello`` and sent ``seconds`` of silence was sent, until a reply was heard."""
    received: list[dict] = []
    async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
        await ws.send(json.dumps({"type": "hello", "sample_rate": 16000, **hello}))
        audio = silence(seconds)
        for i in range(0, len(audio), 3200):
            await ws.send(float_to_pcm16(audio[i : i + 3200]))
        try:
            async with asyncio.timeout(seconds + 3):
                async for message in ws:
                    if isinstance(message, str):
                        received.append(json.loads(message))
                        if received[-1]["type"] == "turn_end":
                            break
        except TimeoutError:
            pass
    return received


async def test_each_session_gets_the_agent_it_names_and_an_unknown_name_the_default():
    engines = StandInEngines(StandInRecognizer({}), StandInLLM([]))
    restaurant = load_agent(RESTAURANT)
    agents = {"restaurant": ServedAgent(restaurant.flow, restaurant.tools), "desk": ServedAgent(DESK, None)}
    session = SessionConfig(end_of_turn=None, flow=restaurant.flow)
    server = VoiceServer(engines, ServerConfig(port=0, session=session, tools=restaurant.tools, agents=agents))  # type: ignore[arg-type]
    await server.start()
    try:
        desk = await session_messages(server, {"agent": "desk"})
        default = await session_messages(server, {})
        unknown = await session_messages(server, {"agent": "../agents/restaurant.yaml"})
    finally:
        await server.close()
        await engines.aclose()

    def said(messages: list[dict]) -> list[str]:
        return [m["text"] for m in messages if m["type"] == "turn_end"]

    assert said(desk) == ["Help desk, how can I help?"]
    assert said(default) == [GREETING]
    (error,) = [m for m in unknown if m["type"] == "error"]
    assert error["code"] == "unknown_agent" and '"desk"' in error["message"]
    assert said(unknown) == [GREETING]


def test_a_twilio_call_chooses_its_agent_by_the_agent_parameter():
    proto = TwilioProtocol("s" * 32, 24000)
    start = {"event": "start", "start": {"streamSid": "MZ1", "callSid": "CA1", "customParameters": {"agent": "desk"}}}
    (configure,) = proto.receive_text(json.dumps(start))
    assert isinstance(configure, Configure) and configure.agent == "desk"


def test_a_realtime_session_chooses_its_agent_by_the_url():
    server = SimpleNamespace(
        engines=SimpleNamespace(output_rate=24000), config=ServerConfig(session=SessionConfig(end_of_turn=None))
    )
    dialect = dialect_for(server, "/v1/realtime?model=gpt-realtime&agent=desk", "s" * 32)  # type: ignore[arg-type]
    (configure,) = dialect.start()
    assert isinstance(configure, Configure) and configure.agent == "desk"
