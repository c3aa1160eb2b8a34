"""The sequential baseline: the same engines, one stage after the other.

What a voice pipeline does without streaming: wait for the endpoint, run the
ASR on the whole utterance, wait for the LLM's whole reply, synthesize all of
it, then play. :func:`sequential_turns` runs exactly that on a recording with
the engines of a real session (the same VAD and endpointing, the same Whisper,
vLLM engine and piper voice), so ``python -m voice.bench pipeline`` can compare the streaming
pipeline with it turn by turn, in the same run.

Times are wall-clock seconds for the engine stages; the endpoint delay is the
endpointer's decision time on the recording's timeline, the same as the
streaming pipeline's.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from asr.vad import FRAME, SileroVAD
from core.audio import ASR_RATE
from core.endpointing import EndpointConfig, Endpointer, SpeechEnd, SpeechStart
from core.history import History, Turn
from core.sentences import speakable
from shell.engines import Engines


@dataclass
class SequentialTurn:
    user_text: str
    speech_end: float  # timeline seconds
    endpoint_s: float  # speech end -> endpoint decision
    asr_final_s: float  # whole-utterance ASR
    llm_first_token_s: float | None  # (for reference: nothing is spoken before the whole reply)
    llm_s: float  # request -> whole reply
    tts_s: float  # whole reply synthesized
    voice_to_voice_s: float  # speech end -> first reply sample (after all of the above)
    reply_text: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def utterances(engines: Engines, audio: np.ndarray, config: EndpointConfig) -> list[tuple[float, float, float]]:
    """(onset, end, endpoint time) of each utterance, by the session's own VAD and endpointer."""
    vad = SileroVAD(engines.vad_session)
    endpointer = Endpointer(config, FRAME / ASR_RATE)
    found: list[tuple[float, float, float]] = []
    onset = 0.0
    padded = np.concatenate([audio, np.zeros(round((config.hangover_s + 0.1) * ASR_RATE), np.float32)])
    for k in range(len(padded) // FRAME):
        edge = endpointer.push(vad(padded[k * FRAME : (k + 1) * FRAME]), k * FRAME / ASR_RATE)
        if isinstance(edge, SpeechStart):
            onset = edge.onset
        elif isinstance(edge, SpeechEnd):
            found.append((onset, edge.end, edge.t))
    return found


async def sequential_turns(
    engines: Engines,
    audio: np.ndarray,
    system_prompt: str,
    endpoint: EndpointConfig | None = None,
    final_tail_s: float = 0.1,
) -> list[SequentialTurn]:
    """Answer each utterance of ``audio`` stage after stage; the conversation carries over."""
    endpoint = endpoint or EndpointConfig()
    loop = asyncio.get_running_loop()
    history = History()
    turns: list[SequentialTurn] = []
    for i, (onset, end, decided) in enumerate(utterances(engines, audio, endpoint)):
        clip = audio[max(0, round((onset - endpoint.preroll_s) * ASR_RATE)) : round((end + final_tail_s) * ASR_RATE)]
        t0 = time.perf_counter()
        text = await loop.run_in_executor(engines.final_executor, engines.asr_final.transcribe, clip)
        t_asr = time.perf_counter()
        if not text:
            continue
        history.add(Turn("user", text, t_start=onset, t_end=end))
        reply, first = "", None
        stream = engines.llm.stream(history.messages(system_prompt), f"sequential-{id(history):x}-{i}")
        try:
            async for delta in stream:
                if first is None:
                    first = time.perf_counter()
                reply += delta
        finally:
            await stream.aclose()
        t_llm = time.perf_counter()
        spoken = speakable(reply)
        pieces = await loop.run_in_executor(
            engines.tts_executor, lambda s=spoken: list(engines.tts.synthesize(s, threading.Event()))
        )
        t_tts = time.perf_counter()
        if pieces:
            history.add(Turn("assistant", spoken, t_start=None, t_end=None, generated_text=reply))
        turns.append(
            SequentialTurn(
                user_text=text,
                speech_end=end,
                endpoint_s=round(decided - end, 3),
                asr_final_s=round(t_asr - t0, 3),
                llm_first_token_s=None if first is None else round(first - t_asr, 3),
                llm_s=round(t_llm - t_asr, 3),
                tts_s=round(t_tts - t_llm, 3),
                voice_to_voice_s=round(decided - end + t_tts - t0, 3),
                reply_text=spoken,
            )
        )
    return turns
