"""WebRTC on the real engines: an aiortc client (tests/webrtc_client.py) says a shared recording
over Opus to ``POST /webrtc/offer``'s peer; Silero, Whisper, the LLM and piper answer on the
reply track. A spoken turn, and a barge-in whose stored reply is what the RTP timeline says was
heard. Real time, as WebRTC is."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.conftest import recordings
from transport.files import load_audio
from voice.bench.scoring import word_error_rate
from voice.bench.webrtc_client import webrtc_call

pytestmark = pytest.mark.engines


def _rec(name: str):
    return next(r for r in recordings() if name in r.name)


async def record_of(server, session: str):
    for _ in range(200):
        if session in server.closed:
            return server.closed[session]
        await asyncio.sleep(0.05)
    raise AssertionError("the session did not end")


async def test_a_spoken_turn_over_webrtc(voice_server):
    rec = _rec("aew_a0003")
    run = await webrtc_call(voice_server.url, load_audio(rec.path))
    (heard,) = run.of("transcript_final")
    assert word_error_rate(rec.transcript, heard["text"]) <= 0.3, heard
    (end,) = run.of("turn_end")
    assert end["text"] and not end["interrupted"]
    reply = run.reply_audio
    assert np.sqrt(np.mean(reply**2)) > 0.005  # piper's voice came over the reply track
    record = await record_of(voice_server, run.of("ready")[0]["session"])
    assert [t.role for t in record.history.turns] == ["user", "assistant"]
    assert record.history.turns[1].text == end["text"]


async def test_a_barge_in_over_webrtc_keeps_what_was_heard(voice_server):
    question = load_audio(_rec("aew_a0003").path)
    interruption = load_audio(_rec("LJ001-0005").path)[: 16000 * 3]
    run = await webrtc_call(voice_server.url, question, interrupt=(interruption, 1.5), turns=2, timeout_s=90)
    kinds = [e["type"] for e in run.events]
    assert {"barge_in", "playback_stopped", "truncate"} <= set(kinds), kinds
    record = await record_of(voice_server, run.of("ready")[0]["session"])
    cut = next(t for t in record.history.turns if t.role == "assistant")
    assert cut.interrupted and cut.text and len(cut.text) < len(cut.generated_text or ""), cut
    users = [t.text for t in record.history.turns if t.role == "user"]
    assert len(users) == 2 and len(users[1].split()) >= 3, users
