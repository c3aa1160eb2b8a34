"""What the turn-taking core asks the session to do: the :data:`Command` types.

:class:`~core.turns.Conversation` answers everything it is told with a list of
these; the session carries each out (the device, the engines, the tools, the observers) and
tells the core what came of it. They hold only data, never an engine or a callback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.events import Event
from core.tool_calls import ToolCall


@dataclass(frozen=True)
class TranscribeFinal:
    """Run the final ASR pass on utterance ``utterance`` (onset..end, seconds).

    ``early``: the pass starts in the silence before the endpoint, and its
    answer goes to :meth:`Conversation.early_transcript`. ``over_reply``: the
    speech was heard over the assistant's reply, where noise and echo residual
    make Whisper invent words: transcribe it with the most robust settings.
    ``prompt``: the question the person answers, given the recognizer as the text before
    (core/asking.py; "": none).
    """

    utterance: int
    onset: float
    end: float
    early: bool = False
    over_reply: bool = False
    prompt: str = ""


@dataclass(frozen=True)
class StartResponse:
    """Start the LLM request of reply ``response``. ``speculative``: before the endpoint: hold back
    the audio synthesized for it, unplayed, until ``CommitSpeculation`` (or ``DiscardSpeculation``).
    ``tools``: the tools the model may call (None: none); ``round``: the requests of this reply
    made before it, each answered with tool calls."""

    response: int
    messages: list[dict[str, Any]]
    speculative: bool = False
    tools: list[dict[str, Any]] | None = None
    round: int = 0


@dataclass(frozen=True)
class Extract:
    """Ask the model what the person said of the step's fields (core/collecting.py): ``messages``,
    its answer held to the JSON ``schema``; answer with :meth:`Conversation.extracted` (reply
    ``response`` waits for it)."""

    response: int
    messages: list[dict[str, Any]]
    schema: dict[str, Any]


@dataclass(frozen=True)
class Summarize:
    """Summarize the history's first ``upto`` turns in the background (core/summary.py): ``messages``
    is the request; answer with :meth:`Conversation.summarized`. Nothing waits for it."""

    upto: int
    messages: list[dict[str, Any]]


@dataclass(frozen=True)
class RunTool:
    """Check ``call`` against its tool and run it; answer with :meth:`Conversation.tool_finished`
    (a call whose tool is unknown or whose arguments do not fit is answered as an error, unrun).
    ``hook``: the call is one of the flow's hooks (on_enter, on_exit, on_user_turn: core/steps.py),
    given those of the arguments ``given`` that its tool takes."""

    response: int
    call: ToolCall
    hook: str = ""
    given: dict[str, Any] | None = None


@dataclass(frozen=True)
class StopTools:
    """Reply ``response`` was cut: cancel its running tools whose policy says a barge-in cancels
    them; the others finish. Each still answers with :meth:`Conversation.tool_finished`."""

    response: int


@dataclass(frozen=True)
class CommitSpeculation:
    """The speculative reply ``response`` is the reply: queue the audio held back for it for
    playback, and the audio synthesized for it from now on, as for any reply."""

    response: int


@dataclass(frozen=True)
class DiscardSpeculation:
    """Drop the speculative reply ``response``: abort its LLM request in the engine, cancel its
    synthesis, drop the audio held back for it. None of it was played: the speaker is left alone."""

    response: int


@dataclass(frozen=True)
class Synthesize:
    response: int
    chunk: int
    text: str
    language: str = "en"  # the reply's: its voice is that language's (shell/voices.py)


@dataclass(frozen=True)
class PlayHoldSound:
    """Play the next ``n_samples`` of the hold sound as part of reply ``response`` (core/hold_sound.py)."""

    response: int
    n_samples: int


@dataclass(frozen=True)
class CheckInterruption:
    """Transcribe the speech heard over the reply so far (onset..t, seconds),
    robustly (see ``TranscribeFinal.over_reply``)."""

    utterance: int
    onset: float
    t: float


@dataclass(frozen=True)
class PausePlayback:
    """Fade out within the next output block and play silence; keep the queue."""


@dataclass(frozen=True)
class ResumePlayback:
    """Go on playing the queued reply audio where it paused."""


@dataclass(frozen=True)
class CancelResponse:
    """Abort the LLM request, cancel synthesis, drop the queued audio, now."""

    response: int


@dataclass(frozen=True)
class Goodbye:
    """The person's turn is a goodbye (``core/goodbye.py``): the conversation ends once reply
    ``response`` has been played, where the agent can end one (``SessionConfig.end_on_goodbye``)."""

    response: int


@dataclass(frozen=True)
class EndConversation:
    """The agent's flow reached a step that ends the conversation: it ends once reply ``response``
    was heard whole (core/flow.py), and a phone call is put through to ``transfer`` then (None: hung up)."""

    response: int
    transfer: str | None = None


@dataclass(frozen=True)
class Emit:
    """Tell the observers (the log, the metrics, the clients) that ``event`` happened."""

    event: Event


Command = (
    TranscribeFinal
    | StartResponse
    | Extract
    | Summarize
    | CommitSpeculation
    | DiscardSpeculation
    | Synthesize
    | PlayHoldSound
    | CheckInterruption
    | PausePlayback
    | ResumePlayback
    | CancelResponse
    | RunTool
    | StopTools
    | Goodbye
    | EndConversation
    | Emit
)
