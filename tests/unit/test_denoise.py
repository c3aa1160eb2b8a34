"""RNNoise in the hearing (asr/denoise.py, shell/denoising.py): on the input's timeline, the streams' length kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from stand_in_engines import StandInEngines, StandInLLM, StandInRecognizer

from asr.denoise import RNNoiseDenoiser
from core.audio import ASR_BLOCK, ASR_RATE
from shell.clock import VirtualClock
from shell.config import SessionConfig
from shell.denoising import Denoising
from shell.session import Session
from transport.files import load_audio

FIXTURES = Path(__file__).parent.parent / "fixtures"


def _through(d: RNNoiseDenoiser, audio: np.ndarray, block: int = 320) -> np.ndarray:
    return np.concatenate([d.process(audio[i : i + block]) for i in range(0, len(audio), block)])


def _best_lag(x: np.ndarray, y: np.ndarray) -> int:
    n = min(len(x), len(y)) - 400
    scores = [float(np.dot(x[:n], y[lag : lag + n])) for lag in range(0, 400)]
    return int(np.argmax(scores))


def test_the_cleaned_speech_is_on_the_input_s_timeline():
    speech = load_audio(FIXTURES / "cmu_arctic_us_aew_a0003.wav")
    out = _through(RNNoiseDenoiser(), speech)
    assert _best_lag(speech, out) == 0
    assert len(speech) - 1200 < len(out) <= len(speech)  # only the filters' last samples still inside


def test_one_that_takes_over_mid_stream_runs_22_ms_late_and_finish_keeps_the_length():
    speech = load_audio(FIXTURES / "cmu_arctic_us_aew_a0003.wav")
    d = RNNoiseDenoiser(aligned=False)
    out = _through(d, speech)
    assert _best_lag(speech, out) == 352  # RNNoise's two frames, and the filters' 1 ms each way
    assert len(out) + len(d.finish()) == len(speech)


def test_kitchen_noise_alone_is_taken_down():
    noise = load_audio(FIXTURES / "noise_dishes_12s.wav")
    out = _through(RNNoiseDenoiser(), noise)
    before, after = (10 * np.log10(np.mean(a[16000:].astype(np.float64) ** 2)) for a in (noise, out))
    assert after < before - 10


def test_the_views_cleaned_follow_the_echo_canceller_and_the_asr_choice():
    assert not Denoising("off", for_asr=True, echo_cancel=True).on
    with_aec = Denoising("rnnoise", for_asr=False, echo_cancel=True)
    assert set(with_aec._views) == {"vad", "raw"}
    assert set(Denoising("rnnoise", for_asr=True, echo_cancel=True)._views) == {"vad", "raw", "asr"}
    assert set(Denoising("rnnoise", for_asr=True, echo_cancel=False)._views) == {"vad"}
    block = np.ones(320, dtype=np.float32)
    assert with_aec.clean("asr", block) is block  # not a view it cleans
    tails = with_aec.set("off")
    assert set(tails) == {"vad", "raw"} and not with_aec.on


@pytest.mark.parametrize("echo_cancel", [False, True])
async def test_a_session_switched_on_and_off_mid_stream_keeps_every_stream_s_length(echo_cancel):
    """Realtime's session.update may turn suppression on and off mid-session: the VAD's frames
    and the ASR's audio stay on the microphone's timeline (what a stopped suppressor held back
    goes in as silence)."""
    engines = StandInEngines(StandInRecognizer({}), StandInLLM([]))
    config = SessionConfig(echo_cancel=echo_cancel, end_of_turn=None, denoise="off", denoise_asr=True)
    session = Session(engines, VirtualClock(), config, lockstep=True)
    noise = load_audio(FIXTURES / "noise_dishes_12s.wav")
    blocks = [noise[i : i + ASR_BLOCK] for i in range(0, 3 * ASR_RATE, ASR_BLOCK)]
    for i, block in enumerate(blocks):
        if i == 50:
            session.set_denoise("rnnoise")
            assert session._listening.denoising.on
        if i == 100:
            session.set_denoise("off")
        session.push_audio(block)
    pushed = 3 * ASR_RATE
    hearing, heard = session._listening.hearing, session._listening.audio
    assert heard.audio.end == pushed
    assert pushed - 512 < hearing.frames * 512 <= pushed
    await session.aclose()
