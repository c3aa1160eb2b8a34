"""The one resampler of every transport's edge: soxr's streaming resampler, mono float32, HQ.

Each transport changes the rate of its audio once, where it meets the
pipeline: what a client or a device captures becomes the pipeline's 16 kHz
(``ASR_RATE``) as it comes in, and the reply (at the TTS's output rate)
becomes what the other side plays as it goes out, or the 16 kHz reference
of what was played for the echo canceller. Every one of them is a
:class:`Resampler`, so a rate changes in one way everywhere: the same soxr
quality (HQ, its default) and type.

G.711's 8 kHz output is not made here (``transport/g711.To8k``): soxr holds
~60 ms back and gives its output in bursts, which at the end of a reply
would keep its last words from a caller.
"""

from __future__ import annotations

import numpy as np
import soxr

QUALITY = "HQ"  # soxr's default, and what every stream here was made with


class Resampler:
    """A stream from ``from_rate`` to ``to_rate``: chunks in, chunks out, its filter's state kept between them.

    soxr holds a few milliseconds back (more at the first chunk); ``flush``
    lets them out at the end of a stream, which then starts afresh.
    """

    def __init__(self, from_rate: int, to_rate: int) -> None:
        self.from_rate = from_rate
        self.to_rate = to_rate
        self._stream = self._new()

    def _new(self) -> soxr.ResampleStream:
        return soxr.ResampleStream(self.from_rate, self.to_rate, 1, dtype="float32", quality=QUALITY)

    def __call__(self, samples: np.ndarray) -> np.ndarray:
        """The next chunk, float32 mono at ``from_rate``: what soxr gives of it now, at ``to_rate``."""
        return self._stream.resample_chunk(np.asarray(samples, dtype=np.float32))

    def flush(self) -> np.ndarray:
        """What the stream still holds back, and a fresh stream for what comes next."""
        tail = self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        self.reset()
        return tail

    def reset(self) -> None:
        """Drop what the stream holds: the next chunk starts a new stream."""
        self._stream = self._new()


def resampler(from_rate: int, to_rate: int) -> Resampler | None:
    """A resampler, or None where the rates are the same and samples pass as they are."""
    return None if from_rate == to_rate else Resampler(from_rate, to_rate)
