"""Noise suppression: RNNoise on the microphone's 16 kHz audio, after the echo canceller.

RNNoise (Xiph; a small recurrent network with its model compiled into the library) works on
48 kHz frames of 10 ms. The library comes in the ``pyrnnoise`` wheel (``librnnoise.so``); it is
called here through ctypes, as the wheel's Python side pulls in an audio-file stack we do not
need. The 16 kHz stream is taken to 48 kHz and back by short linear-phase filters (1 ms each
way: soxr's good ones held back 52 ms, and every ms here delays the endpoint), and the output is
kept on the input's timeline: RNNoise's delay (two frames, measured) and the filters' are
withheld from its start, so sample ``n`` out is sample ``n`` in, cleaned. The output runs
behind the input by that delay, 22 ms, and up to a frame more.
"""

from __future__ import annotations

import ctypes
import importlib.util
from pathlib import Path

import numpy as np

from core.audio import ASR_RATE

RNNOISE_RATE = 48000
_lib: ctypes.CDLL | None = None


def _rnnoise() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        spec = importlib.util.find_spec("pyrnnoise")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("RNNoise is not installed (the pyrnnoise wheel); run scripts/setup")
        path = Path(next(iter(spec.submodule_search_locations))) / "librnnoise.so"
        lib = ctypes.CDLL(str(path))
        lib.rnnoise_create.argtypes = [ctypes.c_void_p]
        lib.rnnoise_create.restype = ctypes.c_void_p
        lib.rnnoise_destroy.argtypes = [ctypes.c_void_p]
        lib.rnnoise_get_frame_size.restype = ctypes.c_int
        lib.rnnoise_process_frame.argtypes = [
            ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float)
        ]  # fmt: skip
        lib.rnnoise_process_frame.restype = ctypes.c_float
        _lib = lib
    return _lib


class RNNoiseDenoiser:
    """One stream's noise suppressor: 16 kHz float32 in, the same timeline out, cleaned."""

    def __init__(self, aligned: bool = True) -> None:
        """``aligned``: withhold RNNoise's delay from the output's start, so that it is on the
        input's timeline (a stream that starts here); else the output is the input 20 ms late,
        and exactly as long (one that takes over a stream mid-way)."""
        self._lib = _rnnoise()
        self._frame = self._lib.rnnoise_get_frame_size()  # 480: 10 ms at 48 kHz
        self._state = self._lib.rnnoise_create(None)
        self._up = _Filter(_TAPS * _FACTOR)  # the zero-stuffed stream's images out, its level kept
        self._down = _Filter(_TAPS)  # what 16 kHz cannot hold out, before every third sample is kept
        self._pending = np.zeros(0, dtype=np.float32)  # 48 kHz samples short of a whole frame
        self._buf = np.zeros(self._frame, dtype=np.float32)
        self._ptr = self._buf.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        self._withhold = _DELAY if aligned else 0  # RNNoise's delay, still to drop from the output's start
        self.speech_probability = 0.0  # RNNoise's own voice activity, of the last frame
        self._fed = self._out = 0  # samples in and out

    def process(self, audio: np.ndarray) -> np.ndarray:
        """The next 16 kHz samples of the stream, cleaned; what comes out is the stream so far,
        aligned with the input's start (it runs behind the input by the filters' delay)."""
        self._fed += len(audio)
        stuffed = np.zeros(len(audio) * _FACTOR, dtype=np.float32)
        stuffed[::_FACTOR] = audio
        up = self._up(stuffed)
        data = np.concatenate([self._pending, up]) if len(self._pending) else up
        n = len(data) // self._frame
        out = np.empty(n * self._frame, dtype=np.float32)
        for i in range(n):
            # RNNoise works on 16-bit sample values held as floats.
            self._buf[:] = data[i * self._frame : (i + 1) * self._frame] * 32768.0
            self.speech_probability = float(self._lib.rnnoise_process_frame(self._state, self._ptr, self._ptr))
            out[i * self._frame : (i + 1) * self._frame] = self._buf
        self._pending = data[n * self._frame :].copy()
        down = self._down(out / 32768.0)[::_FACTOR]  # whole frames: the third samples stay in phase
        if self._withhold:
            drop = min(self._withhold, len(down))
            down, self._withhold = down[drop:], self._withhold - drop
        self._out += len(down)
        return down.astype(np.float32, copy=False)

    def finish(self) -> np.ndarray:
        """Silence for what is still inside the filters, so that the stream keeps its length when
        another takes it over (its last few ms are not worth a flush's ringing); then closed."""
        self.close()
        return np.zeros(self._fed - self._out, dtype=np.float32)

    def close(self) -> None:
        if self._state:
            self._lib.rnnoise_destroy(self._state)
            self._state = None

    def __del__(self) -> None:
        self.close()


class _Filter:
    """A streaming FIR filter (float32), its state carried from one call to the next."""

    def __init__(self, taps: np.ndarray) -> None:
        self._taps = taps
        self._state = np.zeros(len(taps) - 1, dtype=np.float32)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if not len(x):
            return np.zeros(0, dtype=np.float32)
        buf = np.concatenate([self._state, x.astype(np.float32, copy=False)])
        self._state = buf[len(buf) - len(self._state) :]
        return np.convolve(buf, self._taps, mode="valid").astype(np.float32)


def _low_pass(n: int, cutoff_hz: float, rate: int) -> np.ndarray:
    """A linear-phase low-pass of ``n`` taps (odd): a Blackman-windowed sinc, unity gain at 0 Hz."""
    t = np.arange(n) - (n - 1) / 2
    taps = np.sinc(2 * cutoff_hz / rate * t) * np.blackman(n)
    return (taps / taps.sum()).astype(np.float32)


_FACTOR = RNNOISE_RATE // ASR_RATE
_TAPS = _low_pass(97, 7000.0, RNNOISE_RATE)  # 48 samples (1 ms) of delay at 48 kHz
# RNNoise's output is its input of two frames (20 ms) before, measured by cross-correlation on
# speech (tests/unit/test_denoise.py); the two filters add 48 samples each at 48 kHz.
_DELAY = 2 * ASR_RATE // 100 + 2 * (len(_TAPS) - 1) // 2 // _FACTOR
