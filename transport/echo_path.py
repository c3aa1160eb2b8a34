"""A simulated loudspeaker-to-microphone path, for replay.

The assistant's output is delayed, given a short exponentially decaying room
tail and scaled so that the echo's level is ``gain_db`` relative to what was
played (for a white signal), then added to the microphone input,
as it would be with speakers rather than headphones. The impulse response is
drawn from a seeded generator, so replays on virtual time stay repeatable.
"""

from __future__ import annotations

import numpy as np


class EchoPath:
    def __init__(self, gain_db: float, delay_ms: float, rate: int = 16000, tail_s: float = 0.25, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        delay = round(rate * delay_ms / 1000)
        n_tail = round(rate * tail_s)
        t = np.arange(n_tail) / rate
        # RT60 = tail_s: the tail falls 60 dB over its length; it starts 6 dB under the direct sound.
        tail = rng.standard_normal(n_tail) * 10 ** (-60 * t / tail_s / 20) * 0.5 / np.sqrt(rate * 0.01)
        ir = np.zeros(delay + 1 + n_tail, dtype=np.float64)
        ir[delay] = 1.0
        ir[delay + 1 :] = tail
        ir *= 10 ** (gain_db / 20) / np.sqrt(np.sum(ir**2))
        self.ir = ir.astype(np.float32)
        self._history = np.zeros(len(self.ir) - 1, dtype=np.float32)

    def __call__(self, played: np.ndarray) -> np.ndarray:
        """The echo, over the span of ``played`` (what the speaker played, at ``rate``)."""
        x = np.concatenate([self._history, played])
        y = np.convolve(x, self.ir, mode="valid")
        self._history = x[len(x) - len(self._history) :] if len(self._history) else self._history
        return y.astype(np.float32)
