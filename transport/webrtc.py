"""WebRTC (aiortc): a browser's own capture, echo cancellation and jitter buffer, Opus both ways.

Signalling is one plain HTTP request on the server's port: ``POST /webrtc/offer`` with the
client's SDP offer (``application/sdp``, or JSON ``{"type": "offer", "sdp": ...}``), answered
with the SDP answer once our ICE candidates are gathered (no trickle: on a LAN or loopback the
host candidates are enough; ``--ice-server`` adds STUN/TURN servers for anything further).

The offer carries the microphone (an audio track, ``sendrecv``) and a data channel. The data
channel carries our ``/ws`` protocol's JSON messages both ways (``hello``, ``ready``,
transcripts, ``turn_end``...; docs/protocol.md), never audio: the microphone comes as RTP and
the reply goes back as RTP. Closing is a ``close`` message (``{"type": "close", "code",
"reason"}``, a WebSocket close's code and reason), as a data channel has no close codes.

What the person heard comes from the RTP timeline. The reply track hands aiortc one 20 ms frame
each time its sender asks, paced by the RTP clock, so a sample is sent when it is due to play;
the browser plays it a jitter buffer later. It is counted heard ``PLAYOUT_DELAY_S`` after it was
sent; at a barge-in what is already sent counts as heard (it is in the network, it will play)
and what the track still holds is dropped. The server does no echo cancellation of its own:
the browser's canceller has the speaker's real signal, which the server never sees.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import json
import logging
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

import numpy as np
from aiortc import MediaStreamTrack, RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from av import AudioFrame

from core.audio import ASR_RATE, BLOCK_S
from shell.device import Captured, Played
from transport.playback import PlaybackAccount
from transport.resample import Resampler, resampler

log = logging.getLogger("voice.server.webrtc")

FRAME_S = 0.02  # one RTP packet of Opus
# A browser's jitter buffer holds 40-80 ms on a quiet network: sent audio counts heard this much later.
PLAYOUT_DELAY_S = 0.06
QUEUE_S = 0.1  # reply audio the track holds ahead of the RTP clock (the pump tops it up every 20 ms)
MAX_OFFER_BYTES = 64 * 1024  # an audio-and-data offer is 2-6 KB
CHANNEL_OPEN_S = 30.0  # a peer whose data channel has not opened by then is given up


class OfferError(ValueError):
    """An offer that cannot be answered: said to the client with a 400."""


def read_offer(content_type: str, body: bytes) -> str:
    """The SDP of an offer sent as ``application/sdp`` or as JSON ``{"type": "offer", "sdp"}``."""
    kind = content_type.split(";")[0].strip().lower()
    try:
        text = body.decode()
    except UnicodeDecodeError:
        raise OfferError("the offer is not UTF-8 text") from None
    if kind == "application/sdp":
        sdp = text
    elif kind == "application/json":
        try:
            offer = json.loads(text)
        except ValueError:
            raise OfferError("the body is not JSON") from None
        if not isinstance(offer, dict) or offer.get("type") != "offer" or not isinstance(offer.get("sdp"), str):
            raise OfferError('send {"type": "offer", "sdp": "..."}')
        sdp = offer["sdp"]
    else:
        raise OfferError(f"Content-Type {kind or 'none'}: send application/sdp or application/json")
    if not sdp.startswith("v=0"):
        raise OfferError("that is not an SDP offer")
    if "m=audio" not in sdp:
        raise OfferError("the offer has no audio: add the microphone's track")
    if "m=application" not in sdp:
        raise OfferError("the offer has no data channel: create one for the events")
    return sdp


class ReplyTrack(MediaStreamTrack):
    """The reply as an audio track: a 20 ms frame at the session's output rate whenever aiortc's
    RTP sender asks (Opus resamples it to 48 kHz), silence when there is nothing to say."""

    kind = "audio"

    def __init__(self, rate: int) -> None:
        super().__init__()
        self.rate = rate
        self.frame = round(rate * FRAME_S)
        self.paused = False
        self.queued = 0  # samples held, not yet sent
        self._queue: deque[np.ndarray] = deque()
        self._sent: deque[tuple[float, int]] = deque()  # (when sent, samples): not yet counted heard
        self.heard = 0  # samples sent and counted heard
        self.dropped = 0  # samples flushed before they were sent
        self._start: float | None = None
        self._pts = 0

    def push(self, audio: np.ndarray) -> None:
        self._queue.append(audio)
        self.queued += len(audio)

    def flush(self) -> None:
        """Drop what is held; what was sent will play, and counts as heard now."""
        self.dropped += self.queued
        self._queue.clear()
        self.queued = 0
        self.heard += sum(n for _, n in self._sent)
        self._sent.clear()

    def count_heard(self, now: float) -> int:
        """Samples heard by ``now`` (sent at least PLAYOUT_DELAY_S before it), in total."""
        while self._sent and self._sent[0][0] <= now - PLAYOUT_DELAY_S:
            self.heard += self._sent.popleft()[1]
        return self.heard

    def _take(self) -> np.ndarray:
        out = np.zeros(self.frame, dtype=np.float32)
        if self.paused:
            return out
        filled = 0
        while filled < self.frame and self._queue:
            audio = self._queue[0]
            n = min(len(audio), self.frame - filled)
            out[filled : filled + n] = audio[:n]
            if n == len(audio):
                self._queue.popleft()
            else:
                self._queue[0] = audio[n:]
            filled += n
        if filled:
            self.queued -= filled
            self._sent.append((time.monotonic(), filled))
        return out

    async def recv(self) -> AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        else:
            self._pts += self.frame
            await asyncio.sleep(max(0.0, self._start + self._pts / self.rate - time.monotonic()))
        samples = self._take()
        pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2")
        frame = AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = self.rate
        frame.pts = self._pts
        frame.time_base = fractions.Fraction(1, self.rate)
        return frame


class Microphone:
    """The person's audio track, decoded by aiortc, as 16 kHz mono for the session."""

    def __init__(self) -> None:
        self._chunks: list[np.ndarray] = []
        self._to_16k: Resampler | None = None  # this transport's edge: the decoded RTP to 16 kHz
        self._rate = 0
        self.last_audio = time.monotonic()  # when a frame last came (the connection's idle watch)
        self.listening = False  # a track is being read (one microphone a peer)

    async def run(self, track: MediaStreamTrack) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return  # the track ended: the peer is gone
            self._receive(frame)

    def _receive(self, frame: AudioFrame) -> None:
        channels = len(frame.layout.channels)
        x = frame.to_ndarray()
        scale = 1 / 32768 if x.dtype == np.int16 else 1.0  # aiortc's Opus decoder gives s16
        x = x.reshape(channels, -1).mean(axis=0) if frame.format.is_planar else x.reshape(-1, channels).mean(axis=1)
        x = (x * scale).astype(np.float32)
        if frame.sample_rate != self._rate:
            self._rate = frame.sample_rate
            self._to_16k = resampler(self._rate, ASR_RATE)
        if self._to_16k is not None:
            x = self._to_16k(x)
        self._chunks.append(x)
        self.last_audio = time.monotonic()

    def take(self) -> np.ndarray:
        out, self._chunks = self._chunks, []
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


class WebRTCDevice:
    """A WebRTC peer as the pipeline's device (``shell/device.py``): the microphone's RTP
    in, the reply track out, what was heard from the RTP timeline. Pause, resume and flush act
    on the track at once: the browser only ever holds its jitter buffer."""

    tick_s = BLOCK_S

    def __init__(self, track: ReplyTrack, microphone: Microphone) -> None:
        self.track = track
        self.microphone = microphone
        self.account = PlaybackAccount(track.rate, lead_s=3600.0, acks=True)  # the track's queue is the limit

    def capture(self) -> Captured:
        return Captured(self.microphone.take(), None)  # the browser cancelled the echo already

    def room(self) -> int:
        return max(0, round(QUEUE_S * self.track.rate) - self.track.queued)

    def play(self, audio: np.ndarray, response: int | None) -> None:
        if len(audio):
            self.account.sent_audio(audio, response, 0.0)
            self.track.push(audio)

    def played(self) -> list[Played]:
        heard = self.track.count_heard(time.monotonic())
        return self.account.report(max(heard, self.account.played), self.track.dropped)

    def pause(self) -> None:
        self.track.paused = True

    def resume(self) -> None:
        self.track.paused = False

    def flush(self) -> None:
        self.track.flush()
        self.track.paused = False


_END = object()


class _Abort:
    def __init__(self, link: DataChannelLink) -> None:
        self._link = link

    def abort(self) -> None:
        asyncio.get_running_loop().create_task(self._link.close(1006, "aborted"))


class DataChannelLink:
    """The data channel as the connection's message socket: what the server's ``Connection``
    uses of a WebSocket (iterate messages, send, close, its close code), so a WebRTC client
    runs the very same session code as a ``/ws`` one."""

    def __init__(self, peer: WebRTCPeer) -> None:
        self._peer = peer
        self._inbox: asyncio.Queue[Any] = asyncio.Queue()
        self._channel: Any = None
        self.opened = asyncio.Event()
        self.close_code: int | None = None
        self.transport = _Abort(self)

    def attach(self, channel: Any) -> None:
        if self._channel is not None:
            log.info("a second data channel %r: ignored", channel.label)
            return
        self._channel = channel
        channel.on("message", self._inbox.put_nowait)
        channel.on("close", lambda: self.ended(1001))
        if channel.readyState == "open":
            self.opened.set()
        else:
            channel.on("open", self.opened.set)

    def ended(self, code: int) -> None:
        """The peer is gone (its channel closed, its connection failed): the session ends."""
        if self.close_code is None:
            self.close_code = code
        self._inbox.put_nowait(_END)

    def __aiter__(self) -> DataChannelLink:
        return self

    async def __anext__(self) -> str | bytes:
        message = await self._inbox.get()
        if message is _END:
            self._inbox.put_nowait(_END)  # for any later reader
            raise StopAsyncIteration
        return message

    async def send(self, message: str | bytes) -> None:
        channel = self._channel
        if channel is not None and channel.readyState == "open" and self.close_code is None:
            channel.send(message)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.close_code is None:
            await self.send(json.dumps({"type": "close", "code": code, "reason": reason}))
            self.close_code = code
            await asyncio.sleep(0.05)  # the close message leaves before the connection goes
        self.ended(code)
        await self._peer.close()


class WebRTCPeer:
    """One WebRTC client: its peer connection, the reply track, its microphone and its data channel."""

    def __init__(self, output_rate: int, ice_servers: Iterable[str] = ()) -> None:
        config = RTCConfiguration(iceServers=[RTCIceServer(url) for url in ice_servers])  # none: no STUN lookups
        self.pc = RTCPeerConnection(config)
        self.track = ReplyTrack(output_rate)
        self.microphone = Microphone()
        self.link = DataChannelLink(self)
        self._tasks: list[asyncio.Task] = []
        self._closed = False

    async def answer(self, offer_sdp: str) -> str:
        """Take the client's offer; the SDP answer, with our ICE candidates in it."""
        pc = self.pc

        @pc.on("track")
        def _on_track(track: MediaStreamTrack) -> None:
            if track.kind == "audio" and not self.microphone.listening:
                self.microphone.listening = True
                self._tasks.append(asyncio.create_task(self.microphone.run(track), name="webrtc-mic"))

        @pc.on("datachannel")
        def _on_channel(channel: Any) -> None:
            self.link.attach(channel)

        @pc.on("connectionstatechange")
        def _on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                self.link.ended(1006 if pc.connectionState == "failed" else 1001)

        await pc.setRemoteDescription(RTCSessionDescription(offer_sdp, "offer"))
        pc.addTrack(self.track)
        await pc.setLocalDescription(await pc.createAnswer())  # gathers the candidates: no trickle
        self._tasks.append(asyncio.create_task(self._give_up_unopened(), name="webrtc-open"))
        return pc.localDescription.sdp

    async def _give_up_unopened(self) -> None:
        try:
            async with asyncio.timeout(CHANNEL_OPEN_S):
                await self.link.opened.wait()
        except TimeoutError:
            log.info("a WebRTC peer's data channel did not open in %g s: given up", CHANNEL_OPEN_S)
            self.link.ended(1006)

    def device(self) -> WebRTCDevice:
        return WebRTCDevice(self.track, self.microphone)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for task in self._tasks:
            task.cancel()
        self.track.stop()
        # A peer that vanished can leave aiortc's close waiting on its transports: not for ever.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await self.pc.close()
