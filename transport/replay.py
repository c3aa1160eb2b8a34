"""Replay: a recording as the microphone, a file as the speaker.

:class:`ReplayDevice` is the device (``shell/device.py``) that the pump
drives: each 20 ms tick it gives the next block of the recording and its
speaker plays one block of reply audio (silence where there is none), which
is the playback clock. ``reply.wav`` holds the assistant's audio on the
input's timeline (sample 0 = the input's start). With ``settle=True``
(virtual time) the pump waits for the engines after every block, so engine
work takes no time on the timeline; otherwise blocks are fed at the real
pace. Same code either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from core.audio import ASR_BLOCK, ASR_RATE, BLOCK_S
from shell.device import Captured, Played, UncontrolledSpeaker
from shell.pump import Pump
from shell.recording import Recording, RecordingDevice
from shell.session import Session
from transport.echo_path import EchoPath
from transport.resample import Resampler


@dataclass
class ReplayResult:
    reply: np.ndarray  # float32 at the session's output rate, on the input's timeline
    duration_s: float  # input plus the tail fed while the reply finished
    # How late blocks were fed after their due time (real time: the loop
    # falling behind; always 0 on virtual time).
    lateness_max_s: float = 0.0
    lateness_p99_s: float = 0.0
    recording: Recording | None = None  # with record=True: the person and the assistant as heard, in stereo


BlockSource = Callable[[int], np.ndarray | None]  # input block i (None: the input is over)


class ReplayDevice(UncontrolledSpeaker):  # its speaker plays each block as it is given
    """A recording as the microphone, a track as the speaker.

    The speaker takes one 20 ms block a tick and plays it at once: what it is
    given counts as played when given, and the block pulled at the end of
    input block ``i`` fills ``[i + 1, i + 2)`` of the reply track. ``echo``
    adds the speaker's output, through that simulated room, to the
    microphone: what is played during a block comes back in the same span of
    the next input block.
    """

    tick_s = BLOCK_S

    def __init__(self, source: BlockSource, output_rate: int, echo: EchoPath | None = None) -> None:
        self.source = source
        self.output_rate = output_rate
        self.out_block = round(BLOCK_S * output_rate)
        self.blocks = 0  # input blocks given
        self._track: list[np.ndarray] = [np.zeros(self.out_block, dtype=np.float32)]  # one block leads the reply
        self._played: list[Played] = []
        self._to_16k = Resampler(output_rate, ASR_RATE)
        self._far = np.zeros(0, dtype=np.float32)  # the speaker's output at 16 kHz, not yet given
        self._echo = echo
        self._echo_buf = np.zeros(0, dtype=np.float32)  # echo still to reach the microphone

    @property
    def reply(self) -> np.ndarray:
        return np.concatenate(self._track)

    def capture(self) -> Captured | None:
        block = self.source(self.blocks)
        if block is None:
            return None
        self.blocks += 1
        if len(block) < ASR_BLOCK:
            block = np.pad(block, (0, ASR_BLOCK - len(block)))
        if self._echo is not None:
            now, self._echo_buf = self._echo_buf[:ASR_BLOCK], self._echo_buf[ASR_BLOCK:]
            block = block + np.pad(now, (0, ASR_BLOCK - len(now)))
        far, self._far = self._far, np.zeros(0, dtype=np.float32)
        return Captured(block, far)

    def room(self) -> int:
        return self.out_block

    def play(self, audio: np.ndarray, response: int | None) -> None:
        block = np.zeros(self.out_block, dtype=np.float32)
        block[: len(audio)] = audio
        self._track.append(block)
        if len(audio):
            self._played.append(Played(response, len(audio)))
        far = self._to_16k(block)
        self._far = np.concatenate([self._far, far])
        if self._echo is not None:
            self._echo_buf = np.concatenate([self._echo_buf, self._echo(far)])

    def played(self) -> list[Played]:
        out, self._played = self._played, []
        return out


async def _run(
    session: Session, device: ReplayDevice, settle: bool, max_blocks: int, record: bool = False
) -> ReplayResult:
    recorded = RecordingDevice(device, device.output_rate) if record else None
    stats = await Pump(session, recorded or device, settle).run(max_ticks=max_blocks)
    return ReplayResult(
        device.reply,
        device.blocks * BLOCK_S,
        stats.lateness_max_s,
        stats.lateness_p99_s,
        recorded.recording if recorded is not None else None,
    )


async def replay(
    session: Session,
    audio: np.ndarray,
    settle: bool,
    max_tail_s: float = 120.0,
    echo: EchoPath | None = None,
    record: bool = False,
) -> ReplayResult:
    """Feed ``audio`` (16 kHz mono) through ``session``; return the reply audio.

    ``settle=True`` is virtual time; the session should then be in lockstep.
    After the input, silence until the assistant has finished its reply (at
    most ``max_tail_s``). ``record``: keep the conversation in stereo too (``ReplayResult.recording``).
    """
    n_in_blocks = -(-len(audio) // ASR_BLOCK)
    silence = np.zeros(ASR_BLOCK, dtype=np.float32)

    def source(i: int) -> np.ndarray | None:
        if i >= n_in_blocks:
            return None if session.idle else silence
        return audio[i * ASR_BLOCK : (i + 1) * ASR_BLOCK]

    device = ReplayDevice(source, session.output_rate, echo)
    return await _run(session, device, settle, n_in_blocks + round(max_tail_s / BLOCK_S), record)


async def replay_turns(
    session: Session, utterances: list[np.ndarray], settle: bool, gap_s: float = 0.3, max_wait_s: float = 60.0
) -> ReplayResult:
    """A conversation: each utterance is said once the assistant has finished the previous reply.

    After each utterance the feed plays silence until the session is idle
    (the reply is over, or there was none), then ``gap_s`` more, then the next
    utterance: a person who waits for the answer before speaking again.
    """
    silence = np.zeros(ASR_BLOCK, dtype=np.float32)
    gap = max(1, round(gap_s / BLOCK_S))
    queue = list(utterances)
    state = {"audio": queue.pop(0) if queue else np.zeros(0, np.float32), "pos": 0, "quiet": 0, "waited": 0}
    min_wait = round(1.0 / BLOCK_S)  # the endpoint takes a hangover: idle right after speech means nothing yet

    def source(i: int) -> np.ndarray | None:
        audio, pos = state["audio"], state["pos"]
        if pos < len(audio):
            state["pos"] = pos + ASR_BLOCK
            state["waited"] = 0
            return audio[pos : pos + ASR_BLOCK]
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

    return await _run(session, ReplayDevice(source, session.output_rate), settle, 10**9)
