"""Partial hypotheses while the person speaks, on a budget.

On the CPU every Whisper call encodes a padded 30 s window, so a partial costs
as much as a final. :class:`PartialPolicy` decides when a partial pass is worth
starting so that partials never delay the final: at most one at a time, only
while the VAD hears speech (a pause may be the endpoint, and the final comes
first), at a steady interval of new audio. The partial passes run on their own
(smaller) model so that the final pass never waits behind one.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.stability import LocalAgreement


@dataclass(frozen=True)
class PartialConfig:
    interval_s: float = 1.0  # new audio between two partial passes
    min_audio_s: float = 0.6  # no partial on less audio than this
    max_silence_s: float = 0.1  # trailing silence beyond this: the endpoint may be near
    # A pass once a pause reaches this much silence, on all the speech before it (its "closing
    # partial"), whatever the interval: its words can start the speculative reply before the
    # early final. Not at the first silent frame: one-frame gaps are a quarter of the pauses
    # Silero hears inside the shared recordings (5 of 21). None: no closing passes.
    closing_after_s: float | None = 0.064
    # ... and not past this much (a preview pass still running then): the early final is near.
    closing_until_s: float = 0.15


class PartialPolicy:
    """Pure scheduling state of one utterance's partials."""

    def __init__(self, config: PartialConfig) -> None:
        self.config = config
        self.agreement = LocalAgreement()
        self.running = False
        self._last_audio_s = 0.0
        self._closed: float | None = None  # the speech end whose pause had its closing pass
        self.last_text = ""

    def due(self, audio_s: float, trailing_silence_s: float) -> bool:
        """Whether to start a pass now, on ``audio_s`` seconds of utterance."""
        c = self.config
        return (
            not self.running
            and audio_s >= c.min_audio_s
            and audio_s - self._last_audio_s >= c.interval_s
            and trailing_silence_s <= c.max_silence_s
        )

    def closing_due(self, audio_s: float, end: float, trailing_silence_s: float) -> bool:
        """Whether to start the closing pass of the pause after speech that ended at ``end``
        (once a pause, from ``closing_after_s`` of silence to ``closing_until_s``)."""
        c = self.config
        return (
            c.closing_after_s is not None
            and not self.running
            and audio_s >= c.min_audio_s
            and c.closing_after_s - 1e-9 <= trailing_silence_s <= c.closing_until_s + 1e-9
            and end != self._closed
        )

    def closes(self, end: float) -> None:
        """The closing pass of the pause after ``end`` is started."""
        self._closed = end

    def started(self, audio_s: float) -> None:
        self.running = True
        self._last_audio_s = audio_s

    def finished(self, hypothesis: str) -> tuple[str, str] | None:
        """A pass came back: (stable, unstable) if the partial text changed."""
        self.running = False
        stable, unstable = self.agreement.update(hypothesis)
        text = f"{stable} {unstable}".strip()
        if text == self.last_text:
            return None
        self.last_text = text
        return stable, unstable
