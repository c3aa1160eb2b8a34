"""Acoustic echo cancellation: the assistant's own voice out of the microphone.

The session knows exactly what it played. :class:`EchoCanceller` hands that
playback signal to WebRTC's audio processing module (AEC3, through the
``livekit`` package) as the far-end reference and removes its echo from the
microphone signal before the VAD and the ASR see it. WebRTC estimates the
echo path's delay itself; ``stream_delay_ms`` tells it the part the transport
knows (device latency).

The canceller needs about a second of playback to converge. Until it has,
and whenever the residual is not clearly above the echo expected from the
reference, :class:`core.echo_gate.EchoGate` discounts the VAD's speech probability: speech
over the assistant must be louder than what its own voice explains.
"""

from __future__ import annotations

import numpy as np

from core.audio import ASR_RATE

_FRAME = ASR_RATE // 100  # WebRTC processes 10 ms frames


class EchoCanceller:
    def __init__(self, stream_delay_ms: int = 0) -> None:
        from livekit import rtc

        self._rtc = rtc
        self._apm = rtc.AudioProcessingModule(
            echo_cancellation=True, noise_suppression=False, high_pass_filter=True, auto_gain_control=False
        )
        self._apm.set_stream_delay_ms(stream_delay_ms)
        self._mic = np.zeros(0, dtype=np.float32)
        self._far = np.zeros(0, dtype=np.float32)

    def _frame(self, samples: np.ndarray):
        pcm = np.clip(samples * 32768.0, -32768, 32767).astype(np.int16)
        return self._rtc.AudioFrame(pcm.tobytes(), ASR_RATE, 1, _FRAME)

    def process(self, mic: np.ndarray, far: np.ndarray) -> np.ndarray:
        """Echo-cancelled ``mic``; ``far`` is what was played over the same span (16 kHz)."""
        self._mic = np.concatenate([self._mic, mic])
        self._far = np.concatenate([self._far, far])
        out: list[np.ndarray] = []
        while len(self._mic) >= _FRAME:
            m, self._mic = self._mic[:_FRAME], self._mic[_FRAME:]
            if len(self._far) >= _FRAME:
                f, self._far = self._far[:_FRAME], self._far[_FRAME:]
            else:
                f = np.zeros(_FRAME, dtype=np.float32)
            self._apm.process_reverse_stream(self._frame(f))
            frame = self._frame(m)
            self._apm.process_stream(frame)
            out.append(np.frombuffer(bytes(frame.data), dtype=np.int16).astype(np.float32) / 32768.0)
        if not out:
            return np.zeros(0, dtype=np.float32)
        return np.concatenate(out)


# SpeexDSP's echo canceller (libspeexdsp1, Debian), through ctypes: a linear
# adaptive filter (MDF) alone, without Speex's residual-echo suppressor.
_SPEEX_ECHO_SET_SAMPLING_RATE = 24
_speex = None


def _speexdsp():
    global _speex
    if _speex is None:
        import ctypes
        import ctypes.util

        name = ctypes.util.find_library("speexdsp") or "libspeexdsp.so.1"
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            raise RuntimeError(f"SpeexDSP not found ({e}); run scripts/setup (Debian package libspeexdsp1)") from e
        lib.speex_echo_state_init.restype = ctypes.c_void_p
        lib.speex_echo_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.speex_echo_state_destroy.argtypes = [ctypes.c_void_p]
        lib.speex_echo_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        pcm = np.ctypeslib.ndpointer(np.int16, flags="C_CONTIGUOUS")
        lib.speex_echo_cancellation.argtypes = [ctypes.c_void_p, pcm, pcm, pcm]
        _speex = lib
    return _speex


class LinearEchoCanceller:
    """The echo the reference explains, subtracted, and nothing else: what the ASR transcribes.

    AEC3's nonlinear suppressor also removes near-end speech while the far end
    is active, and it ate the first words of interruptions (issue 15). A linear
    filter leaves a residual echo some 10-20 dB down but never touches speech
    it cannot predict from the reference, so an interruption keeps its onset.
    The VAD and the echo gate still hear AEC3's output (:class:`EchoCanceller`):
    its suppression is what keeps the assistant's own voice from being a barge-in.
    ``tail_ms``: the echo path the filter models (delay plus room), in 10 ms frames.
    """

    def __init__(self, tail_ms: int = 256) -> None:
        import ctypes

        self._lib = _speexdsp()
        self._state = self._lib.speex_echo_state_init(_FRAME, ASR_RATE * tail_ms // 1000)
        rate = ctypes.c_int(ASR_RATE)
        self._lib.speex_echo_ctl(self._state, _SPEEX_ECHO_SET_SAMPLING_RATE, ctypes.byref(rate))
        self._mic = np.zeros(0, dtype=np.float32)
        self._far = np.zeros(0, dtype=np.float32)
        self._out = np.zeros(_FRAME, dtype=np.int16)

    @staticmethod
    def _pcm(samples: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.clip(samples * 32768.0, -32768, 32767).astype(np.int16))

    def process(self, mic: np.ndarray, far: np.ndarray) -> np.ndarray:
        """Echo-cancelled ``mic`` in whole 10 ms frames, as :meth:`EchoCanceller.process`."""
        self._mic = np.concatenate([self._mic, mic])
        self._far = np.concatenate([self._far, far])
        n = len(self._mic) // _FRAME
        if n == 0:
            return np.zeros(0, dtype=np.float32)
        far_now = np.zeros(n * _FRAME, dtype=np.float32)
        have = min(len(self._far), n * _FRAME)
        far_now[:have] = self._far[:have]
        mic_pcm, far_pcm = self._pcm(self._mic[: n * _FRAME]), self._pcm(far_now)
        self._mic, self._far = self._mic[n * _FRAME :], self._far[have:]
        out = np.empty(n * _FRAME, dtype=np.float32)
        for i in range(n):
            s = slice(i * _FRAME, (i + 1) * _FRAME)
            self._lib.speex_echo_cancellation(self._state, mic_pcm[s], far_pcm[s], self._out)
            out[s] = self._out / 32768.0
        return out

    def close(self) -> None:
        if self._state:
            self._lib.speex_echo_state_destroy(self._state)
            self._state = None

    def __del__(self) -> None:
        self.close()
