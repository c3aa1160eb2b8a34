"""Prometheus metrics from the pipeline's events.

:class:`PipelineMetrics` is an event sink: give it every event of every
session (``metrics.observe``) and it keeps, in its own registry,

- ``voice_stage_seconds{stage}``: a histogram per latency stage (the stages of
  :data:`voice.app.latency.STAGES`: endpoint, ASR final, LLM first token, first
  chunk, first audio, voice-to-voice), one observation per answered turn;
- ``voice_turns_total{role}``: user turns answered and assistant turns ended;
- ``voice_barge_ins_total``, ``voice_backchannels_total`` and
  ``voice_playback_resumed_total{reason}``;
- ``voice_errors_total{where}``;
- ``voice_llm_tokens_total`` and ``voice_llm_cancelled_tokens_total``: tokens
  generated, and those of replies that a barge-in cut (heard or not: the
  generation the person stopped);
- ``voice_speculative_replies_total{outcome}``: replies started on the early
  final, before the endpoint: ``ready`` (committed with their first audio
  ready at the endpoint), ``late`` (committed before it was), ``discarded``
  (the person went on); ``voice_speculative_wasted_tokens_total``: the
  tokens the discarded ones generated for nothing (in the tokens total too);
- ``voice_sessions_active``.

Nothing here does I/O; :func:`serve` exposes a registry over HTTP.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from core.events import (
    Backchannel,
    BargeIn,
    Error,
    Event,
    LlmDone,
    PlaybackResumed,
    ResponseStart,
    SpeculativeCommit,
    SpeculativeDiscard,
    TurnEnd,
)
from voice.app.latency import STAGES, TurnTracker

# Voice-to-voice lives between ~0.3 s (a GPU) and several seconds (a loaded CPU).
BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0)


class PipelineMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.stage = Histogram(
            "voice_stage_seconds",
            "Latency of one pipeline stage, per answered turn",
            ["stage"],
            registry=r,
            buckets=BUCKETS,
        )
        self.turns = Counter(
            "voice_turns_total", "Turns: user turns answered, assistant turns ended", ["role"], registry=r
        )
        self.barge_ins = Counter("voice_barge_ins_total", "Replies cut by the person speaking", registry=r)
        self.backchannels = Counter("voice_backchannels_total", "Backchannels heard over a reply", registry=r)
        self.resumed = Counter("voice_playback_resumed_total", "Replies resumed after a pause", ["reason"], registry=r)
        self.errors = Counter("voice_errors_total", "Errors, by where they happened", ["where"], registry=r)
        self.tokens = Counter("voice_llm_tokens_total", "LLM tokens generated", registry=r)
        self.cancelled_tokens = Counter(
            "voice_llm_cancelled_tokens_total", "LLM tokens of replies cut by a barge-in", registry=r
        )
        self.speculative = Counter(
            "voice_speculative_replies_total",
            "Replies started before the endpoint: committed ready, committed late, discarded",
            ["outcome"],
            registry=r,
        )
        self.wasted_tokens = Counter(
            "voice_speculative_wasted_tokens_total", "LLM tokens of speculative replies discarded", registry=r
        )
        self.sessions = Gauge("voice_sessions_active", "Sessions open now", registry=r)
        self._trackers: dict[Any, TurnTracker] = {}

    def session_opened(self, key: Any) -> None:
        self._trackers[key] = TurnTracker()
        self.sessions.inc()

    def session_closed(self, key: Any) -> None:
        self._trackers.pop(key, None)
        self.sessions.dec()

    def sink(self, key: Any):
        """An event sink for one session (its events are tracked apart)."""
        if key not in self._trackers:
            self.session_opened(key)
        return lambda event: self.observe(event, key)

    def observe(self, event: Event, key: Any = None) -> None:
        tracker = self._trackers.setdefault(key, TurnTracker())
        done = tracker.push(event)
        if done is not None:
            for stage in STAGES:
                value = getattr(done, stage)
                if value is not None:
                    self.stage.labels(stage=stage[:-2]).observe(value)
        match event:
            case ResponseStart():
                self.turns.labels(role="user").inc()
            case TurnEnd():
                self.turns.labels(role="assistant").inc()
            case LlmDone():
                self.tokens.inc(event.tokens)
            case BargeIn():
                if event.reason == "words":  # the person, not a client's cancel or a close
                    self.barge_ins.inc()
                self.tokens.inc(event.tokens)
                self.cancelled_tokens.inc(event.tokens)
            case SpeculativeCommit():
                self.speculative.labels(outcome="ready" if event.ready else "late").inc()
            case SpeculativeDiscard():
                self.speculative.labels(outcome="discarded").inc()
                self.tokens.inc(event.tokens)
                self.wasted_tokens.inc(event.tokens)
            case Backchannel():
                self.backchannels.inc()
            case PlaybackResumed():
                self.resumed.labels(reason=event.reason).inc()
            case Error():
                self.errors.labels(where=event.where).inc()


def serve(metrics: PipelineMetrics, port: int, host: str = "127.0.0.1") -> None:
    """Expose ``metrics`` at http://HOST:PORT/metrics (a daemon thread)."""
    start_http_server(port, addr=host, registry=metrics.registry)
