"""Per-turn latency from the pipeline's events (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from core.events import AsrFinal, Event, LlmFirstToken, PlaybackStart, ResponseStart, SpeechEnd, TtsChunk

# The per-turn figures, in pipeline order (TurnLatency's field names).
STAGES = ("endpoint_s", "asr_final_s", "llm_first_token_s", "first_chunk_s", "first_audio_s", "voice_to_voice_s")


@dataclass
class TurnLatency:
    response: int
    user_text: str
    speech_end: float  # the person stopped speaking (timeline seconds)
    endpoint_s: float | None = None  # speech end -> endpoint decision
    asr_final_s: float | None = None  # endpoint -> ASR final
    llm_first_token_s: float | None = None  # LLM request -> first token
    first_chunk_s: float | None = None  # first token -> first chunk synthesized
    first_audio_s: float | None = None  # first chunk -> first reply sample played
    voice_to_voice_s: float | None = None  # speech end -> first reply sample

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class TurnTracker:
    """Follows one session's events and completes a :class:`TurnLatency` per answered turn.

    :meth:`push` takes the events in log order and returns a turn once its
    first reply sample was played (every stage is known then), else None.
    """

    def __init__(self) -> None:
        self._ends: dict[int, dict[str, float]] = {}  # utterance -> speech end, endpoint, final
        self.turns: dict[int, tuple[TurnLatency, dict[str, float]]] = {}  # response -> (turn, marks)

    def push(self, e: Event) -> TurnLatency | None:
        match e:
            case SpeechEnd():
                self._ends[e.utterance] = {"end": e.end, "endpoint": e.t}
            case AsrFinal() if e.utterance in self._ends:
                self._ends[e.utterance]["final"] = e.t
            case ResponseStart():
                u = self._ends.pop(e.utterance, {})
                turn = TurnLatency(e.response, e.text, u.get("end", e.t))
                self.turns[e.response] = (turn, {k: v for k, v in u.items() if k != "end"} | {"request": e.t})
            case LlmFirstToken() | TtsChunk() | PlaybackStart() if e.response in self.turns:
                turn, marks = self.turns[e.response]
                key = MARKS[type(e)]
                if key not in marks:
                    marks[key] = e.t
                    if isinstance(e, PlaybackStart):
                        _fill(turn, marks)
                        return turn
        return None


# The reply's first token, first chunk and first sample, as the marks _fill reads.
MARKS: dict[type[Event], str] = {LlmFirstToken: "token", TtsChunk: "chunk", PlaybackStart: "audio"}


def turn_latencies(events: Iterable[Event]) -> list[TurnLatency]:
    """One entry per answered user turn, from ``events`` in log order."""
    tracker = TurnTracker()
    for e in events:
        tracker.push(e)
    return [turn for turn, _ in tracker.turns.values()]


def _fill(turn: TurnLatency, m: dict[str, float]) -> None:
    def gap(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(b - a, 3)

    turn.endpoint_s = gap(turn.speech_end, m.get("endpoint"))
    turn.asr_final_s = gap(m.get("endpoint"), m.get("final"))
    # From the request, not the final: a turn that waited for the previous
    # reply to end shows its wait in voice-to-voice, not as LLM time.
    turn.llm_first_token_s = gap(m.get("request"), m.get("token"))
    turn.first_chunk_s = gap(m.get("token"), m.get("chunk"))
    turn.first_audio_s = gap(m.get("chunk"), m.get("audio"))
    turn.voice_to_voice_s = gap(turn.speech_end, m.get("audio"))


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values``, linearly interpolated, None values skipped; None if empty."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    k = (len(v) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return round(v[lo] + (v[hi] - v[lo]) * (k - lo), 3)


def format_table(turns: list[TurnLatency]) -> str:
    head = "| turn | endpoint | ASR final | LLM 1st token | 1st chunk | 1st audio | voice-to-voice | user said |"
    rows = [head, "|" + "---|" * 8]

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1000:.0f} ms"

    for i, t in enumerate(turns, 1):
        text = t.user_text if len(t.user_text) <= 40 else t.user_text[:37] + "..."
        rows.append(
            f"| {i} | {ms(t.endpoint_s)} | {ms(t.asr_final_s)} | {ms(t.llm_first_token_s)} | "
            f"{ms(t.first_chunk_s)} | {ms(t.first_audio_s)} | {ms(t.voice_to_voice_s)} | {text} |"
        )
    return "\n".join(rows)
