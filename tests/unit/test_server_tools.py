"""Tools behind the WebSocket server, with stand-in engines: our protocol's tool events, and a
tool that ends the conversation closing the connection cleanly once the goodbye was sent."""

from __future__ import annotations

import asyncio
import json

import numpy as np
from stand_in_engines import StandInEngines, StandInLLM, StandInRecognizer, silence, tone
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedOK

from core.tool_calls import ToolCallDelta
from shell.config import SessionConfig
from shell.tools import load_tools
from transport.protocol import float_to_pcm16
from transport.ws_server import ServerConfig, VoiceServer


async def test_end_conversation_closes_the_connection_with_1000_after_the_goodbye():
    replies = [[ToolCallDelta(0, "c0", "end_conversation", "{}")], "Goodbye."]
    engines = StandInEngines(StandInRecognizer({300: "bye for now"}), StandInLLM(replies))
    config = ServerConfig(port=0, session=SessionConfig(end_of_turn=None), tools=load_tools(["builtin"]))
    server = VoiceServer(engines, config)  # type: ignore[arg-type]
    await server.start()
    received: list[dict] = []
    try:
        async with connect(f"ws://127.0.0.1:{server.port}/ws") as ws:
            await ws.send(json.dumps({"type": "hello", "sample_rate": 16000}))

            async def speak() -> None:
                audio = np.concatenate([tone(1.2), silence(10.0)])
                for i in range(0, len(audio), 320):  # in real time, as a microphone
                    await ws.send(float_to_pcm16(audio[i : i + 320]))
                    await asyncio.sleep(0.02)

            speaking = asyncio.create_task(speak())
            try:
                async with asyncio.timeout(20):
                    async for message in ws:
                        if isinstance(message, str):
                            received.append(json.loads(message))
            except ConnectionClosedOK:
                pass
            finally:
                speaking.cancel()
                await asyncio.gather(speaking, return_exceptions=True)
            assert (ws.close_code, ws.close_reason) == (1000, "conversation ended")
    finally:
        await server.close()
        await engines.aclose()
    kinds = [m["type"] for m in received]
    assert kinds.index("tool_call") < kinds.index("tool_result") < kinds.index("turn_end")
    (call,) = [m for m in received if m["type"] == "tool_call"]
    assert (call["name"], call["arguments"]) == ("end_conversation", "{}")
    (said,) = [m for m in received if m["type"] == "assistant_text"]
    assert said["text"] == "Goodbye."
