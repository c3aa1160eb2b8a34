"""An agent's transfer on a phone call: the live call updated with TwiML ``<Dial>`` through Twilio's
REST API, once the handover was heard (transport/twilio_calls.py).

A call over the real WebSocket server with the stand-in engines, and a local stand-in of Twilio's
``Calls`` endpoint that records each request and answers as it is told: accepted, the call is put
through and our part ends; refused, the caller hears so and the conversation goes on.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import numpy as np
from stand_in_engines import StandInEngines, StandInLLM, StandInRecognizer, tone

from core.call import CallConfig
from shell.config import SessionConfig
from shell.phone_line import TRANSFER_FAILED
from transport.twilio_calls import dial_twiml
from transport.ws_server import ServerConfig, VoiceServer
from voice.agent import load_agent
from voice.bench.twilio_caller import Listen, Quiet, Say, call, to_8k

SUPPORT = Path(__file__).resolve().parents[2] / "agents" / "support.yaml"
HANDOVER = "Let me put you through to a colleague."


class StandInTwilio(ThreadingHTTPServer):
    """Twilio's REST API as far as a call's update goes: each request kept, answered with ``status``."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.requests: list[tuple[str, str, dict[str, list[str]]]] = []  # (path, Authorization, form)

        class Handler(BaseHTTPRequestHandler):
            def do_POST(handler) -> None:
                body = handler.rfile.read(int(handler.headers["Content-Length"])).decode()
                self.requests.append((handler.path, handler.headers["Authorization"], parse_qs(body)))
                handler.send_response(self.status)
                handler.send_header("Content-Type", "application/json")
                handler.end_headers()
                handler.wfile.write(b'{"sid": "CA456"}' if self.status < 300 else b'{"message": "not in progress"}')

            def log_message(self, *args) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


async def caller_asks_for_a_person(monkeypatch, status: int) -> tuple[StandInTwilio, object]:
    twilio = StandInTwilio(status)
    monkeypatch.setenv("TWILIO_ACCOUNT_SID", "AC123")
    monkeypatch.setenv("TWILIO_AUTH_TOKEN", "secret")
    monkeypatch.setenv("TWILIO_API_URL", f"http://127.0.0.1:{twilio.server_address[1]}")
    agent = load_agent(SUPPORT)
    engines = StandInEngines(StandInRecognizer({300: "I want to talk to a person"}), StandInLLM([]))
    session = SessionConfig(end_of_turn=None, flow=agent.flow)
    config = ServerConfig(port=0, session=session, tools=agent.tools, call=CallConfig(greeting=None, idle=None))
    server = VoiceServer(engines, config)  # type: ignore[arg-type]
    await server.start()
    try:
        await call(server.port, steps=[Listen(6.0), Say(to_8k(np.asarray(tone(1.2)))), Quiet(9.0)])
    finally:
        await server.close()
        await engines.aclose()
        twilio.shutdown()
    (record,) = server.closed.values()
    return twilio, record


async def test_the_call_is_put_through_once_the_handover_was_heard(monkeypatch):
    twilio, record = await caller_asks_for_a_person(monkeypatch, 200)
    ((path, auth, form),) = twilio.requests
    assert path == "/2010-04-01/Accounts/AC123/Calls/CA456.json"
    assert auth == "Basic QUMxMjM6c2VjcmV0"  # AC123:secret
    assert form == {"Twiml": ["<Response><Dial><Number>+15550199</Number></Dial></Response>"]}
    assert [t.text for t in record.history.turns if t.role == "assistant"][-1] == HANDOVER
    assert record.close_code == 1000  # our part of the call is over: Twilio dials


async def test_a_transfer_twilio_refuses_is_said_and_the_conversation_goes_on(monkeypatch):
    twilio, record = await caller_asks_for_a_person(monkeypatch, 400)
    assert len(twilio.requests) == 1
    said = [t.text for t in record.history.turns if t.role == "assistant"]
    assert said[-2:] == [HANDOVER, TRANSFER_FAILED]


def test_a_sip_address_is_dialled_as_sip_and_the_text_is_escaped():
    assert dial_twiml("sip:desk@example.com") == "<Response><Dial><Sip>sip:desk@example.com</Sip></Dial></Response>"
    assert dial_twiml("+1<2>") == "<Response><Dial><Number>+1&lt;2&gt;</Number></Dial></Response>"
