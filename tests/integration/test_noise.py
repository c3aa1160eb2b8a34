"""Noise on the real engines (issue 35): a client that asks for suppression gets it, and is heard in babble.

The behaviour in noise and beside a TV is in the example scenarios (scenarios/babble.yaml, tap.yaml,
tv.yaml, cough.yaml, run by test_scenarios.py); the figures are python -m voice.bench noise.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.conftest import FIXTURES
from transport.client import talk
from transport.files import load_audio

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="session")]


def in_babble(speech: np.ndarray, snr_db: float) -> np.ndarray:
    babble = load_audio(FIXTURES / "noise" / "babble_six_talkers.wav")
    audio = np.concatenate([np.zeros(8000, np.float32), speech, np.zeros(8000, np.float32)])
    room = np.resize(babble, len(audio))
    power = np.mean(speech.astype(np.float64) ** 2) / np.mean(room.astype(np.float64) ** 2)
    gain = np.sqrt(power) / 10 ** (snr_db / 20)
    return (audio + gain * room).astype(np.float32)


async def test_a_client_that_asks_for_noise_suppression_gets_it_and_is_heard_in_babble(voice_server):
    """Our protocol, real time: ``hello`` with ``"denoise": "rnnoise"``; the session cleans what it
    hears (the server's default is off) and the question, 10 dB over six people talking, is heard."""
    seen: list[bool] = []

    async def watch() -> None:
        while True:
            seen.extend(c.session._listening.denoising.on for c in voice_server.connections.values() if c.session)
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    audio = in_babble(load_audio(FIXTURES / "cmu_arctic_us_aew_a0003.wav"), 10.0)
    try:
        result = await talk(voice_server.ws_url, audio, denoise="rnnoise")
    finally:
        watcher.cancel()
    assert seen and all(seen)
    heard = " ".join(e["text"] for e in result.of("transcript_final")).lower()
    assert "two men shook hands" in heard, heard
    assert result.of("response_start")
