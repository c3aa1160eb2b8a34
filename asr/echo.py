"""Acoustic echo cancellation: the assistant's own voice out of the microphone.

The session knows exactly what it played. :class:`EchoCanceller` hands that
playback signal to WebRTC's audio processing module (AEC3, through the
``livekit`` package) as the far-end reference and removes its echo from the
microphone signal before the VAD and the ASR see it. WebRTC estimates the
echo path's delay itself; ``stream_delay_ms`` tells it the part the transport
knows (device latency).

The canceller needs about a second of playback to converge. Until it has,
and whenever the residual is not clearly above the echo expected from the
reference, :class:`voice.core.echo_gate.EchoGate` discounts the VAD's speech probability: speech
over the assistant must be louder than what its own voice explains.
"""

from __future__ import annotations

import numpy as np

from voice.core.audio import ASR_RATE

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
