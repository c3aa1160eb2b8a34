"""A client of our protocol (``/ws``) that talks from a recording.

``python -m transport.client question.wav [--url ws://127.0.0.1:8765/ws]``
streams the recording as the microphone, in real time, to a running server
(``python -m voice.run --serve``), plays the reply into a file as a speaker
would (in real time, honouring pause, resume and stop, reporting what it
played), prints the conversation and writes ``reply.wav`` and
``events.jsonl``. The tests use it as the reference client; it is also the
shortest example of the protocol in code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.client import connect

from core.audio import ASR_RATE
from transport.protocol import float_to_pcm16, pcm16_to_float

FRAME_S = 0.02


@dataclass
class ClientResult:
    events: list[dict[str, Any]] = field(default_factory=list)
    reply: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))  # on the input's timeline
    output_rate: int = 24000
    played: int = 0
    dropped: int = 0
    played_at_pause: int | None = None  # the speaker's position when the first pause arrived
    played_at_stop: int | None = None  # ... and when the first stop arrived
    session: str = ""
    close_code: int | None = None
    interrupted_at_s: float | None = None  # when the interruption started, on the input's timeline
    history: list[dict[str, Any]] = field(default_factory=list)  # the conversation so far, when resumed

    def playback_start_s(self, threshold: float = 1e-4) -> float | None:
        """When the speaker first played reply audio, on the input's timeline."""
        loud = np.flatnonzero(np.abs(self.reply) > threshold)
        return float(loud[0]) / self.output_rate if len(loud) else None

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]

    @property
    def user_text(self) -> str:
        return " ".join(e["text"] for e in self.of("transcript_final") if e["text"])


class Speaker:
    """A speaker that plays what it is sent in real time, one block per tick."""

    def __init__(self) -> None:
        self.buffer = np.zeros(0, dtype=np.float32)
        self.paused = False
        self.played = 0
        self.dropped = 0
        self.out: list[np.ndarray] = []

    def feed(self, audio: np.ndarray) -> None:
        self.buffer = np.concatenate([self.buffer, audio])

    def tick(self, n: int) -> None:
        if self.paused:
            self.out.append(np.zeros(n, dtype=np.float32))
            return
        block, self.buffer = self.buffer[:n], self.buffer[n:]
        self.played += len(block)
        self.out.append(np.pad(block, (0, n - len(block))))

    def flush(self) -> None:
        self.dropped += len(self.buffer)
        self.buffer = self.buffer[:0]


async def talk(
    url: str,
    audio: np.ndarray,
    rate: int = ASR_RATE,
    acks: bool = True,
    honour_pause: bool = True,
    max_tail_s: float = 60.0,
    quiet_s: float = 1.5,
    headers: dict[str, str] | None = None,
    interrupt: tuple[np.ndarray, float] | None = None,
    resume: str | None = None,
    language: str | None = None,
    denoise: str | None = None,
) -> ClientResult:
    """Say ``audio`` (mono float32 at ``rate``) to the server at ``url`` and listen to the answer.

    After the recording the client sends silence until no reply is in flight,
    every utterance the server ended has its final transcript, and nothing has
    happened for ``quiet_s`` (or ``max_tail_s`` passed).
    ``interrupt=(speech, after_s)``: once the speaker has played ``after_s`` of
    the first reply, say ``speech`` over it (a barge-in). ``honour_pause=False``
    is a client that ignores pause and stop, and plays everything it is sent.
    """
    result = ClientResult()
    speaker = Speaker()
    frame = round(FRAME_S * rate)
    async with connect(url, additional_headers=headers or {}, max_size=None, compression=None) as ws:
        hello: dict[str, Any] = {"type": "hello", "sample_rate": rate, "acks": acks}
        if resume is not None:
            hello["session"] = resume
        if language is not None:
            hello["language"] = language
        if denoise is not None:
            hello["denoise"] = denoise
        await ws.send(json.dumps(hello))
        while (ready := json.loads(await ws.recv())).get("type") == "error":
            result.events.append(ready)  # unknown_session etc.: said, and a new conversation started
        if ready.get("type") != "ready":
            raise RuntimeError(f"no 'ready': {ready}")
        result.history = ready.get("history", [])
        result.session, result.output_rate = ready["session"], ready["output_sample_rate"]
        out_frame = round(FRAME_S * result.output_rate)
        # "heard": utterances whose endpoint came and whose final transcript has not:
        # a cold or busy server may take seconds over it, with no event between.
        state = {"open": 0, "speaking": False, "heard": 0, "last_event": time.monotonic(), "reported": (0, 0)}

        async def receive() -> None:
            async for message in ws:
                if isinstance(message, bytes):
                    speaker.feed(pcm16_to_float(message))
                    continue
                event = json.loads(message)
                event["client_t"] = round(time.monotonic() - t0, 4)  # when it arrived, on the input's timeline
                result.events.append(event)
                state["last_event"] = time.monotonic()
                kind = event["type"]
                if kind in ("speech_start", "speech_end"):
                    state["speaking"] = kind == "speech_start"
                    state["heard"] += kind == "speech_end"
                elif kind == "transcript_final":
                    state["heard"] = max(0, state["heard"] - 1)
                elif kind == "response_start":
                    state["open"] += 1
                elif kind == "turn_end":
                    state["open"] -= 1
                elif kind == "playback_paused":
                    if result.played_at_pause is None:
                        result.played_at_pause = speaker.played
                    speaker.paused = honour_pause
                elif kind == "playback_resumed":
                    speaker.paused = False
                elif kind == "playback_stopped":
                    if result.played_at_stop is None:
                        result.played_at_stop = speaker.played
                    speaker.paused = False
                    if honour_pause:
                        speaker.flush()
                        await report()

        async def report() -> None:
            now = (speaker.played, speaker.dropped)
            if acks and now != state["reported"]:
                state["reported"] = now
                await ws.send(json.dumps({"type": "played", "samples": now[0], "dropped": now[1]}))

        t0 = time.monotonic()
        receiver = asyncio.create_task(receive())
        silence = np.zeros(frame, dtype=np.float32)
        pending = interrupt
        current, pos, tail, i = audio, 0, 0, 0
        try:
            while True:
                if pending is not None and pos >= len(current) and speaker.played >= pending[1] * result.output_rate:
                    current, pos, tail, pending = pending[0], 0, 0, None  # speak over the reply now
                    result.interrupted_at_s = i * FRAME_S
                if pos < len(current):
                    block, pos = current[pos : pos + frame], pos + frame
                else:
                    tail += 1
                    quiet = time.monotonic() - state["last_event"]
                    done = (
                        pending is None
                        and state["open"] <= 0
                        and not state["speaking"]
                        and not state["heard"]
                        and min(quiet, tail * FRAME_S) >= quiet_s
                        and not len(speaker.buffer)
                    )
                    if tail * FRAME_S > max_tail_s or done:
                        break
                    block = silence
                await ws.send(float_to_pcm16(block))
                speaker.tick(out_frame)
                if i % 2:
                    await report()
                i += 1
                await asyncio.sleep(max(0.0, t0 + i * FRAME_S - time.monotonic()))
                if receiver.done():
                    break
            await report()
        finally:
            receiver.cancel()
            await asyncio.gather(receiver, return_exceptions=True)
        result.close_code = ws.close_code
    result.reply = np.concatenate(speaker.out) if speaker.out else result.reply
    result.played, result.dropped = speaker.played, speaker.dropped
    return result


def main(argv: list[str] | None = None) -> int:
    from transport.files import AudioInputError, load_audio, write_wav

    p = argparse.ArgumentParser(prog="python -m transport.client", description=__doc__.split("\n\n")[0])
    p.add_argument("audio", type=Path, help="recording to say")
    p.add_argument("--url", default="ws://127.0.0.1:8765/ws")
    p.add_argument("--token", help="the server's token, if it has one")
    p.add_argument("--out", type=Path, default=Path("out-client"))
    p.add_argument("--session", help="go on with this stored conversation (the id 'ready' gave)")
    args = p.parse_args(argv)
    try:
        audio = load_audio(args.audio)
    except AudioInputError as e:
        print(f"transport.client: {e}", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    try:
        result = asyncio.run(talk(args.url, audio, headers=headers, resume=args.session))
    except OSError as e:
        print(f"transport.client: cannot reach {args.url}: {e}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    write_wav(args.out / "reply.wav", result.reply, result.output_rate)
    with open(args.out / "events.jsonl", "w") as f:
        for e in result.events:
            f.write(json.dumps(e) + "\n")
    for turn in result.history:
        print(f"  (before) {turn['role']:>9}: {turn['text']}")
    for e in result.events:
        if e["type"] == "transcript_final" and e["text"]:
            print(f"[{e['t']:7.2f}] you:       {e['text']}")
        elif e["type"] == "assistant_text":
            print(f"[{e['t']:7.2f}] assistant: {e['text']}")
        elif e["type"] == "truncate":
            print(f"[{e['t']:7.2f}] -- cut; heard: {e['text']!r}")
        elif e["type"] == "error":
            print(f"[{e.get('t', 0):7.2f}] error {e['code']}: {e['message']}")
    print(f"played {result.played / result.output_rate:.2f} s of reply; wrote {args.out}/reply.wav, events.jsonl")
    print(f"session {result.session} (go on with --session {result.session})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
