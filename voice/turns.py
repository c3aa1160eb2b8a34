"""Turn-taking: who holds the floor, and what to do next.

:class:`Conversation` is the pipeline's core. It performs no I/O and reads no
clock: the session feeds it what happened (speech edges from the VAD, the ASR
final, LLM deltas, synthesized chunks, samples played), each with the time on
the session's timeline, and it answers with :data:`Command` objects that the
session carries out. Every rule about turn-taking lives here.

States::

    LISTENING ──speech──▶ USER_SPEAKING ──endpoint──▶ THINKING ──first chunk──▶ SPEAKING
        ▲                                       (ASR final, LLM)                  │
        └────────────────────────── playback ended ◀──────────────────────────────┘

The person's speech is segmented the whole time, whatever the assistant does.
A user turn that becomes final while the assistant is still replying waits
and is answered right after (barge-in, which cuts the reply instead, builds on
this).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from voice.history import History, Turn
from voice.ledger import PlaybackLedger, Word
from voice.sentences import SentenceGrouper


class State(enum.Enum):
    LISTENING = "listening"
    USER_SPEAKING = "user_speaking"
    THINKING = "thinking"
    SPEAKING = "speaking"


# -- commands: what the session must do -----------------------------------


@dataclass(frozen=True)
class TranscribeFinal:
    """Run the final ASR pass on utterance ``utterance`` (onset..end, seconds)."""

    utterance: int
    onset: float
    end: float


@dataclass(frozen=True)
class StartResponse:
    response: int
    messages: list[dict[str, str]]


@dataclass(frozen=True)
class Synthesize:
    response: int
    chunk: int
    text: str


@dataclass(frozen=True)
class Emit:
    """An event for the log (and, later, for clients)."""

    type: str
    t: float
    fields: dict = field(default_factory=dict)


Command = TranscribeFinal | StartResponse | Synthesize | Emit


@dataclass
class _Response:
    """The assistant reply in flight."""

    id: int
    user_text: str
    started: float
    grouper: SentenceGrouper
    ledger: PlaybackLedger = field(default_factory=PlaybackLedger)
    generated: str = ""
    llm_done: bool = False
    chunks_requested: int = 0
    chunk_texts: dict[int, str] = field(default_factory=dict)
    chunks_done: int = 0
    first_token_at: float | None = None
    playback_started_at: float | None = None


class Conversation:
    """The turn-taking state machine of one session."""

    def __init__(self, system_prompt: str | None = None, history: History | None = None) -> None:
        self.system_prompt = system_prompt
        self.history = history if history is not None else History()
        self.state = State.LISTENING
        self.user_speaking = False
        self._utterance = 0
        self._onset = 0.0
        self._response_ids = 0
        self._response: _Response | None = None
        self._waiting: list[tuple[int, str, float, float]] = []  # finals not yet answered
        self._transcribing: set[int] = set()

    @property
    def response(self) -> _Response | None:
        return self._response

    # -- the person -------------------------------------------------------

    def speech_started(self, onset: float, t: float) -> list[Command]:
        """The VAD confirmed speech that began at ``onset`` (pre-roll excluded)."""
        self.user_speaking = True
        self._utterance += 1
        self._onset = onset
        if self.state is State.LISTENING:
            self.state = State.USER_SPEAKING
        return [Emit("speech_start", t, {"onset": round(onset, 3), "utterance": self._utterance})]

    def speech_ended(self, end: float, t: float) -> list[Command]:
        """The endpoint: speech that ended at ``end`` was followed by enough silence."""
        if not self.user_speaking:
            return []
        self.user_speaking = False
        self._transcribing.add(self._utterance)
        if self.state is State.USER_SPEAKING:
            self.state = State.THINKING
        return [
            Emit("speech_end", t, {"end": round(end, 3), "utterance": self._utterance}),
            TranscribeFinal(self._utterance, self._onset, end),
        ]

    def transcript_final(self, utterance: int, text: str, onset: float, end: float, t: float) -> list[Command]:
        """The ASR final for an utterance; empty text means it held no words."""
        self._transcribing.discard(utterance)
        text = text.strip()
        out: list[Command] = [Emit("asr_final", t, {"text": text, "utterance": utterance})]
        if not text:
            if self._response is None and not self._waiting:
                self.state = State.USER_SPEAKING if self.user_speaking else State.LISTENING
            return out
        if self._response is not None:
            self._waiting.append((utterance, text, onset, end))
            return out
        return out + self._answer(utterance, text, onset, end, t)

    # -- the assistant ----------------------------------------------------

    def _answer(self, utterance: int, text: str, onset: float, end: float, t: float) -> list[Command]:
        self.history.add(Turn("user", text, t_start=onset, t_end=end))
        self._response_ids += 1
        self._response = _Response(self._response_ids, text, t, SentenceGrouper())
        self.state = State.THINKING
        return [
            Emit("response_start", t, {"response": self._response_ids, "utterance": utterance, "text": text}),
            StartResponse(self._response_ids, self.history.messages(self.system_prompt)),
        ]

    def llm_delta(self, response: int, text: str, t: float) -> list[Command]:
        r = self._current(response)
        if r is None or not text:
            return []
        out: list[Command] = []
        if r.first_token_at is None:
            r.first_token_at = t
            out.append(Emit("llm_first_token", t, {"response": response}))
        r.generated += text
        return out + self._synthesize(r, r.grouper.feed(text), t)

    def llm_done(self, response: int, t: float, error: str | None = None) -> list[Command]:
        r = self._current(response)
        if r is None:
            return []
        r.llm_done = True
        out: list[Command] = [
            Emit("llm_done", t, {"response": response, "error": error} if error else {"response": response})
        ]
        out += self._synthesize(r, r.grouper.flush(), t)
        return out + self._maybe_finish(r, t)

    def tts_audio(
        self, response: int, chunk: int, text: str, n_samples: int, words: list[Word], t: float, first: bool
    ) -> list[Command]:
        """Audio for (part of) a chunk is ready and queued for playback."""
        r = self._current(response)
        if r is None:
            return []
        if n_samples:
            r.ledger.add_chunk(text, n_samples, words)
        if not first:
            return []
        return [Emit("tts_chunk", t, {"response": response, "chunk": chunk, "text": r.chunk_texts[chunk]})]

    def tts_done(self, response: int, chunk: int, t: float) -> list[Command]:
        r = self._current(response)
        if r is None:
            return []
        r.chunks_done += 1
        return self._maybe_finish(r, t)

    def played(self, n_samples: int, t: float) -> list[Command]:
        """``n_samples`` of reply audio were played, the last one at ``t``."""
        r = self._response
        if r is None or n_samples <= 0:
            return []
        out: list[Command] = []
        if r.playback_started_at is None:
            r.playback_started_at = t
            self.state = State.SPEAKING
            out.append(Emit("playback_start", t, {"response": r.id}))
        r.ledger.advance(n_samples)
        return out + self._maybe_finish(r, t)

    # -- internals --------------------------------------------------------

    def _current(self, response: int) -> _Response | None:
        r = self._response
        return r if r is not None and r.id == response else None

    def _synthesize(self, r: _Response, chunks: list[str], t: float) -> list[Command]:
        out: list[Command] = []
        for text in chunks:
            r.chunks_requested += 1
            r.chunk_texts[r.chunks_requested] = text
            out.append(Synthesize(r.id, r.chunks_requested, text))
        return out

    def _maybe_finish(self, r: _Response, t: float) -> list[Command]:
        if not (r.llm_done and r.chunks_done == r.chunks_requested and r.ledger.all_played):
            return []
        out: list[Command] = []
        if r.playback_started_at is not None:
            out.append(Emit("playback_end", t, {"response": r.id}))
        spoken = r.ledger.spoken_text()
        if spoken:
            self.history.add(
                Turn("assistant", spoken, t_start=r.playback_started_at, t_end=t, generated_text=r.generated)
            )
        out.append(Emit("turn_end", t, {"response": r.id, "text": spoken}))
        self._response = None
        self.state = State.USER_SPEAKING if self.user_speaking else State.LISTENING
        if self._waiting:
            out += self._answer(*self._waiting.pop(0), t)
        elif self._transcribing:
            self.state = State.THINKING
        return out
