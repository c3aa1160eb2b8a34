"""The pipeline's events: what happened in a session, for whoever observes it.

Each event is a small frozen record, after h11's ``_events.py``: its class
says what happened, its ``type`` is the name it has on the wire, and its
fields are typed. The core (:mod:`core.turns`) and the session make
them; the observers (``events.jsonl``, ``--log-json``, the metrics, the
terminal, the two WebSocket dialects) read them and never steer the
pipeline with them. Dispatching on the class instead of on a string means a
renamed or misspelt event is an import error or a failed test, not an event
that nobody handles any more.

:meth:`Event.to_json` is the one serializer: ``{"t", "type", then the fields
in the order they are declared}``, exactly the objects that ``events.jsonl``
and ``--log-json`` have always held (docs/protocol.md and the README list
them). :func:`event_from_json` reads one back.

Numbers are rounded when the event is made, to the precision they are
logged with (``t`` to 0.1 ms, speech edges to 1 ms, levels to 0.1 dB), so an
observer reads what the log says. A field made with :func:`optional` is left
out of the JSON while it holds its default (a level not measured, no LLM
error, a reply not interrupted); every other field is always written, null
included (``playback_paused`` before the speech is confirmed has
``"utterance": null``).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, Literal

from core.event_base import Event, optional, rounded

# Why a reply was cut: the person's words, the client's cancel, the client's
# truncate, the connection closing.
BargeInReason = Literal["words", "client", "truncate", "closed"]
# Why a paused reply played on: no words (a cough, a click, noise), or a backchannel.
ResumeReason = Literal["noise", "backchannel"]
# What an end-of-turn check decided: the turn is over (the endpoint now), not yet
# (keep listening), or nothing: the person went on speaking before the answer
# came (stale), or the model raised (failed: the pause is left to silence).
EndOfTurnDecision = Literal["end", "wait", "hold", "stale", "failed"]
# Why a speculative reply was dropped unheard: the person went on speaking, the
# transcript at the endpoint (or the conversation it was asked with) is not the
# one it was started on, its LLM request failed, the session ended.
DiscardReason = Literal["speech", "transcript", "failed", "closed"]


# -- the person --------------------------------------------------------------


@dataclass(frozen=True)
class SpeechStart(Event):
    """The VAD confirmed speech that began at ``onset`` (pre-roll excluded)."""

    type: ClassVar[str] = "speech_start"
    onset: float = rounded(3)
    utterance: int


@dataclass(frozen=True)
class SpeechEnd(Event):
    """The endpoint: utterance ``utterance`` really ended at ``end``; at ``t``
    enough silence had followed. ``level_db``: the loudness of its voiced
    frames; ``background_db``: the microphone's without speech during a reply."""

    type: ClassVar[str] = "speech_end"
    end: float = rounded(3)
    utterance: int
    level_db: float | None = optional(digits=1)
    background_db: float | None = optional(digits=1)
    room: bool = optional(False)  # it was the room talking (babble, music), not the person: not a turn


@dataclass(frozen=True)
class EndOfTurnCheck(Event):
    """The end-of-turn model's answer for utterance ``utterance`` after ``silence_s`` of
    silence: ``probability`` that the turn is finished (None: the model failed), and what
    that decided. ``trails_off``: the transcript so far ends where a sentence goes on
    ("... and"), which weighed the probability down."""

    type: ClassVar[str] = "end_of_turn_check"
    utterance: int
    probability: float | None = rounded(3)
    silence_s: float = rounded(3)
    decision: EndOfTurnDecision
    trails_off: bool = optional(False)


@dataclass(frozen=True)
class EndOfTurnText(Event):
    """A transcript of utterance ``utterance`` up to a pause (its closing partial, then its
    early final if that comes before the endpoint), as the end-of-turn decision read it:
    ``sentence_end``, the LLM's probability that its sentence ends there (None: not asked, or
    the LLM failed); ``unfinished``: the words hold the turn open (unfinished, or trailing off
    on "and"); ``ended``: they confirmed the model's "finished" and the turn ended now."""

    type: ClassVar[str] = "end_of_turn_text"
    utterance: int
    text: str
    sentence_end: float | None = rounded(4)
    unfinished: bool
    ended: bool = optional(False)


@dataclass(frozen=True)
class AsrPartial(Event):
    """A hypothesis while the person speaks; ``stable``: the prefix that no longer changes."""

    type: ClassVar[str] = "asr_partial"
    text: str
    stable: str


@dataclass(frozen=True)
class AsrFinal(Event):
    """The final transcript of an utterance ("": no words)."""

    type: ClassVar[str] = "asr_final"
    text: str
    utterance: int
    # The utterance's language (an ISO code); left out while the conversation is held to English.
    language: str | None = optional()


@dataclass(frozen=True)
class InterruptionCheck(Event):
    """The words of speech over the reply so far, and what Whisper and the levels made of them."""

    type: ClassVar[str] = "interruption_check"
    utterance: int
    text: str
    no_speech_prob: float = rounded(2)
    level_db: float | None = optional(digits=1)
    background_db: float | None = optional(digits=1)


@dataclass(frozen=True)
class Backchannel(Event):
    """A backchannel ("uh-huh", "okay") over the reply: not an interruption, not a turn."""

    type: ClassVar[str] = "backchannel"
    utterance: int | None
    text: str


# -- the assistant -------------------------------------------------------------


@dataclass(frozen=True)
class ResponseStart(Event):
    """The assistant starts answering ``text`` (utterance ``utterance``): the LLM request."""

    type: ClassVar[str] = "response_start"
    response: int
    utterance: int
    text: str


@dataclass(frozen=True)
class LlmFirstToken(Event):
    type: ClassVar[str] = "llm_first_token"
    response: int


@dataclass(frozen=True)
class TtsChunk(Event):
    """The first audio of chunk ``chunk`` (a sentence or phrase) is synthesized and queued."""

    type: ClassVar[str] = "tts_chunk"
    response: int
    chunk: int
    text: str


@dataclass(frozen=True)
class LlmDone(Event):
    """Generation ended, with ``tokens`` generated (``error``: how it failed)."""

    type: ClassVar[str] = "llm_done"
    response: int
    tokens: int
    error: str | None = optional()


@dataclass(frozen=True)
class PlaybackStart(Event):
    """The reply's first sample was played."""

    type: ClassVar[str] = "playback_start"
    response: int


@dataclass(frozen=True)
class PlaybackEnd(Event):
    """The reply's last sample was played."""

    type: ClassVar[str] = "playback_end"
    response: int


@dataclass(frozen=True)
class TurnEnd(Event):
    """The reply is over and stored as ``text`` (what was played; "": nothing, not stored)."""

    type: ClassVar[str] = "turn_end"
    response: int
    text: str
    interrupted: bool = optional(False)


# -- tools ---------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCallStart(Event):
    """The model's call ``call_id`` of tool ``name`` is whole, and goes to the tool (its
    ``arguments``: the JSON text the model wrote, checked against the tool before it runs)."""

    type: ClassVar[str] = "tool_call"
    response: int
    call_id: str
    name: str
    arguments: str
    server: str = optional("")  # the MCP server whose tool it is (left out: ours, or the client's)


@dataclass(frozen=True)
class ToolCallEnd(Event):
    """Call ``call_id`` has its ``result`` (what the model is told): ``status`` ok, error (it
    raised, or its arguments did not fit: it never ran), cancelled (by a barge-in) or timeout."""

    type: ClassVar[str] = "tool_result"
    response: int
    call_id: str
    name: str
    status: str
    result: str
    duration_s: float = rounded(3)
    server: str = optional("")  # as ToolCallStart's


@dataclass(frozen=True)
class AwaitingTools(Event):
    """The model's request ended with ``calls`` calls: the reply waits for their results (the
    Realtime API ends a response here, and the client answers its function calls)."""

    type: ClassVar[str] = "awaiting_tools"
    response: int
    calls: int


@dataclass(frozen=True)
class ResponseContinued(Event):
    """The model is asked again with the results of its calls: reply ``response`` goes on
    (its request number ``round``)."""

    type: ClassVar[str] = "response_continued"
    response: int
    round: int


@dataclass(frozen=True)
class StepEntered(Event):
    """The agent's flow moved from step ``previous`` to ``step`` (core/flow.py), in reply ``response``
    (0: not in a reply: the start, or a resumed conversation), by its transition ``via`` ("": none)."""

    type: ClassVar[str] = "step_entered"
    step: str
    previous: str
    response: int
    via: str = ""


@dataclass(frozen=True)
class Collected(Event):
    """What reply ``response``'s extraction found the person said of the step's fields (kept in the
    state), and the values it gave that they did not say (``dropped``: made up, asked for again)."""

    type: ClassVar[str] = "collected"
    response: int
    values: dict[str, Any]
    dropped: dict[str, Any]


@dataclass(frozen=True)
class Transfer(Event):
    """The agent hands the conversation to ``to`` (a number or a SIP address) once reply ``response``
    was heard: the client (or the phone line) carries it out."""

    type: ClassVar[str] = "transfer"
    to: str
    response: int


# -- speculation ---------------------------------------------------------------


@dataclass(frozen=True)
class SpeculativeStart(Event):
    """Reply ``response`` to ``text`` (the early final of ``utterance``) is started before the
    endpoint: generated, and its first chunk synthesized, but not played until the endpoint."""

    type: ClassVar[str] = "speculative_start"
    response: int
    utterance: int
    text: str


@dataclass(frozen=True)
class SpeculativeCommit(Event):
    """The endpoint came on the transcript the speculative reply was started on: it is the reply
    (its ``response_start`` follows). ``ready``: its first chunk's audio was synthesized by then;
    ``tokens``: generated by then."""

    type: ClassVar[str] = "speculative_commit"
    response: int
    utterance: int
    ready: bool
    tokens: int


@dataclass(frozen=True)
class SpeculativeDiscard(Event):
    """The speculative reply is dropped unheard (``reason``); its request is aborted in the engine,
    nothing of it was played or stored. ``tokens``: generated for nothing."""

    type: ClassVar[str] = "speculative_discard"
    response: int
    utterance: int
    reason: DiscardReason
    tokens: int


# -- barge-in ------------------------------------------------------------------


@dataclass(frozen=True)
class PlaybackPaused(Event):
    """Sound over the reply: playback paused while it is judged (``utterance``
    None until the VAD confirms it is speech)."""

    type: ClassVar[str] = "playback_paused"
    response: int
    utterance: int | None


@dataclass(frozen=True)
class PlaybackResumed(Event):
    """What paused the reply was not an interruption: it plays on from where it paused."""

    type: ClassVar[str] = "playback_resumed"
    response: int
    reason: ResumeReason


@dataclass(frozen=True)
class BargeIn(Event):
    """The reply is cut: generation and synthesis stop, at ``t``; it was paused
    at ``paused_at``, after ``tokens`` tokens (``utterance``: the speech that
    cut it, None for a client's cancel)."""

    type: ClassVar[str] = "barge_in"
    response: int
    utterance: int | None
    reason: BargeInReason
    paused_at: float
    tokens: int


@dataclass(frozen=True)
class LlmCancelled(Event):
    """The LLM request of a cut reply was aborted while it was generating."""

    type: ClassVar[str] = "llm_cancelled"
    response: int


@dataclass(frozen=True)
class TtsCancelled(Event):
    """Synthesis of a cut reply stopped; ``chunks_dropped`` chunks were never started."""

    type: ClassVar[str] = "tts_cancelled"
    response: int
    chunks_dropped: int


@dataclass(frozen=True)
class PlaybackStopped(Event):
    """The queued reply audio was dropped: the speaker is to flush its buffer."""

    type: ClassVar[str] = "playback_stopped"
    response: int


@dataclass(frozen=True)
class Truncate(Event):
    """Reply ``response`` was heard only for its first ``audio_end_ms``: ``text``."""

    type: ClassVar[str] = "truncate"
    response: int
    audio_end_ms: int
    text: str


# -- errors ----------------------------------------------------------------------


@dataclass(frozen=True)
class Error(Event):
    """Something failed in ``where`` (an engine, a task); the session goes on.

    An event, not an exception: the failure was caught and is reported."""

    type: ClassVar[str] = "error"
    where: str
    message: str


# Every event, by its type. Order: as a turn goes.
EVENTS: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        SpeechStart,
        EndOfTurnCheck,
        EndOfTurnText,
        SpeechEnd,
        AsrPartial,
        AsrFinal,
        SpeculativeStart,
        SpeculativeCommit,
        SpeculativeDiscard,
        ResponseStart,
        LlmFirstToken,
        TtsChunk,
        ToolCallStart,
        ToolCallEnd,
        AwaitingTools,
        ResponseContinued,
        StepEntered,
        Collected,
        Transfer,
        LlmDone,
        PlaybackStart,
        PlaybackEnd,
        TurnEnd,
        PlaybackPaused,
        InterruptionCheck,
        Backchannel,
        PlaybackResumed,
        BargeIn,
        LlmCancelled,
        TtsCancelled,
        PlaybackStopped,
        Truncate,
        Error,
    )
}


class EventError(ValueError):
    """A JSON object that is not one of the events above."""


def event_from_json(data: dict[str, Any]) -> Event:
    """The event that :meth:`Event.to_json` wrote as ``data``.

    Raises :class:`EventError` for a ``type`` that is no event, a
    missing field, or a field the event does not have.
    """
    kind = data.get("type")
    cls = EVENTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise EventError(f"unknown event type {kind!r} (known: {', '.join(EVENTS)})")
    names = [f.name for f in fields(cls)]
    extra = data.keys() - {*names, "type"}
    if extra:
        raise EventError(f"{kind} has no field {', '.join(sorted(extra))} (its fields: {', '.join(names)})")
    missing = [f.name for f in fields(cls) if f.default is MISSING and f.name not in data]
    if missing:
        raise EventError(f"{kind} needs {', '.join(missing)}")
    return cls(**{k: v for k, v in data.items() if k != "type"})
