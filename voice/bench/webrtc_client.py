"""A WebRTC client made with aiortc, as a program (or a browser) would use ``POST /webrtc/offer``:
its microphone an audio track that says a recording in real time, the reply played from the
server's track, our protocol's events on the data channel. For the WebRTC tests."""

from __future__ import annotations

import asyncio
import fractions
import http.client
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from aiortc import MediaStreamTrack, RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from av import AudioFrame

from core.audio import ASR_RATE

FRAME = ASR_RATE // 50  # 20 ms at 16 kHz


@dataclass
class WebRTCRun:
    events: list[dict[str, Any]] = field(default_factory=list)
    reply: list[np.ndarray] = field(default_factory=list)  # what the reply track played, 48 kHz mono
    close: dict[str, Any] | None = None  # the server's close message
    answer_status: int = 0
    started_at: float | None = None  # when the microphone's first frame went (time.monotonic())
    first_voice_at: float | None = None  # when the first reply frame with sound in it came

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    @property
    def reply_audio(self) -> np.ndarray:
        return np.concatenate(self.reply) if self.reply else np.zeros(0, np.float32)


class Speaker(MediaStreamTrack):
    """The client's microphone: ``script`` in real time, then silence; ``interrupt=(speech, after_s)``
    says ``speech`` once ``after_s`` of reply audio (voiced) has been received."""

    kind = "audio"

    def __init__(self, audio: np.ndarray, run: WebRTCRun, interrupt: tuple[np.ndarray, float] | None) -> None:
        super().__init__()
        self.queue = audio.astype(np.float32)
        self.run, self.interrupt = run, interrupt
        self.pts = 0
        self.start: float | None = None
        self.voiced_s = 0.0  # reply audio received with sound in it

    async def recv(self) -> AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self.start is None:
            self.start = self.run.started_at = time.monotonic()
        else:
            self.pts += FRAME
            await asyncio.sleep(max(0.0, self.start + self.pts / ASR_RATE - time.monotonic()))
        if not len(self.queue) and self.interrupt is not None and self.voiced_s >= self.interrupt[1]:
            self.queue, self.interrupt = self.interrupt[0].astype(np.float32), None
        chunk, self.queue = self.queue[:FRAME], self.queue[FRAME:]
        chunk = np.pad(chunk, (0, FRAME - len(chunk)))
        frame = AudioFrame.from_ndarray((chunk * 32767).astype("<i2").reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate, frame.pts, frame.time_base = ASR_RATE, self.pts, fractions.Fraction(1, ASR_RATE)
        return frame


def post_offer(url: str, sdp: str, token: str | None = None) -> tuple[int, str]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    headers = {"Content-Type": "application/json", "Origin": f"http://{parts.netloc}"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request("POST", "/webrtc/offer", json.dumps({"type": "offer", "sdp": sdp}), headers)
    response = conn.getresponse()
    body = response.read().decode()
    conn.close()
    return response.status, body


async def webrtc_call(
    base_url: str,
    audio: np.ndarray,
    interrupt: tuple[np.ndarray, float] | None = None,
    until: str = "turn_end",
    turns: int = 1,
    timeout_s: float = 60.0,
    hello: dict[str, Any] | None = None,
) -> WebRTCRun:
    """Say ``audio`` (16 kHz) over WebRTC to the server at ``base_url`` (http://host:port) until
    ``turns`` events of kind ``until`` came (then 0.5 s more), or the server closed."""
    run = WebRTCRun()
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    speaker = Speaker(audio, run, interrupt)
    pc.addTrack(speaker)
    channel = pc.createDataChannel("events")
    done = asyncio.Event()
    tasks: list[asyncio.Task] = []

    @channel.on("open")
    def _open() -> None:
        channel.send(json.dumps({"type": "hello", "sample_rate": 48000, **(hello or {})}))

    @channel.on("message")
    def _message(message: str) -> None:
        event = json.loads(message)
        run.events.append(event)
        if event["type"] == "close":
            run.close = event
            done.set()
        elif event["type"] == until and len(run.of(until)) >= turns:
            asyncio.get_running_loop().call_later(0.5, done.set)

    async def listen(track: MediaStreamTrack) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            x = frame.to_ndarray().astype(np.float32) / 32768
            x = x.reshape(-1, len(frame.layout.channels)).mean(axis=1)
            run.reply.append(x)
            if np.sqrt(np.mean(x**2)) > 0.003:
                speaker.voiced_s += len(x) / frame.sample_rate
                if run.first_voice_at is None:
                    run.first_voice_at = time.monotonic()

    @pc.on("track")
    def _track(track: MediaStreamTrack) -> None:
        tasks.append(asyncio.create_task(listen(track)))

    await pc.setLocalDescription(await pc.createOffer())
    status, body = await asyncio.to_thread(post_offer, base_url, pc.localDescription.sdp)
    run.answer_status = status
    if status != 200:
        await pc.close()
        raise AssertionError(f"the offer was refused: {status} {body}")
    answer = json.loads(body)
    await pc.setRemoteDescription(RTCSessionDescription(answer["sdp"], answer["type"]))
    try:
        async with asyncio.timeout(timeout_s):
            await done.wait()
    finally:
        for task in tasks:
            task.cancel()
        await pc.close()
    return run
