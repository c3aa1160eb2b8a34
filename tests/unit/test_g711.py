"""G.711 through libsndfile: the ITU-T tables byte for byte (Python's own audioop, deprecated but
still in 3.11, is the reference), and a round trip within the law's quantization."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from transport import g711


def speechlike(seconds: float = 0.5) -> np.ndarray:
    t = np.arange(round(seconds * g711.G711_RATE)) / g711.G711_RATE
    rng = np.random.default_rng(0)
    return (0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 3 * t) + 0.01 * rng.standard_normal(len(t))).astype(
        np.float32
    )


@pytest.mark.parametrize("law", ["ulaw", "alaw"])
def test_the_codes_are_the_itu_tables(law):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = pytest.importorskip("audioop")
    codes = bytes(range(256))
    linear = audioop.ulaw2lin(codes, 2) if law == "ulaw" else audioop.alaw2lin(codes, 2)
    assert np.array_equal(g711.decode(codes, law) * 32768, np.frombuffer(linear, "<i2"))  # every code, exactly
    pcm = np.arange(-32768, 32768, dtype=np.int16)  # every 16-bit value
    ours = np.frombuffer(g711.encode(pcm / 32768.0, law), np.uint8)
    ref = np.frombuffer((audioop.lin2ulaw if law == "ulaw" else audioop.lin2alaw)(pcm.tobytes(), 2), np.uint8)
    differ = np.flatnonzero(ours != ref)
    assert len(differ) <= 400  # only at the border of two steps: a neighbouring code, one step apart
    step = np.abs(g711.decode(ours[differ].tobytes(), law) - g711.decode(ref[differ].tobytes(), law)) * 32768
    nearest = np.minimum(
        np.abs(g711.decode(ours[differ].tobytes(), law) * 32768 - pcm[differ]),
        np.abs(g711.decode(ref[differ].tobytes(), law) * 32768 - pcm[differ]),
    )
    assert np.all(step <= 1024) and np.all(nearest <= step)


@pytest.mark.parametrize("law", ["ulaw", "alaw"])
def test_a_round_trip_keeps_speech_within_the_quantization(law):
    x = speechlike()
    y = g711.decode(g711.encode(x, law), law)
    assert y.dtype == np.float32 and len(y) == len(x)
    snr = 10 * np.log10(np.sum(x**2) / np.sum((x - y) ** 2))
    assert snr > 30, snr  # G.711 gives ~38 dB on speech


def test_one_byte_per_sample_clipped_and_empty():
    assert len(g711.encode(np.zeros(160, np.float32))) == 160
    loud = g711.decode(g711.encode(np.array([2.0, -2.0], np.float32)))
    assert loud[0] > 0.95 and loud[1] < -0.95
    assert g711.encode(np.zeros(0, np.float32)) == b"" and len(g711.decode(b"")) == 0
