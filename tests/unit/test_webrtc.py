"""WebRTC: the offer's checks and the reply track's accounting (pure), and a call over real
WebRTC on loopback (aiortc on both sides, Opus, a data channel) with stand-in engines."""

from __future__ import annotations

import asyncio
import http.client
import json
import time

import numpy as np
import pytest
from av import AudioFrame
from stand_in_engines import StandInEngines, StandInLLM, StandInRecognizer, silence, tone
from websockets.asyncio.client import connect

from shell.config import SessionConfig
from transport.webrtc import PLAYOUT_DELAY_S, Microphone, OfferError, ReplyTrack, read_offer
from transport.ws_server import ServerConfig, VoiceServer
from voice.bench.webrtc_client import webrtc_call

SDP = (
    "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
    "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n"
)


def test_an_offer_is_read_as_sdp_or_json():
    assert read_offer("application/sdp", SDP.encode()) == SDP
    assert read_offer("application/json; charset=utf-8", json.dumps({"type": "offer", "sdp": SDP}).encode()) == SDP


@pytest.mark.parametrize(
    ("kind", "body", "said"),
    [
        ("text/plain", SDP.encode(), "send application/sdp or application/json"),
        ("application/json", b"{", "not JSON"),
        ("application/json", json.dumps({"type": "answer", "sdp": SDP}).encode(), '"type": "offer"'),
        ("application/sdp", b"hello", "not an SDP offer"),
        ("application/sdp", SDP.replace("m=audio", "m=video").encode(), "no audio"),
        ("application/sdp", SDP.split("m=application")[0].encode(), "no data channel"),
        ("application/sdp", b"v=0\xff", "not UTF-8"),
    ],
)
def test_an_offer_that_cannot_be_answered_says_why(kind, body, said):
    with pytest.raises(OfferError, match=said):
        read_offer(kind, body)


def test_the_track_counts_what_was_sent_heard_a_playout_delay_later_and_drops_what_it_held():
    track = ReplyTrack(24000)
    track.push(np.ones(1200, np.float32))  # 50 ms: two frames and a half
    first = track._take()
    assert len(first) == 480 and track.queued == 720
    assert track.count_heard(time.monotonic()) == 0  # sent, not yet played by the browser
    assert track.count_heard(time.monotonic() + PLAYOUT_DELAY_S) == 480
    track.paused = True
    assert not track._take().any() and track.queued == 720  # held while the speech over it is judged
    track.paused = False
    track._take()
    track.flush()  # the barge-in: what was sent plays, what is held never does
    assert (track.heard, track.dropped, track.queued) == (960, 240, 0)


async def test_a_turn_over_webrtc_is_heard_answered_and_played_from_the_rtp_timeline():
    engines = StandInEngines(StandInRecognizer({300: "what time is it"}), StandInLLM(["It is noon."]))
    server = VoiceServer(engines, ServerConfig(port=0, session=SessionConfig(end_of_turn=None)))  # type: ignore[arg-type]
    await server.start()
    try:
        run = await webrtc_call(f"http://127.0.0.1:{server.port}", np.concatenate([tone(1.2), silence(0.5)]))
    finally:
        await server.close()
        await engines.aclose()
    assert run.events[0]["type"] == "ready"
    assert [e["text"] for e in run.of("transcript_final")] == ["what time is it"]
    (end,) = run.of("turn_end")
    assert end["text"] == "It is noon." and not end["interrupted"]
    reply = run.reply_audio
    assert np.sqrt(np.mean(reply**2)) > 0.01  # the reply track carried the voice
    (record,) = server.closed.values()
    assert [(t.role, t.text) for t in record.history.turns] == [
        ("user", "what time is it"),
        ("assistant", "It is noon."),
    ]


def post(port: int, path: str, body: bytes, kind: str = "application/sdp", **headers: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", path, body, {"Content-Type": kind, **headers})
    response = conn.getresponse()
    out = response.status, response.read().decode()
    conn.close()
    return out


async def test_the_offer_endpoint_refuses_what_it_cannot_answer_and_says_why():
    engines = StandInEngines(StandInRecognizer({}), StandInLLM(["Hi."]))
    server = VoiceServer(engines, ServerConfig(port=0, token="secret", session=SessionConfig(end_of_turn=None)))  # type: ignore[arg-type]
    await server.start()
    port = server.port
    auth = {"Authorization": "Bearer secret"}
    try:
        cases = [
            (("/webrtc/offer", SDP.encode()), 401, "token"),
            (("/elsewhere", SDP.encode()), 404, "POST is for /webrtc/offer"),
            (("/webrtc/offer", b"v=0 but no media"), 400, "no audio"),
            (("/webrtc/offer", SDP.encode() * 2000), 413, "at most"),
            (("/webrtc/offer", SDP.encode(), "text/plain"), 400, "application/sdp or application/json"),
            (("/webrtc/offer", SDP.encode()), 400, "could not be answered"),  # no ICE, no DTLS: aiortc says no
        ]
        for i, (args, status, said) in enumerate(cases):
            got = await asyncio.to_thread(post, port, *args, **({} if i == 0 else auth))
            assert got[0] == status and said in got[1], (args[0], got)
        got = await asyncio.to_thread(post, port, "/webrtc/offer", SDP.encode(), Host="evil.example", **auth)
        assert got[0] == 403
        assert server.connections == {}  # nothing was started
        # The WebSocket side is as it was.
        async with connect(f"ws://127.0.0.1:{port}/ws", additional_headers=auth) as ws:
            await ws.send(json.dumps({"type": "hello", "sample_rate": 16000}))
            assert json.loads(await ws.recv())["type"] == "ready"
    finally:
        await server.close()
        await engines.aclose()


def test_the_microphone_hears_what_opus_decoded_at_its_level():
    mic = Microphone()
    t = np.arange(960) / 48000
    x = 0.25 * np.sin(2 * np.pi * 440 * t)
    stereo = np.repeat((x * 32767).astype("<i2"), 2).reshape(1, -1)  # packed s16, as aiortc decodes Opus
    for _ in range(10):
        frame = AudioFrame.from_ndarray(stereo, format="s16", layout="stereo")
        frame.sample_rate = 48000
        mic._receive(frame)
    heard = mic.take()
    assert 2800 <= len(heard) <= 3200  # 200 ms at 16 kHz (the resampler holds a little back)
    assert abs(np.sqrt(np.mean(heard[500:] ** 2)) - 0.25 / np.sqrt(2)) < 0.01
