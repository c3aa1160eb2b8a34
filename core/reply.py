"""The assistant's reply in flight, and the records the conversation keeps beside it.

A :class:`Reply` is one answer, from its LLM request to its last sample played: the text
generated, the chunks asked of the TTS, what was played (its ledger), and, in
:class:`ToolState`, its tool rounds. :class:`Hold` is the reply paused while speech over it
is judged. They hold state only; the rules that change them are the reply's course
(:mod:`core.reply_flow`), speech over it (:mod:`core.over_reply`), the person's
turn that starts it (:mod:`core.answer`) and the tool rounds' (:mod:`core.tool_rounds`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.commands import Command, Synthesize
from core.history import ToolStatus
from core.ledger import PlaybackLedger
from core.reply_length import ends_sentence
from core.sentences import SentenceGrouper
from core.tool_calls import ToolCall, ToolCallStream
from core.voices import chunk_language


@dataclass
class ToolState:
    """A reply's tool rounds: this round's calls as they stream, those whole (in order), those run
    and not finished, the results (call id -> status, what the model is told), whether the round's
    generation ended; and over the rounds, how many ran and were refused, and the filler."""

    round: int = 0
    calls: ToolCallStream = field(default_factory=ToolCallStream)
    round_calls: list[ToolCall] = field(default_factory=list)
    running: set[str] = field(default_factory=set)
    results: dict[str, tuple[ToolStatus, str]] = field(default_factory=dict)
    round_over: bool = False
    round_text_from: int = 0  # where this round's text begins in the reply's ``generated``
    round_ran: bool = False  # one of this round's calls ran (not all were refused)
    rounds_run: int = 0  # rounds before this one in which a call ran
    rounds_refused: int = 0  # ... in which every call was refused unrun
    offered: bool = False  # this round's request offered tools
    held_calls: list[ToolCall] = field(default_factory=list)  # speculative: run at the commit
    # When its calls went to their tools: from then until the answer with their results has words,
    # the person waits (for the tools, then for the model again); None: nobody waits on tools.
    since: float | None = None
    filler_said: bool = False
    ok_results: list[str] = field(default_factory=list)  # what the calls that ran ok returned, in order
    round_chunks: int = 0  # chunks of words this round's text has given
    result_said: bool = False  # a result was said in place of words that misread it (core/faithful.py)
    made_up: list[ToolCall] = field(default_factory=list)  # this round's calls dropped unrun (core/grounded.py)
    known_numbers: list[str] | None = None  # what this round's request held (core/faithful.py), read once
    steps_entered: int = 0  # the flow's steps entered when this reply last looked (core/flow.py)
    steps_moved: int = 0  # transitions this reply made
    step_call: bool = False  # this round is the call a step makes on entry (``call:``)
    hook: str = ""  # this round calls a hook of the flow's: on_enter, on_exit or on_user_turn ("": none)
    hooks_left: list[tuple[str, str]] = field(default_factory=list)  # (kind, tool) to call after it, in order
    turn_hooked: bool = False  # the person's turn was given to its hook already
    opening: bool = False  # the reply that opens the conversation in the start step (its on_enter first)
    say_result: bool = False  # the round's result is to be said word for word (a hook returned Say)
    hold_sound_on: bool = False  # the hold sound is playing while the reply waits (core/hold_sound.py)


@dataclass
class Reply:
    """The assistant reply in flight."""

    id: int
    user_text: str
    started: float
    grouper: SentenceGrouper
    ledger: PlaybackLedger = field(default_factory=PlaybackLedger)
    generated: str = ""
    tokens: int = 0  # generated so far (as the LLM reports them with each delta)
    llm_done: bool = False
    chunks_requested: int = 0
    chunks_done: int = 0
    chunk_texts: dict[int, str] = field(default_factory=dict)
    first_token_at: float | None = None
    playback_started_at: float | None = None
    # In an agent's flow: the step the person's words moved the reply from, and the transition their
    # phrases took there ("Sure." in confirm: confirmed), None if they took none.
    heard_move: tuple[str, str] | None = None
    # Speculative (started on the early final, before the endpoint) until committed:
    speculative: bool = False
    # Started on the pause's closing partial (the partial model's words), before the early final:
    # the early final keeps it if it says the same words, else it is started again on those.
    provisional: bool = False
    utterance: int = 0  # the utterance it answers
    end: float = 0.0  # where the speech its transcript heard ended
    messages: list[dict[str, Any]] = field(default_factory=list)  # what the LLM was asked (this round)
    held: list[str] = field(default_factory=list)  # chunks not sent to synthesis yet (all but the first)
    ready: list[int] = field(default_factory=list)  # chunks whose first audio came (tts_chunk held back)
    error: str | None = None  # how generation failed (llm_done held back)
    last_played_at: float | None = None  # when the speaker last played some of it
    tool: ToolState = field(default_factory=ToolState)
    language: str = "en"  # the language it is said in (the conversation's when it started)
    sentences_left: int | None = None  # it may say this many more (core/reply_length.py; None: all)
    sentences_said: int = 0

    def waiting_on_tools(self) -> bool:
        """Whether the person waits on the reply's tools (then on the model asked with their results),
        no other call being written and no words of the reply on their way to the speaker."""
        tool = self.tool
        writing = tool.calls.streaming and not tool.round_over  # another call: not quiet for long
        return tool.since is not None and not writing and self.chunks_done == self.chunks_requested

    def quiet_on_tools_s(self, t: float) -> float | None:
        """How long the reply has been silent at ``t`` while the person waits on its tools (None: they
        do not, or some of it is still to be played): what the filler and the hold sound wait for."""
        if not self.waiting_on_tools() or not self.ledger.all_played:
            return None
        since = self.tool.since
        assert since is not None
        return t - max(since, self.last_played_at or since)

    def synthesize(self, chunks: list[str]) -> list[Command]:
        """Ask the TTS for ``chunks``; a speculative reply holds back all but its first."""
        out: list[Command] = []
        for text in chunks:
            if self.sentences_left == 0:
                break  # said enough: the rest is neither synthesized, heard nor stored
            if ends_sentence(text):
                self.sentences_said += 1
                if self.sentences_left is not None:
                    self.sentences_left -= 1
            if self.speculative and self.chunks_requested:  # only the first chunk before the endpoint
                self.held.append(text)
                continue
            self.chunks_requested += 1
            self.chunk_texts[self.chunks_requested] = text
            out.append(Synthesize(self.id, self.chunks_requested, text, chunk_language(self.language, text)))
        return out


@dataclass
class Hold:
    """Playback paused on speech onset, while the speech is judged."""

    utterance: int | None  # None until the VAD confirms the speech
    onset: float
    paused_at: float
    played: int  # samples of the reply played when it paused
    checked_at: float = 0.0  # speech time (since onset) of the last words check
    checking: bool = False
    # The reply's words played in the speech's pre-roll and until the pause: what a loud echo's
    # residual may put before the person's first words in its transcript (core/barge_in.py).
    echo_lead: str = ""
    # The speech began before the reply made a sound, and took the floor (core/over_reply.py): what
    # played under it until the pause was not heard as a reply.
    went_on: bool = False

    def played_out(self, ledger: PlaybackLedger) -> int:
        """Samples of the held reply (its ``ledger``) the speaker has played by now: by the pause, and
        after it until the pause reached it (a fade; a client's or a device's buffer)."""
        return max(self.played, ledger.played)
