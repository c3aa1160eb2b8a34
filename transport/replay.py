"""Replay: a recording as the microphone, a file as the speaker.

The recording is fed block by block on the session's clock. Each block, the
speaker side pulls the same duration of reply audio, which is the playback
clock: ``reply.wav`` holds the assistant's audio on the input's timeline
(sample 0 = the input's start). With ``settle=True`` (virtual time) the feed
waits for the engines after every block, so engine work takes no time on the
timeline; otherwise blocks are fed at the real pace. Same code either way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import soxr

from transport.echo_path import EchoPath
from voice.audio import ASR_RATE
from voice.session import Session

BLOCK_S = 0.02  # 20 ms: the output block a barge-in must stop within


@dataclass
class ReplayResult:
    reply: np.ndarray  # float32 at the session's output rate, on the input's timeline
    duration_s: float  # input plus the tail fed while the reply finished


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
    out_rate = session.output_rate
    out_block = round(BLOCK_S * out_rate)
    n_in_blocks = -(-len(audio) // in_block)
    max_blocks = n_in_blocks + round(max_tail_s / BLOCK_S)
    reply: list[np.ndarray] = []
    silence = np.zeros(in_block, dtype=np.float32)
    to_16k = soxr.ResampleStream(out_rate, ASR_RATE, 1, dtype="float32") if echo else None
    echo_buf = np.zeros(0, dtype=np.float32)  # echo still to reach the microphone
    i = 0
    while i < max_blocks:
        if i >= n_in_blocks and session.idle:
            break  # the input is over and the assistant has finished its reply
        # Block i is the audio of [i, i + 1) * BLOCK_S: it exists once its end is reached.
        await session.clock.sleep_until((i + 1) * BLOCK_S)
        block = audio[i * in_block : (i + 1) * in_block] if i < n_in_blocks else silence
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
    out = np.concatenate(reply)
    return ReplayResult(out, i * BLOCK_S)
