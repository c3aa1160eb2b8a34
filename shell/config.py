"""What one conversation is set up with (:class:`SessionConfig`): the prompt, turn-taking, hearing, speaking, tools."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from core.barge_in import BargeInPolicy
from core.call import CallConfig
from core.end_of_turn import EndOfTurnConfig
from core.endpointing import EndpointConfig
from core.flow import Flow
from core.language import LanguageConfig
from core.near_speech import NearSpeechConfig
from core.partials import PartialConfig
from core.reply_length import ReplyLength
from core.room import RoomConfig
from shell.denoising import Denoise


@dataclass(frozen=True)
class SessionConfig:
    system_prompt: str = (
        "You are a friendly voice assistant. Your replies are spoken aloud, so answer in one to three short "
        "sentences of plain text, with no lists, markdown or emoji."
    )
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    # The language spoken: held to one ("en", "es"...), or "auto": Whisper detects each utterance's
    # and the reply follows the last one (core/language.py).
    language: LanguageConfig = field(default_factory=LanguageConfig)
    # The end-of-turn model decides when the person's turn is over, and silence alone
    # only after its max_wait_s (None: silence alone, endpoint.hangover_s, as before it;
    # --turn-detector silence). The engines must have the model loaded (EngineConfig.smart_turn).
    end_of_turn: EndOfTurnConfig | None = field(default_factory=EndOfTurnConfig)
    partials: PartialConfig = field(default_factory=PartialConfig)
    # A reply said aloud stops after a few sentences unless the person asked for detail.
    reply_length: ReplyLength = field(default_factory=ReplyLength)
    partials_enabled: bool = True
    barge_in: BargeInPolicy = field(default_factory=BargeInPolicy)
    # Speech far under the person's own level (a TV, someone across the room) is not a turn.
    near_speech: NearSpeechConfig = field(default_factory=NearSpeechConfig)
    # A room that talks on (babble, music) is not the person: their speech must stand out of it.
    room: RoomConfig = field(default_factory=RoomConfig)
    echo_cancel: bool = True  # remove the assistant's own voice from the microphone
    # Noise suppression after the echo canceller (shell/denoising.py): "rnnoise" cleans what the VAD
    # hears (both its views), and with denoise_asr what Whisper and Smart Turn hear too.
    denoise: Denoise = "off"
    denoise_asr: bool = False
    # What the ASR (and Smart Turn) hear with echo_cancel: "linear", the echo the
    # reference explains subtracted (SpeexDSP), which keeps the onset of speech over
    # a reply; "suppressed", AEC3's output, as the VAD hears it (before issue 15).
    asr_audio: Literal["linear", "suppressed"] = "linear"
    # Whisper's window for the checks of speech over a reply (core/barge_in.py): "full" (30 s:
    # invents fewer words in noise) or "short" (the engine's pad: ~4x less work, so a barge-in is
    # decided sooner when the engines are busy).
    interruption_check_window: Literal["full", "short"] = "short"
    final_tail_s: float = 0.1  # audio after the last voiced frame given to the final pass
    # Silence after which the final pass starts, before the endpoint (None: at the endpoint).
    # At least final_tail_s, so the pass has its tail.
    early_final_s: float | None = 0.128
    # Silences inside an utterance longer than this are shortened to it in what Whisper hears
    # (core/audio.py, shorten_pauses); None: as they were.
    asr_max_pause_s: float | None = 0.3
    # The first chunk of a reply may end before a conjunction once it has this many words (None: never).
    first_phrase_min_words: int | None = 5
    # Start the reply on the early final, before the endpoint, unheard until the endpoint confirms
    # its transcript (Engines.speculation_budget caps them over all sessions); needs early_final_s.
    speculate: bool = True
    # Tools (when the session is given some): how many times one reply may ask the model with
    # them before it must answer in words, and what is said once when they keep it quiet.
    # One: Qwen2.5-Coder-0.5B, offered the tools again with a result, calls again (an empty
    # call, or end_conversation) instead of answering; a larger model may chain calls with more.
    max_tool_rounds: int = 1
    client_tool_timeout_s: float = 30.0  # a call the client runs (Realtime): its output within this
    # Added to the system prompt when there are tools: a 0.5B model answered a tool's result
    # with JSON ({"response_type": "text"}) or with "This response indicates that ...", and
    # called one for chat and facts more often without the first sentence (python -m voice.bench tools).
    tools_prompt: str = (
        "Call a tool only when the request cannot be answered without it; answer anything else (chat, jokes,"
        " facts, advice) in words. When a tool gives you a result, tell the person the answer in one short"
        " spoken sentence of plain words."
    )
    # A goodbye from the person ("Thank you, goodbye.") ends the conversation once its reply has been
    # said, where the agent can end one: a phone call, or an agent offered the end_conversation tool.
    end_on_goodbye: bool = True
    filler: str | None = "One moment."
    filler_delay_s: float = 1.0
    # A phone call: a greeting before the caller speaks, and what is done when the line goes quiet (None: not a call).
    call: CallConfig | None = None
    # The agent's steps (--agent FILE; core/flow.py): each step's instructions, tools and functions
    # in place of system_prompt (None: one prompt, every tool offered).
    flow: Flow | None = None
