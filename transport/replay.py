"""Replay: a recording as the microphone, a file as the speaker.

The recording is fed block by block on the session's clock. Each block, the
speaker side pulls the same duration of reply audio, which is the playback
clock: ``reply.wav`` holds the assistant's audio on the input's timeline
(sample 0 = the input's start). With ``settle=True`` (virtual time) the feed
waits for the engines after every block, so engine work takes no time on the
timeline; otherwise blocks are fed at the real pace. Same code either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import soxr

from transport.echo_path import EchoPath
from voice.core.audio import ASR_RATE
from voice.shell.session import Session

BLOCK_S = 0.02  # 20 ms: the output block a barge-in must stop within


@dataclass
class ReplayResult:
    reply: np.ndarray  # float32 at the session's output rate, on the input's timeline
    duration_s: float  # input plus the tail fed while the reply finished
    # How late blocks were fed after their due time (real time: the loop
    # falling behind; always 0 on virtual time).
    lateness_max_s: float = 0.0
    lateness_p99_s: float = 0.0


BlockSource = Callable[[int, Session], np.ndarray | None]


async def replay(
    session: Session, audio: np.ndarray, settle: bool, max_tail_s: float = 120.0, echo: EchoPath | None = None
) -> ReplayResult:
    """Feed ``audio`` (16 kHz mono) through ``session``; return the reply audio.

    ``settle=True`` is virtual time; the session should then be in lockstep.
    ``echo`` adds the assistant's output, through that simulated room, to the
    microphone: what the speaker plays during a block comes back in the same
    span of the next input block.
    """
    in_block = round(BLOCK_S * ASR_RATE)
    n_in_blocks = -(-len(audio) // in_block)
    silence = np.zeros(in_block, dtype=np.float32)

    def source(i: int, session: Session) -> np.ndarray | None:
        if i >= n_in_blocks:
            # The input is over: silence until the assistant has finished its reply.
            return None if session.idle else silence
        return audio[i * in_block : (i + 1) * in_block]

    return await feed(session, source, settle, n_in_blocks + round(max_tail_s / BLOCK_S), echo)


async def replay_turns(
    session: Session, utterances: list[np.ndarray], settle: bool, gap_s: float = 0.3, max_wait_s: float = 60.0
) -> ReplayResult:
    """A conversation: each utterance is said once the assistant has finished the previous reply.

    After each utterance the feed plays silence until the session is idle
    (the reply is over, or there was none), then ``gap_s`` more, then the next
    utterance: a person who waits for the answer before speaking again.
    """
    in_block = round(BLOCK_S * ASR_RATE)
    silence = np.zeros(in_block, dtype=np.float32)
    gap = max(1, round(gap_s / BLOCK_S))
    queue = list(utterances)
    state = {"audio": queue.pop(0) if queue else np.zeros(0, np.float32), "pos": 0, "quiet": 0, "waited": 0}
    min_wait = round(1.0 / BLOCK_S)  # the endpoint takes a hangover: idle right after speech means nothing yet

    def source(i: int, session: Session) -> np.ndarray | None:
        audio, pos = state["audio"], state["pos"]
        if pos < len(audio):
            state["pos"] = pos + in_block
            state["waited"] = 0
            return audio[pos : pos + in_block]
        state["waited"] += 1
        if state["waited"] > round(max_wait_s / BLOCK_S):
            raise TimeoutError(f"no end of the reply after {max_wait_s} s")
        if state["waited"] >= min_wait and session.idle:
            state["quiet"] += 1
            if state["quiet"] >= gap:
                if not queue:
                    return None
                state.update(audio=queue.pop(0), pos=0, quiet=0)
        return silence

    return await feed(session, source, settle, 10**9)


async def feed(
    session: Session, source: BlockSource, settle: bool, max_blocks: int, echo: EchoPath | None = None
) -> ReplayResult:
    """The block loop under every replay: ``source(i, session)`` gives input block ``i`` (None: stop)."""
    in_block = round(BLOCK_S * ASR_RATE)
    out_rate = session.output_rate
    out_block = round(BLOCK_S * out_rate)
    reply: list[np.ndarray] = []
    silence = np.zeros(in_block, dtype=np.float32)
    to_16k = soxr.ResampleStream(out_rate, ASR_RATE, 1, dtype="float32") if echo else None
    echo_buf = np.zeros(0, dtype=np.float32)  # echo still to reach the microphone
    lateness: list[float] = []
    clock = session.clock
    i = 0
    while i < max_blocks:
        block = source(i, session)
        if block is None:
            break
        # Block i is the audio of [i, i + 1) * BLOCK_S: it exists once its end is reached.
        due = (i + 1) * BLOCK_S
        await clock.sleep_until(due)
        lateness.append(clock.now() - due)
        if len(block) < in_block:
            block = np.concatenate([block, silence[: in_block - len(block)]])
        if echo is not None:
            now, echo_buf = echo_buf[:in_block], echo_buf[in_block:]
            block = block + np.pad(now, (0, in_block - len(now)))
        session.push_audio(block)
        played = session.pull_audio(out_block)
        reply.append(played)
        if echo is not None and to_16k is not None:
            echo_buf = np.concatenate([echo_buf, echo(to_16k.resample_chunk(played))])
        if settle:
            await session.settle()
        i += 1
    # The block pulled at the end of input block i starts playing then: one
    # block of silence leads the reply track.
    reply.insert(0, np.zeros(out_block, dtype=np.float32))
    late = np.asarray(lateness or [0.0])
    return ReplayResult(
        np.concatenate(reply), i * BLOCK_S, round(float(late.max()), 4), round(float(np.percentile(late, 99)), 4)
    )
