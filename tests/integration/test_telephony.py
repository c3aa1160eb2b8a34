"""A phone call on the real engines: a caller as Twilio's Media Streams makes one
(tests/twilio_caller.py) says a shared recording at 8 kHz in mu-law to ``/telephony/twilio``;
Silero, Whisper, the LLM and piper answer in mu-law. Real time, as a call is."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import recordings
from tests.twilio_caller import call, to_8k
from transport.files import load_audio
from voice.bench.scoring import word_error_rate

pytestmark = pytest.mark.engines


def _rec(name: str):
    return next(r for r in recordings() if name in r.name)


async def new_session(server, before: set[str], timeout: float = 15.0):
    """The record of the one session that ended since ``before``."""
    for _ in range(round(timeout / 0.05)):
        if new := set(server.closed) - before:
            (sid,) = new
            return server.closed[sid]
        await asyncio.sleep(0.05)
    raise AssertionError("the call's session did not end")


async def test_a_spoken_turn_over_the_phone(voice_server):
    rec = _rec("aew_a0003")
    before = set(voice_server.closed)
    received = await call(voice_server.port, to_8k(load_audio(rec.path)), tail_s=40.0)
    record = await new_session(voice_server, before)
    turns = record.history.turns
    assert [t.role for t in turns] == ["user", "assistant"], [(t.role, t.text) for t in turns]
    assert word_error_rate(rec.transcript, turns[0].text) <= 0.3, turns[0].text
    assert not turns[1].interrupted and turns[1].text
    kinds = [m["event"] for m in received]
    assert kinds.count("media") >= 25 and "clear" not in kinds  # at least half a second of reply


async def test_a_barge_in_over_the_phone_clears_twilio_and_keeps_what_the_caller_heard(voice_server):
    question = to_8k(load_audio(_rec("aew_a0003").path))
    interruption = to_8k(load_audio(_rec("LJ001-0005").path)[: 16000 * 3])
    before = set(voice_server.closed)
    received = await call(voice_server.port, question, interrupt=(interruption, 1.5), tail_s=40.0)
    record = await new_session(voice_server, before)
    kinds = [m["event"] for m in received]
    assert "clear" in kinds, kinds
    cut = next(t for t in record.history.turns if t.role == "assistant")
    assert cut.interrupted and cut.text and len(cut.text) < len(cut.generated_text or "")
    users = [t.text for t in record.history.turns if t.role == "user"]
    assert len(users) == 2 and len(users[1].split()) >= 3, users
