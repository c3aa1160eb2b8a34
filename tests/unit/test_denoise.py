"""RNNoise in the hearing (asr/denoise.py, shell/denoising.py): on the input's timeline, the streams' length kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from asr.denoise import RNNoiseDenoiser
from shell.denoising import Denoising
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


def test_one_that_takes_over_mid_stream_runs_20_ms_late_and_finish_keeps_the_length():
    speech = load_audio(FIXTURES / "cmu_arctic_us_aew_a0003.wav")
    d = RNNoiseDenoiser(aligned=False)
    out = _through(d, speech)
    assert _best_lag(speech, out) == 320
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
