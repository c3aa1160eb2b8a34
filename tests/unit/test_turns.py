"""The turn-taking core, driven by scripted events (no engines, no audio)."""

from __future__ import annotations

from typing import TypeVar

import pytest

from core.barge_in import BargeInPolicy, echo_similarity, tokens, without_echo_lead
from core.budget import Budget
from core.commands import (
    CancelResponse,
    CheckInterruption,
    CommitSpeculation,
    DiscardSpeculation,
    Emit,
    PausePlayback,
    ResumePlayback,
    StartResponse,
    Synthesize,
    TranscribeFinal,
)
from core.events import (
    AsrFinal,
    Backchannel,
    BargeIn,
    Event,
    InterruptionCheck,
    LlmDone,
    LlmFirstToken,
    PlaybackEnd,
    PlaybackPaused,
    PlaybackStart,
    PlaybackStopped,
    ResponseStart,
    SpeculativeCommit,
    SpeculativeDiscard,
    SpeculativeStart,
    SpeechEnd,
    SpeechStart,
    Truncate,
    TtsChunk,
    TurnEnd,
)
from core.floor import State
from core.flow import Flow, FlowRun, Step, Transition
from core.history import INTERRUPTED_MARKER
from core.language import language
from core.ledger import Word
from core.turns import Conversation

E = TypeVar("E", bound=Event)


def emitted(commands) -> list[type[Event]]:
    return [type(c.event) for c in commands if isinstance(c, Emit)]


def events(kind: type[E], commands) -> list[E]:
    return [c.event for c in commands if isinstance(c, Emit) and isinstance(c.event, kind)]


def of(kind, commands):
    return [c for c in commands if isinstance(c, kind)]


def answer_one(conv: Conversation, text="what time is it", t0=0.0) -> int:
    conv.speech_started(t0 + 0.1, t0 + 0.35)
    (tf,) = of(TranscribeFinal, conv.speech_ended(t0 + 1.0, t0 + 1.5))
    (start,) = of(StartResponse, conv.transcript_final(tf.utterance, text, tf.onset, tf.end, t0 + 1.6))
    return start.response


def test_a_full_turn():
    conv = Conversation("be brief")
    assert conv.state is State.LISTENING
    cmds = conv.speech_started(0.1, 0.35)
    assert emitted(cmds) == [SpeechStart] and conv.state is State.USER_SPEAKING
    cmds = conv.speech_ended(1.0, 1.5)
    (tf,) = of(TranscribeFinal, cmds)
    assert (tf.onset, tf.end) == (0.1, 1.0) and conv.state is State.THINKING
    cmds = conv.transcript_final(tf.utterance, " what time is it ", 0.1, 1.0, 1.6)
    (start,) = of(StartResponse, cmds)
    assert start.messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "what time is it"},
    ]
    r = start.response
    assert emitted(conv.llm_delta(r, "It is", 1.7)) == [LlmFirstToken]
    (syn,) = of(Synthesize, conv.llm_delta(r, " noon. And", 1.8))
    assert syn.text == "It is noon."
    assert emitted(
        conv.tts_audio(
            r, syn.chunk, "It is noon.", 100, [Word("It", 20), Word("is", 50), Word("noon.", 100)], 1.9, True
        )
    ) == [TtsChunk]
    conv.tts_done(r, syn.chunk, 1.9)
    assert emitted(conv.played(60, 2.0)) == [PlaybackStart] and conv.state is State.SPEAKING
    (syn2,) = of(Synthesize, conv.llm_done(r, 2.0))
    assert syn2.text == "And"
    conv.tts_audio(r, syn2.chunk, "And", 40, [Word("And", 40)], 2.1, True)
    conv.tts_done(r, syn2.chunk, 2.1)
    assert conv.played(40, 2.1) == []  # 100 of 140 samples played
    assert emitted(conv.played(40, 2.2)) == [PlaybackEnd, TurnEnd]
    assert conv.state is State.LISTENING
    assert [(t.role, t.text) for t in conv.history.turns] == [
        ("user", "what time is it"),
        ("assistant", "It is noon. And"),
    ]
    assert conv.history.turns[1].generated_text == "It is noon. And"


def test_empty_final_stores_nothing_and_goes_back_to_listening():
    conv = Conversation()
    conv.speech_started(0.0, 0.3)
    (tf,) = of(TranscribeFinal, conv.speech_ended(0.5, 1.0))
    cmds = conv.transcript_final(tf.utterance, "", 0.0, 0.5, 1.1)
    assert of(StartResponse, cmds) == [] and conv.state is State.LISTENING
    assert conv.history.turns == []


def test_a_turn_is_not_stored_before_its_audio_was_played():
    conv = Conversation()
    r = answer_one(conv)
    (syn,) = of(Synthesize, conv.llm_delta(r, "Fine.", 1.7) + conv.llm_done(r, 1.8))
    conv.tts_audio(r, syn.chunk, "Fine.", 50, [Word("Fine.", 50)], 1.9, True)
    conv.tts_done(r, syn.chunk, 1.9)
    assert [t.role for t in conv.history.turns] == ["user"]
    conv.played(49, 2.0)
    assert [t.role for t in conv.history.turns] == ["user"]
    conv.played(1, 2.1)
    assert [t.role for t in conv.history.turns] == ["user", "assistant"]


def speaking(conv: Conversation, text="It is noon. The sun is high.", played=0):
    """A reply in flight: all of ``text`` synthesized, ``played`` samples out."""
    r = answer_one(conv)
    syn = of(Synthesize, conv.llm_delta(r, text, 1.7) + conv.llm_done(r, 1.8))
    for s in syn:
        words = s.text.split()
        conv.tts_audio(
            r, s.chunk, s.text, 100 * len(words), [Word(w, 100 * (k + 1)) for k, w in enumerate(words)], 1.9, True
        )
        conv.tts_done(r, s.chunk, 1.9)
    if played:
        conv.played(played, 2.0)
    return r


def short_speech_over(conv: Conversation, end: float) -> TranscribeFinal:
    """The person speaks over the reply from 2.5 s to ``end``; its final pass is due."""
    conv.speech_started(2.5, 2.7)
    (tf,) = of(TranscribeFinal, conv.speech_ended(end, end + 0.5))
    return tf


def test_speech_over_the_reply_pauses_it_at_once():
    conv = Conversation()
    speaking(conv, played=150)
    cmds = conv.speech_started(2.5, 2.7)
    assert of(PausePlayback, cmds) and PlaybackPaused in emitted(cmds)
    assert conv.state is State.PAUSED
    assert conv.played(0, 2.72) == []  # nothing more is played, nothing finishes


def test_long_speech_is_a_barge_in_cut_to_what_was_heard():
    conv = Conversation(barge_in=BargeInPolicy(commit_s=0.6))
    r = speaking(conv, played=260)  # "It is" heard, "noon." more than half
    conv.speech_started(2.5, 2.7)
    conv.played(20, 2.72)  # the fade-out block is not counted before the pause
    assert conv.speech_continues(2.9) == []
    (check,) = of(CheckInterruption, conv.speech_continues(3.1))
    assert (check.onset, check.t) == (2.5, 3.1)
    assert conv.speech_continues(3.2) == []  # one check at a time
    cmds = conv.interruption_checked(check.utterance, "what about", 3.2)
    assert of(CancelResponse, cmds) == [CancelResponse(r)]
    assert emitted(cmds) == [InterruptionCheck, BargeIn, PlaybackStopped, Truncate, TurnEnd]
    (trunc,) = events(Truncate, cmds)
    assert trunc.text == "It is noon." and trunc.audio_end_ms == round(280 / 24)
    last = conv.history.turns[-1]
    assert (last.text, last.interrupted) == ("It is noon.", True)
    assert last.generated_text == "It is noon. The sun is high."
    assert conv.history.messages(None)[-1]["content"] == "It is noon." + INTERRUPTED_MARKER
    assert conv.response is None and conv.state is State.USER_SPEAKING
    # The interruption is then transcribed and answered as a new turn.
    (tf,) = of(TranscribeFinal, conv.speech_ended(3.5, 4.0))
    (start,) = of(StartResponse, conv.transcript_final(tf.utterance, "what about tomorrow", 2.5, 3.5, 4.1))
    assert start.messages[-2]["content"].endswith(INTERRUPTED_MARKER)
    assert start.messages[-1]["content"] == "what about tomorrow"


def test_an_onset_pauses_early_and_a_dropped_onset_resumes():
    conv = Conversation()
    r = speaking(conv, played=150)
    cmds = conv.speech_onset(2.5, 2.596)
    assert of(PausePlayback, cmds) and conv.state is State.PAUSED
    assert conv.speech_onset(2.6, 2.7) == []  # paused already
    cmds = conv.onset_dropped(2.9)
    assert of(ResumePlayback, cmds) and Backchannel not in emitted(cmds)
    assert conv.state is State.SPEAKING and conv.response.id == r
    assert [t.role for t in conv.history.turns] == ["user"]


def test_confirmed_speech_keeps_the_early_pause_and_what_was_heard_before_it():
    conv = Conversation()
    speaking(conv, played=120)  # "It" (and a fifth of "is")
    conv.speech_onset(2.5, 2.596)
    conv.played(20, 2.6)  # the fade-out: played, but too little to be heard as a word
    cmds = conv.speech_started(2.5, 2.692)
    assert of(PausePlayback, cmds) == []  # one pause, at the onset
    assert conv.onset_dropped(2.8) == []  # the speech is judged by its words now
    (check,) = of(CheckInterruption, conv.speech_continues(3.2))
    cmds = conv.interruption_checked(check.utterance, "stop please", 3.3)
    (trunc,) = events(Truncate, cmds)
    assert trunc.audio_end_ms == round(140 / 24)
    assert trunc.text == "It"


def test_an_onset_without_a_reply_does_nothing():
    conv = Conversation()
    assert conv.speech_onset(0.5, 0.6) == [] and conv.onset_dropped(0.9) == []
    assert conv.state is State.LISTENING


def test_a_backchannel_resumes_the_reply_and_is_not_a_turn():
    conv = Conversation()
    r = speaking(conv, played=150)
    tf = short_speech_over(conv, 2.9)
    cmds = conv.transcript_final(tf.utterance, "Uh-huh.", 2.5, 2.9, 3.5)
    assert of(ResumePlayback, cmds) and Backchannel in emitted(cmds)
    assert of(CancelResponse, cmds) == [] and of(StartResponse, cmds) == []
    assert conv.state is State.SPEAKING and conv.response.id == r
    assert TurnEnd in emitted(conv.played(10_000, 4.0))
    assert [t.role for t in conv.history.turns] == ["user", "assistant"]
    assert conv.history.turns[-1].text == "It is noon. The sun is high." and not conv.history.turns[-1].interrupted


def test_noise_with_no_words_resumes():
    conv = Conversation()
    speaking(conv, played=150)
    tf = short_speech_over(conv, 2.8)
    assert of(ResumePlayback, conv.transcript_final(tf.utterance, "", 2.5, 2.8, 3.4))


def test_words_whisper_doubts_do_not_cut_the_reply():
    # On noise and echo residual Whisper invents words, with a high no-speech probability.
    conv = Conversation()
    r = speaking(conv, played=150)
    tf = short_speech_over(conv, 2.9)
    cmds = conv.transcript_final(tf.utterance, "So you can see the", 2.5, 2.9, 3.5, no_speech_prob=0.54)
    assert of(ResumePlayback, cmds) and of(CancelResponse, cmds) == []
    assert conv.response.id == r and [t.role for t in conv.history.turns] == ["user"]


def test_speech_much_quieter_than_the_person_does_not_cut_the_reply():
    conv = Conversation()
    conv.speech_started(0.1, 0.35)
    (tf,) = of(TranscribeFinal, conv.speech_ended(1.0, 1.5, level_db=-20.0))
    r = conv.transcript_final(tf.utterance, "what time is it", 0.1, 1.0, 1.6)
    (start,) = of(StartResponse, r)
    assert conv.user_level_db == -20.0
    syn = of(Synthesize, conv.llm_delta(start.response, "It is noon.", 1.7) + conv.llm_done(start.response, 1.8))
    conv.tts_audio(start.response, syn[0].chunk, syn[0].text, 300, [Word("It", 100), Word("is", 200)], 1.9, True)
    conv.tts_done(start.response, syn[0].chunk, 1.9)
    conv.played(150, 2.0)
    conv.speech_started(2.5, 2.7)
    (tf,) = of(TranscribeFinal, conv.speech_ended(2.9, 3.4, level_db=-33.0))  # background talk, 13 dB down
    cmds = conv.transcript_final(tf.utterance, "No, stop it.", 2.5, 2.9, 3.5)
    assert of(ResumePlayback, cmds) and of(CancelResponse, cmds) == []
    assert conv.user_level_db == -20.0  # speech over the reply does not move the person's level
    conv.speech_started(3.0, 3.2)
    # Loud enough, but hardly above what the microphone hears during the reply (noise, echo residual).
    (tf,) = of(TranscribeFinal, conv.speech_ended(3.4, 3.5, level_db=-25.0, background_db=-33.0))
    assert of(ResumePlayback, conv.transcript_final(tf.utterance, "I'm scared.", 3.0, 3.4, 3.6))
    conv.speech_started(3.6, 3.8)
    (tf,) = of(TranscribeFinal, conv.speech_ended(4.0, 4.5, level_db=-24.0, background_db=-60.0))  # the person
    assert of(CancelResponse, conv.transcript_final(tf.utterance, "No, stop it.", 3.6, 4.0, 4.6))


def test_a_short_stop_word_is_a_barge_in():
    conv = Conversation()
    r = speaking(conv, played=150)
    tf = short_speech_over(conv, 2.9)
    cmds = conv.transcript_final(tf.utterance, "Stop.", 2.5, 2.9, 3.5)
    assert of(CancelResponse, cmds) == [CancelResponse(r)]
    assert of(StartResponse, cmds)  # "Stop." is itself answered


def test_long_noise_keeps_the_reply_paused_but_never_cuts_it():
    conv = Conversation(barge_in=BargeInPolicy(commit_s=0.6))
    speaking(conv, played=150)
    conv.speech_started(2.5, 2.7)
    (check,) = of(CheckInterruption, conv.speech_continues(3.1))
    assert of(CancelResponse, conv.interruption_checked(check.utterance, "", 3.2)) == []
    assert conv.speech_continues(3.5) == []  # the next check is due after another 0.6 s of speech
    (check,) = of(CheckInterruption, conv.speech_continues(3.7))
    assert of(CancelResponse, conv.interruption_checked(check.utterance, "uh", 3.8)) == []
    (tf,) = of(TranscribeFinal, conv.speech_ended(4.0, 4.5))
    assert of(ResumePlayback, conv.transcript_final(tf.utterance, "", 2.5, 4.0, 4.6))


def test_nothing_heard_stores_no_assistant_turn():
    conv = Conversation()
    speaking(conv, played=0)  # still thinking: nothing played
    conv.speech_started(2.0, 2.2)
    (check,) = of(CheckInterruption, conv.speech_continues(2.7))
    cmds = conv.interruption_checked(check.utterance, "tell me more", 2.8)
    (trunc,) = events(Truncate, cmds)
    assert trunc.text == "" and trunc.audio_end_ms == 0
    assert [t.role for t in conv.history.turns] == ["user"]


def test_llm_failure_ends_the_reply_with_what_was_said():
    conv = Conversation()
    r = answer_one(conv)
    conv.llm_delta(r, "Partly", 1.7)
    cmds = conv.llm_done(r, 1.8, error="LLMError: gone")
    (syn,) = of(Synthesize, cmds)
    conv.tts_audio(r, syn.chunk, "Partly", 10, [Word("Partly", 10)], 1.9, True)
    conv.tts_done(r, syn.chunk, 1.9)
    conv.played(10, 2.0)
    assert conv.history.turns[-1].text == "Partly"


def test_an_empty_reply_stores_no_assistant_turn():
    conv = Conversation()
    r = answer_one(conv)
    assert TurnEnd in emitted(conv.llm_done(r, 1.7))
    assert [t.role for t in conv.history.turns] == ["user"]
    assert conv.state is State.LISTENING


def test_events_for_a_stale_response_are_ignored():
    conv = Conversation()
    r = answer_one(conv)
    assert conv.llm_delta(r + 1, "x", 1.7) == []
    assert conv.tts_done(r + 1, 1, 1.7) == []


# -- the final pass started in the silence before the endpoint -----------------


def test_an_early_final_ready_at_the_endpoint_answers_at_once():
    conv = Conversation(early_final_s=0.128)
    conv.speech_started(0.1, 0.35)
    assert conv.speech_paused(1.0, 0.096, 1.1) == []  # not silent long enough yet
    (tf,) = of(TranscribeFinal, conv.speech_paused(1.0, 0.128, 1.13))
    assert tf.early and (tf.onset, tf.end) == (0.1, 1.0)
    assert conv.speech_paused(1.0, 0.16, 1.16) == []  # one pass per pause
    assert conv.early_transcript(tf.utterance, 1.0, "what time is it", 1.4) == []  # not the endpoint yet
    cmds = conv.speech_ended(1.0, 1.5)
    assert of(TranscribeFinal, cmds) == []
    assert emitted(cmds) == [SpeechEnd, AsrFinal, ResponseStart] and of(StartResponse, cmds)
    assert conv.history.turns[-1].text == "what time is it"


def test_an_early_final_still_running_at_the_endpoint_becomes_the_final():
    conv = Conversation(early_final_s=0.128)
    conv.speech_started(0.1, 0.35)
    (tf,) = of(TranscribeFinal, conv.speech_paused(1.0, 0.128, 1.13))
    assert of(TranscribeFinal, conv.speech_ended(1.0, 1.5)) == []
    assert of(StartResponse, conv.early_transcript(tf.utterance, 1.0, "what time is it", 1.9))


def test_speech_after_an_early_final_drops_it():
    conv = Conversation(early_final_s=0.128)
    conv.speech_started(0.1, 0.35)
    (early,) = of(TranscribeFinal, conv.speech_paused(1.0, 0.128, 1.13))
    conv.speech_continues(1.25)  # "what time ... is it"
    assert conv.early_transcript(early.utterance, 1.0, "what time", 1.4) == []
    (tf,) = of(TranscribeFinal, conv.speech_ended(1.8, 2.3))
    assert not tf.early and tf.end == 1.8
    assert of(StartResponse, conv.transcript_final(tf.utterance, "what time is it", 0.1, 1.8, 2.9))
    assert [t.text for t in conv.history.turns] == ["what time is it"]


def test_a_stale_early_pass_in_flight_holds_back_the_next_one():
    conv = Conversation(early_final_s=0.128)
    conv.speech_started(0.1, 0.35)
    (early,) = of(TranscribeFinal, conv.speech_paused(1.0, 0.128, 1.13))
    conv.speech_continues(1.25)
    assert conv.speech_paused(1.8, 0.128, 1.93) == []  # the recognizer is still busy with the stale pass
    conv.early_transcript(early.utterance, 1.0, "what time", 2.0)
    (again,) = of(TranscribeFinal, conv.speech_paused(1.8, 0.16, 2.0))
    assert again.early and again.end == 1.8


def test_a_failed_early_final_after_the_endpoint_asks_for_the_endpoint_pass():
    conv = Conversation(early_final_s=0.128)
    conv.speech_started(0.1, 0.35)
    (early,) = of(TranscribeFinal, conv.speech_paused(1.0, 0.128, 1.13))
    conv.speech_ended(1.0, 1.5)
    (tf,) = of(TranscribeFinal, conv.early_failed(early.utterance, 1.0))
    assert not tf.early and tf.end == 1.0


def test_no_early_final_when_disabled():
    conv = Conversation(early_final_s=None)
    conv.speech_started(0.1, 0.35)
    assert conv.speech_paused(1.0, 0.4, 1.4) == []
    assert of(TranscribeFinal, conv.speech_ended(1.0, 1.5))


# -- speculation: the reply started on the early final, before the endpoint -----------------


def speculating(conv: Conversation, text: str = "what time is it", end: float = 1.0) -> StartResponse:
    """The person said ``text`` up to ``end``; 128 ms into the silence its early final is in."""
    conv.speech_started(0.1, 0.35)
    (early,) = of(TranscribeFinal, conv.speech_paused(end, 0.128, end + 0.13))
    cmds = conv.early_transcript(early.utterance, end, text, end + 0.2)
    (start,) = of(StartResponse, cmds)
    assert start.speculative and emitted(cmds) == [SpeculativeStart]
    return start


def test_a_speculative_reply_is_held_back_then_committed_at_the_endpoint():
    budget = Budget()
    conv = Conversation("be brief", speculation=budget)
    start = speculating(conv)
    r = start.response
    assert start.messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "what time is it"},
    ]
    assert budget.in_flight == 1 and conv.response is None and conv.state is State.USER_SPEAKING
    # Generated and its first chunk synthesized, silently: no event, nothing stored, nothing else synthesized.
    cmds = conv.llm_delta(r, "It is noon. And", 1.25)
    (syn,) = of(Synthesize, cmds)
    assert syn.text == "It is noon." and emitted(cmds) == []
    assert conv.tts_audio(r, syn.chunk, "It is noon.", 300, [Word("It", 100), Word("is", 200)], 1.26, True) == []
    assert conv.tts_done(r, syn.chunk, 1.26) == []
    assert conv.llm_delta(r, " then lunch.", 1.27) == [] and conv.llm_done(r, 1.28) == []  # chunk 2 waits
    assert conv.played(100, 1.3) == [] and conv.history.turns == []
    # The endpoint, on that transcript: the reply it is, its held events with the endpoint's time.
    cmds = conv.speech_ended(1.0, 1.5)
    assert of(TranscribeFinal, cmds) == []
    assert emitted(cmds) == [
        SpeechEnd,
        AsrFinal,
        SpeculativeCommit,
        ResponseStart,
        LlmFirstToken,
        TtsChunk,
        LlmDone,
    ]
    assert {e.t for e in events(Event, cmds)} == {1.5}
    (commit,) = events(SpeculativeCommit, cmds)
    assert (commit.response, commit.ready, commit.tokens) == (r, True, 2)  # a token a delta here
    assert of(CommitSpeculation, cmds) == [CommitSpeculation(r)]
    assert [s.text for s in of(Synthesize, cmds)] == ["And then lunch."]
    assert of(StartResponse, cmds) == []  # the request already runs
    assert budget.in_flight == 0 and conv.response.id == r and conv.state is State.THINKING
    assert [(t.role, t.text) for t in conv.history.turns] == [("user", "what time is it")]
    # From here it is the reply: played, then stored.
    (syn2,) = of(Synthesize, cmds)
    conv.tts_audio(r, syn2.chunk, syn2.text, 100, [Word("And", 50), Word("then", 80), Word("lunch.", 100)], 1.5, True)
    conv.tts_done(r, syn2.chunk, 1.5)
    assert emitted(conv.played(300, 1.52)) == [PlaybackStart]
    assert emitted(conv.played(100, 1.6)) == [PlaybackEnd, TurnEnd]
    assert conv.history.turns[-1].text == "It is noon. And then lunch."


def test_a_committed_reply_cut_before_it_played_was_heard_not_at_all():
    """The ledger of a speculative reply counts its audio synthesized ahead as queued, never as played."""
    conv = Conversation(speculation=Budget())
    r = speculating(conv).response
    (syn,) = of(Synthesize, conv.llm_delta(r, "It is noon. And", 1.25))
    conv.tts_audio(r, syn.chunk, "It is noon.", 300, [Word("It", 100), Word("is", 200), Word("noon.", 300)], 1.3, True)
    conv.speech_ended(1.0, 1.5)
    conv.speech_started(1.52, 1.7)  # before a sample of it was played
    (check,) = of(CheckInterruption, conv.speech_continues(2.2))
    cmds = conv.interruption_checked(check.utterance, "no, tomorrow please", 2.3)
    (trunc,) = events(Truncate, cmds)
    assert (trunc.response, trunc.audio_end_ms, trunc.text) == (r, 0, "")
    assert [t.role for t in conv.history.turns] == ["user"]


def test_the_endpoint_before_the_first_token_commits_and_the_reply_goes_on():
    conv = Conversation(speculation=Budget())
    r = speculating(conv).response
    cmds = conv.speech_ended(1.0, 1.5)
    (commit,) = events(SpeculativeCommit, cmds)
    assert (commit.ready, commit.tokens) == (False, 0)
    assert LlmFirstToken not in emitted(cmds) and of(CommitSpeculation, cmds)
    # The first token comes after the endpoint: the usual reply from there on.
    cmds = conv.llm_delta(r, "Noon.", 1.7)
    assert emitted(cmds) == [LlmFirstToken] and events(LlmFirstToken, cmds)[0].t == 1.7
    cmds = conv.llm_done(r, 1.8)
    assert emitted(cmds) == [LlmDone] and [s.text for s in of(Synthesize, cmds)] == ["Noon."]


def test_speech_after_the_early_final_discards_the_speculation_silently_and_the_next_one_answers():
    budget = Budget()
    conv = Conversation(speculation=budget)
    a = speculating(conv, "what time").response
    (syn,) = of(Synthesize, conv.llm_delta(a, "It is noon. Lunch", 1.25))
    conv.tts_audio(a, syn.chunk, "It is noon.", 300, [Word("It", 300)], 1.26, True)
    # The person goes on: the speculation is stale. Its request is aborted, unheard, unstored.
    cmds = conv.speech_continues(1.3)
    assert of(DiscardSpeculation, cmds) == [DiscardSpeculation(a)] and of(PausePlayback, cmds) == []
    (discard,) = events(SpeculativeDiscard, cmds)
    assert (discard.response, discard.reason, discard.tokens) == (a, "speech", 1)
    assert budget.in_flight == 0 and conv.speculation is None
    # What was still on its way for it counts for nothing.
    assert conv.llm_delta(a, " is ready.", 1.31) == [] and conv.llm_done(a, 1.32) == []
    assert conv.tts_done(a, syn.chunk, 1.33) == []
    # The next pause: a new early final, a new speculation (one at a time), committed at the endpoint.
    (early,) = of(TranscribeFinal, conv.speech_paused(1.8, 0.128, 1.93))
    cmds = conv.early_transcript(early.utterance, 1.8, "what time is it", 2.0)
    (b,) = of(StartResponse, cmds)
    assert b.speculative and b.response != a and b.messages[-1]["content"] == "what time is it"
    cmds = conv.speech_ended(1.8, 2.3)
    assert events(SpeculativeCommit, cmds)[0].response == b.response
    assert [t.text for t in conv.history.turns] == ["what time is it"]


def test_speech_over_a_speculative_reply_never_pauses_or_cuts_it():
    """It is not the reply yet: the person holds the floor, and their onset is no barge-in."""
    conv = Conversation(speculation=Budget())
    r = speculating(conv).response
    conv.llm_delta(r, "It is noon.", 1.25)
    assert conv.speech_onset(1.3, 1.4) == [] and conv.state is State.USER_SPEAKING
    cmds = conv.speech_continues(1.4)
    assert {type(c) for c in cmds} == {DiscardSpeculation, Emit} and emitted(cmds) == [SpeculativeDiscard]


def test_an_endpoint_for_more_speech_than_the_early_final_heard_discards():
    conv = Conversation(speculation=Budget())
    r = speculating(conv).response
    cmds = conv.speech_ended(1.2, 1.7)  # the VAD's end moved on: the transcript is of less than the turn
    assert of(DiscardSpeculation, cmds) == [DiscardSpeculation(r)]
    (tf,) = of(TranscribeFinal, cmds)
    assert tf.end == 1.2 and not tf.early
    cmds = conv.transcript_final(tf.utterance, "what time is it now", 0.1, 1.2, 1.9)
    (start,) = of(StartResponse, cmds)
    assert not start.speculative and start.response != r


def test_a_speculation_asked_on_a_conversation_that_changed_since_is_asked_again():
    """A client truncated the previous reply after the speculation started: its prompt is not the turn's."""
    conv = Conversation(speculation=Budget())
    first = speaking(conv, "It is noon. The sun is high.", played=10_000)
    assert conv.response is None
    conv.speech_started(5.1, 5.35)
    (early,) = of(TranscribeFinal, conv.speech_paused(6.0, 0.128, 6.13))
    (spec,) = of(StartResponse, conv.early_transcript(early.utterance, 6.0, "and tomorrow", 6.2))
    conv.truncate(first, 5, 6.3)  # 120 samples: "It"
    cmds = conv.speech_ended(6.0, 6.5)
    (discard,) = events(SpeculativeDiscard, cmds)
    assert (discard.response, discard.reason) == (spec.response, "transcript")
    (start,) = of(StartResponse, cmds)
    assert not start.speculative and start.messages[-2] == {
        "role": "assistant",
        "content": "It" + INTERRUPTED_MARKER,
    }


def test_a_failed_speculative_request_is_discarded_and_the_endpoint_asks_again():
    budget = Budget()
    conv = Conversation(speculation=budget)
    r = speculating(conv).response
    cmds = conv.llm_done(r, 1.3, error="LLMError: gone")
    assert events(SpeculativeDiscard, cmds)[0].reason == "failed" and budget.in_flight == 0
    (start,) = of(StartResponse, conv.speech_ended(1.0, 1.5))
    assert not start.speculative and start.response != r


def test_an_empty_speculative_reply_ends_at_the_commit():
    conv = Conversation(speculation=Budget())
    r = speculating(conv).response
    assert conv.llm_done(r, 1.3) == []
    cmds = conv.speech_ended(1.0, 1.5)
    assert emitted(cmds)[-2:] == [LlmDone, TurnEnd] and conv.response is None
    assert [t.role for t in conv.history.turns] == ["user"] and conv.state is State.LISTENING


def test_the_session_ending_discards_the_speculation_and_stores_nothing():
    conv = Conversation(speculation=Budget())
    r = speculating(conv).response
    cmds = conv.end(1.2)
    assert of(DiscardSpeculation, cmds) == [DiscardSpeculation(r)]
    assert events(SpeculativeDiscard, cmds)[0].reason == "closed" and conv.history.turns == []


def test_speculation_is_budgeted_over_the_sessions_sharing_the_engines():
    budget = Budget(max_in_flight=1)
    a, b = Conversation(speculation=budget), Conversation(speculation=budget)
    speculating(a)
    b.speech_started(0.1, 0.35)
    (early,) = of(TranscribeFinal, b.speech_paused(1.0, 0.128, 1.13))
    assert b.early_transcript(early.utterance, 1.0, "hello there", 1.2) == []  # skipped, not queued
    (start,) = of(StartResponse, b.speech_ended(1.0, 1.5))  # b's reply starts at its endpoint, as without
    assert not start.speculative
    a.speech_ended(1.0, 1.5)
    assert budget.in_flight == 0


def test_no_speculation_when_off_over_a_reply_or_without_words():
    conv = Conversation()  # no budget: off
    conv.speech_started(0.1, 0.35)
    (early,) = of(TranscribeFinal, conv.speech_paused(1.0, 0.128, 1.13))
    assert conv.early_transcript(early.utterance, 1.0, "what time is it", 1.2) == []
    conv = Conversation(speculation=Budget())
    conv.speech_started(0.1, 0.35)
    (early,) = of(TranscribeFinal, conv.speech_paused(1.0, 0.128, 1.13))
    assert conv.early_transcript(early.utterance, 1.0, " ", 1.2) == []
    conv = Conversation(speculation=Budget())
    speaking(conv, played=150)
    conv.speech_started(2.5, 2.7)  # over the reply: judged as an interruption, not speculated on
    (early,) = of(TranscribeFinal, conv.speech_paused(3.5, 0.128, 3.63))
    assert conv.early_transcript(early.utterance, 3.5, "what about tomorrow", 3.8) == []


# -- nothing the person says is lost ---------------------------------------------------------


def test_speech_over_a_reply_not_yet_heard_is_judged_without_the_replys_words():
    """The reply's words discount speech over it only once they could have been played (echo).
    Here the LLM has repeated the person's words, but none of its audio exists yet."""
    conv = Conversation()
    r = answer_one(conv, "for the twentieth time that")
    conv.llm_delta(r, "The two men shook hands. They", 1.7)  # synthesis asked, no audio yet
    cmds = conv.speech_started(1.9, 2.1)
    assert of(PausePlayback, cmds) and conv.state is State.PAUSED
    (tf,) = of(TranscribeFinal, conv.speech_ended(3.0, 3.5))
    cmds = conv.transcript_final(tf.utterance, "evening the two men shook hands", 1.9, 3.0, 3.6)
    assert of(CancelResponse, cmds) == [CancelResponse(r)]
    (start,) = of(StartResponse, cmds)
    assert start.messages[-1]["content"] == "evening the two men shook hands"
    assert [(t.role, t.text) for t in conv.history.turns] == [
        ("user", "for the twentieth time that"),
        ("user", "evening the two men shook hands"),
    ]


def test_the_replys_own_words_heard_back_still_do_not_cut_it():
    conv = Conversation()
    speaking(conv, "It is noon. The sun is high.", played=600)  # played up to "is"
    tf = short_speech_over(conv, 2.9)
    assert of(ResumePlayback, conv.transcript_final(tf.utterance, "noon, the sun", 2.5, 2.9, 3.5))


def test_words_the_reply_has_not_played_yet_are_the_persons_own():
    """The person goes on just as the reply starts ("Wait," ended the turn; "four people" comes
    0.2 s into the read-back): the reply's words still to play cannot be their echo, so "for",
    which it says later, does not make "For people." a one-word backchannel."""
    conv = Conversation()
    r = speaking(conv, "A table for 8 under Anderson, Saturday at wait. Shall I book it?", played=150)
    tf = short_speech_over(conv, 2.9)
    cmds = conv.transcript_final(tf.utterance, "For people.", 2.5, 2.9, 3.5)
    assert of(CancelResponse, cmds) == [CancelResponse(r)] and not of(ResumePlayback, cmds)


@pytest.mark.parametrize("heard", ["as they both look at each other", "the scene is it", "they begin speaking"])
def test_the_replys_own_voice_transcribed_with_slips_does_not_cut_it(heard):
    # What the echo canceller let through at a desk, as Whisper heard it (a recorded session).
    conv = Conversation()
    reply = "They began speaking as they both looked at each other. The scene is set off by them."
    speaking(conv, reply, played=1350)  # played up to "is"
    tf = short_speech_over(conv, 2.9)
    cmds = conv.transcript_final(tf.utterance, heard, 2.5, 2.9, 3.5)
    assert of(ResumePlayback, cmds) and of(CancelResponse, cmds) == []


@pytest.mark.parametrize(
    ("heard", "echo"),
    [
        ("lips as they both look at each other", True),
        ("the scene is it", True),
        ("and begins", True),
        ("bombs", False),  # one word: the word count decides
        ("wait what about the weather tomorrow", False),
        ("hold on that is not what I asked", False),
        ("tell me about the room instead", False),
    ],
)
def test_echo_similarity_against_the_reply(heard, echo):
    reply = tokens(
        "The two men exchanged their palms and began speaking into each other's lips as they both looked at"
        " each other across the room. The scene is set off by them shaking"
    )
    assert (echo_similarity(tokens(heard), reply) >= BargeInPolicy().min_echo_similarity) is echo


@pytest.mark.parametrize(
    ("heard", "kept"),
    [
        # issue 44's grid, axb at -6 dB: the reply's first words, in the canceller's residual, before the person's
        ("I'm sorry. God bless them. I hope I'll go on seeing them forever.", "God bless them. I hope I'll go on"),
        ("I'm sorry God bless them.", "God bless them."),
        ("God bless them. I'm sorry.", "God bless them. I'm sorry."),  # only a lead is the echo's
        ("Sorry. God bless them.", "Sorry. God bless them."),  # one word: it may be the person's
        ("I'm sorry.", "I'm sorry."),  # all of it: the barge-in policy's to judge
    ],
)
def test_the_replys_words_that_lead_speech_over_it_are_not_the_persons(heard, kept):
    assert without_echo_lead(heard, "I'm sorry, I don't").startswith(kept)


def test_an_echo_lead_in_an_unspaced_script_is_four_characters_or_more():
    ja = language("ja")
    assert without_echo_lead("それにもう一つ、これには困ることが", "それにもう一つ", ja) == "これには困ることが"
    assert without_echo_lead("それは困ることが", "それにもう一つ", ja) == "それは困ることが"


def test_speech_that_cut_the_reply_is_stored_without_the_replys_words_it_began_with():
    conv = Conversation(barge_in=BargeInPolicy(commit_s=0.6), output_rate=200)  # a word a half second
    speaking(conv, text="It is noon. The sun is high and the sky is blue.", played=800)
    conv.speech_started(2.5, 2.7)
    (check,) = of(CheckInterruption, conv.speech_continues(3.1))
    assert of(CancelResponse, conv.interruption_checked(check.utterance, "high and what about", 3.2))
    (tf,) = of(TranscribeFinal, conv.speech_ended(3.5, 4.0))
    # "high and", played just before the onset, lead the transcript; "sun is", before them, are not in reach.
    (final,) = events(AsrFinal, conv.transcript_final(tf.utterance, "high and what about tomorrow", 2.5, 3.5, 4.1))
    assert final.text == "what about tomorrow"
    assert conv.history.turns[-1].text == "what about tomorrow"
    conv2 = Conversation(barge_in=BargeInPolicy(commit_s=0.6), output_rate=200)
    speaking(conv2, text="It is noon. The sun is high and the sky is blue.", played=800)
    conv2.speech_started(2.5, 2.7)
    (check,) = of(CheckInterruption, conv2.speech_continues(3.1))
    conv2.interruption_checked(check.utterance, "the sun what about", 3.2)
    (tf,) = of(TranscribeFinal, conv2.speech_ended(3.5, 4.0))
    (final,) = events(AsrFinal, conv2.transcript_final(tf.utterance, "the sun is what about it", 2.5, 3.5, 4.1))
    assert final.text == "the sun is what about it"


def test_a_stop_word_the_reply_did_not_say_cuts_it_even_among_its_words():
    policy = BargeInPolicy()
    reply = "as they both looked at each other"
    assert policy.interrupts("wait they both looked at each other", reply)
    assert not policy.interrupts("they both looked at each other", reply)


def test_speech_that_went_on_over_the_endpoint_holds_the_reply_before_it_plays():
    """The person spoke again while the turn's final was being made: the reply starts paused, and
    that speech is judged as speech over it. Words: it is cut unheard and they are answered."""
    conv = Conversation()
    conv.speech_started(0.1, 0.35)
    (tf1,) = of(TranscribeFinal, conv.speech_ended(1.0, 1.5))
    conv.speech_started(1.6, 1.8)  # the final of the first half is not in yet
    assert conv.state is State.THINKING and conv.response is None
    cmds = conv.transcript_final(tf1.utterance, "for the twentieth time that", 0.1, 1.0, 1.9)
    (first,) = of(StartResponse, cmds)
    assert of(PausePlayback, cmds) and events(PlaybackPaused, cmds)[0].utterance == 2
    assert conv.state is State.PAUSED
    syn = of(Synthesize, conv.llm_delta(first.response, "I see. Go on", 2.0))
    conv.tts_audio(first.response, syn[0].chunk, "I see.", 100, [Word("I", 50), Word("see.", 100)], 2.1, True)
    (tf2,) = of(TranscribeFinal, conv.speech_ended(3.0, 3.5))
    assert tf2.over_reply
    cmds = conv.transcript_final(tf2.utterance, "evening the two men shook hands", 1.6, 3.0, 3.6)
    assert of(CancelResponse, cmds) == [CancelResponse(first.response)]
    assert events(Truncate, cmds)[0].text == ""  # nothing of it was played: no assistant turn
    (second,) = of(StartResponse, cmds)
    assert [(t.role, t.text) for t in conv.history.turns] == [
        ("user", "for the twentieth time that"),
        ("user", "evening the two men shook hands"),
    ]
    assert second.messages[-2:] == [
        {"role": "user", "content": "for the twentieth time that"},
        {"role": "user", "content": "evening the two men shook hands"},
    ]


def test_a_backchannel_that_went_on_over_the_endpoint_lets_the_reply_play():
    conv = Conversation()
    conv.speech_started(0.1, 0.35)
    (tf1,) = of(TranscribeFinal, conv.speech_ended(1.0, 1.5))
    conv.speech_started(1.6, 1.8)
    (first,) = of(StartResponse, conv.transcript_final(tf1.utterance, "what time is it", 0.1, 1.0, 1.9))
    (tf2,) = of(TranscribeFinal, conv.speech_ended(2.0, 2.5))
    cmds = conv.transcript_final(tf2.utterance, "um", 1.6, 2.0, 2.6)
    assert of(ResumePlayback, cmds) and conv.response.id == first.response and conv.state is State.THINKING


def _going_on_as_the_reply_starts(conv: Conversation, played_before: int) -> int:
    """ "No." ends a turn at a breath; its reply starts, ``played_before`` samples of it play (a word
    a half second), and the person goes on at 2.0 s ("at eight"): the reply pauses on it."""
    r = answer_one(conv, "No.")
    syn = of(Synthesize, conv.llm_delta(r, "What would you like to change?", 1.7) + conv.llm_done(r, 1.8))
    words = syn[0].text.split()
    conv.tts_audio(
        r, syn[0].chunk, syn[0].text, 100 * len(words), [Word(w, 100 * (k + 1)) for k, w in enumerate(words)], 1.9, True
    )
    if played_before:
        conv.played(played_before, 1.9)
    assert of(PausePlayback, conv.speech_started(2.0, 2.2))
    return r


def test_one_word_said_before_the_reply_made_a_sound_is_the_person_going_on():
    """Speech that began before the reply played anything is neither a reaction to it nor its echo:
    "At 8." takes the floor (two words are needed over a reply heard, and digits count for nothing
    there), the reply is cut unheard, and both halves of what they said are answered."""
    conv = Conversation(output_rate=200)
    r = _going_on_as_the_reply_starts(conv, played_before=0)
    (tf,) = of(TranscribeFinal, conv.speech_ended(2.6, 2.9))
    # Whisper doubts so short an utterance (0.64 on "At 8." in the flows benchmark): as in a turn of its own, no matter.
    cmds = conv.transcript_final(tf.utterance, "At 8.", 2.0, 2.6, 3.0, no_speech_prob=0.64)
    assert of(CancelResponse, cmds) == [CancelResponse(r)] and not events(Backchannel, cmds)
    (second,) = of(StartResponse, cmds)
    assert [m["content"] for m in second.messages[-2:]] == ["No.", "At 8."]
    assert [(t.role, t.text) for t in conv.history.turns] == [("user", "No."), ("user", "At 8.")]
    assert events(ResponseStart, cmds)[0].text == "No. At 8."  # one turn, as an agent's flow reads it


def test_speech_that_began_within_a_vad_frame_of_the_replys_first_sample_went_on():
    conv = Conversation(output_rate=200)
    r = answer_one(conv, "No.")
    syn = of(Synthesize, conv.llm_delta(r, "What would you like to change?", 1.7) + conv.llm_done(r, 1.8))
    conv.tts_audio(r, syn[0].chunk, syn[0].text, 500, [Word("What", 100)], 1.9, True)
    conv.played(80, 1.98)  # the onset below is counted 20 ms after the first sample: the same breath
    conv.speech_started(2.0, 2.2)
    (tf,) = of(TranscribeFinal, conv.speech_ended(2.6, 2.9))
    cmds = conv.transcript_final(tf.utterance, "At 8.", 2.0, 2.6, 3.0)
    assert of(CancelResponse, cmds)
    # "What" played under their words until the pause: not heard as a reply, not stored.
    assert events(Truncate, cmds)[0].text == "" and [t.text for t in conv.history.turns] == ["No.", "At 8."]


@pytest.mark.parametrize("said", ["At 8.", "Mm-hmm.", "Thank you.", "Please."])
def test_a_word_said_once_the_reply_is_heard_or_one_that_adds_nothing_lets_it_go_on(said):
    """The same word after the reply's first word has played is a listener's; a backchannel or
    closing words said before it made a sound add nothing to the turn ("Yes, | thank you."): the
    reply resumes."""
    conv = Conversation(output_rate=200)
    heard = said == "At 8."
    r = _going_on_as_the_reply_starts(conv, played_before=150 if heard else 0)
    (tf,) = of(TranscribeFinal, conv.speech_ended(2.6, 2.9))
    cmds = conv.transcript_final(tf.utterance, said, 2.0, 2.6, 3.0)
    assert of(ResumePlayback, cmds) and not of(CancelResponse, cmds) and conv.response.id == r
    assert events(Backchannel, cmds)[0].text == said


def test_a_number_counts_as_a_word_only_for_speech_that_went_on():
    policy = BargeInPolicy()
    assert policy.interrupts("8.", went_on=True) and not policy.interrupts("8.")
    assert policy.interrupts("at eight", no_speech_prob=0.64, went_on=True)
    assert not policy.interrupts("at eight", no_speech_prob=0.64)
    assert not policy.interrupts("Mm-hmm.", went_on=True)
    assert not policy.interrupts("change", "What would you like to change?", went_on=True)  # its own word


def _read_back() -> tuple[Conversation, int, TranscribeFinal]:
    """An agent's read-back: "Sure." takes ``yes`` by its phrase and the goodbye starts; the person
    goes on before it makes a sound. The conversation, the goodbye's reply and the final to make."""
    flow = Flow(
        role="You book tables.",
        steps={
            "confirm": Step(
                "confirm",
                transitions=(
                    Transition("change", "confirm", "", when=("no", "make it", "instead")),
                    Transition("yes", "bye", "", when=("yes", "sure", "go ahead")),
                ),
            ),
            "bye": Step("bye", say="Goodbye!", end=True),
        },
        start="confirm",
    )
    conv = Conversation(output_rate=200, flow=FlowRun(flow))
    conv.speech_started(0.1, 0.35)
    (tf,) = of(TranscribeFinal, conv.speech_ended(1.0, 1.5))
    (start,) = events(ResponseStart, conv.transcript_final(tf.utterance, "Sure.", 0.1, 1.0, 1.6))
    r = start.response
    assert conv.response.heard_move == ("confirm", "yes")  # its goodbye is synthesized, not yet played
    conv.speech_started(2.0, 2.2)
    (tf,) = of(TranscribeFinal, conv.speech_ended(2.6, 2.9))
    return conv, r, tf


def test_words_said_on_that_take_the_transition_the_turn_took_let_the_reply_play():
    """ "Sure, | go ahead." at a read-back: the goodbye "Sure." started is the answer to all of it."""
    conv, r, tf = _read_back()
    cmds = conv.transcript_final(tf.utterance, "Go ahead.", 2.0, 2.6, 3.0)
    assert of(ResumePlayback, cmds) and not of(CancelResponse, cmds) and conv.response.id == r


@pytest.mark.parametrize("said", ["Go ahead, make it nine.", "Sure, at nine."])
def test_words_said_on_that_say_more_cut_the_reply(said):
    """Words beyond the transition's phrases are more than the turn said: another transition's ("make
    it"), or a detail after the turn's own last word, which Whisper may hear again ("Sure, at nine.")."""
    conv, r, tf = _read_back()
    cmds = conv.transcript_final(tf.utterance, said, 2.0, 2.6, 3.0)
    assert of(CancelResponse, cmds) == [CancelResponse(r)]
    assert events(ResponseStart, cmds)[0].text == f"Sure. {said}"


def _two_finals_pending_when_the_reply_starts(conv: Conversation) -> tuple[int, TranscribeFinal, TranscribeFinal]:
    """Three utterances ended before the first one's final came: the reply to it starts held for
    the last one, and the middle one's final waits for its turn."""
    finals = []
    for k in range(3):
        conv.speech_started(0.1 + k, 0.35 + k)
        finals += of(TranscribeFinal, conv.speech_ended(0.5 + k, 0.9 + k))
    (start,) = of(StartResponse, conv.transcript_final(finals[0].utterance, "what time is it", 0.1, 0.5, 3.0))
    assert conv.transcript_final(finals[1].utterance, "in London", 1.1, 1.5, 3.1) == [
        Emit(AsrFinal(3.1, text="in London", utterance=finals[1].utterance))
    ]
    return start.response, finals[1], finals[2]


def test_finals_that_waited_join_the_turn_that_cuts_the_reply():
    conv = Conversation()
    r, _, last = _two_finals_pending_when_the_reply_starts(conv)
    cmds = conv.transcript_final(last.utterance, "no, in Paris", 2.1, 2.5, 3.2)
    assert of(CancelResponse, cmds) == [CancelResponse(r)]
    (start,) = of(StartResponse, cmds)  # one reply to all that was said since
    assert [m["content"] for m in start.messages] == ["what time is it", "in London", "no, in Paris"]
    # What the reply answers: all of it, as the reply it cut was held before it made a sound.
    assert events(ResponseStart, cmds)[0].text == "what time is it in London no, in Paris"
    assert [t.text for t in conv.history.turns] == ["what time is it", "in London", "no, in Paris"]


def test_finals_not_answered_when_the_session_ends_are_kept():
    conv = Conversation()
    _, _, last = _two_finals_pending_when_the_reply_starts(conv)
    assert of(ResumePlayback, conv.transcript_final(last.utterance, "okay", 2.1, 2.5, 3.2))
    conv.end(3.5)
    assert [(t.role, t.text) for t in conv.history.turns] == [("user", "what time is it"), ("user", "in London")]


def test_words_that_cut_the_reply_are_kept_if_the_final_pass_finds_none():
    conv = Conversation(barge_in=BargeInPolicy(commit_s=0.6))
    r = speaking(conv, played=150)
    conv.speech_started(2.5, 2.7)
    (check,) = of(CheckInterruption, conv.speech_continues(3.1))
    assert of(CancelResponse, conv.interruption_checked(check.utterance, "wait a moment", 3.2)) == [CancelResponse(r)]
    (tf,) = of(TranscribeFinal, conv.speech_ended(3.3, 3.8))
    cmds = conv.transcript_final(tf.utterance, "", 2.5, 3.3, 3.9)
    assert events(AsrFinal, cmds)[0].text == "wait a moment"
    (start,) = of(StartResponse, cmds)
    assert start.messages[-1] == {"role": "user", "content": "wait a moment"}


# -- the closing partial: speculation before the early final ------------------------------------


def closing(conv: Conversation, text: str, end: float = 1.0) -> list:
    """The person spoke up to ``end``; 64 ms into the silence the partial model's words for it are in."""
    conv.speech_started(0.1, 0.35)
    conv.speech_paused(end, 0.032, end + 0.04)
    return conv.closing_partial(conv.utterance, end, text, end + 0.1)


def test_the_closing_partial_starts_the_speculation_and_the_early_final_keeps_it_on_the_same_words():
    conv = Conversation(speculation=Budget())
    (start,) = of(StartResponse, closing(conv, "What time is it"))
    assert start.speculative and conv.speculation.provisional
    (early,) = of(TranscribeFinal, conv.speech_paused(1.0, 0.128, 1.13))
    assert conv.early_transcript(early.utterance, 1.0, "What time is it?", 1.3) == []  # kept: the same words
    assert not conv.speculation.provisional
    cmds = conv.speech_ended(1.0, 1.5)
    (commit,) = events(SpeculativeCommit, cmds)
    assert commit.response == start.response
    assert [(t.role, t.text) for t in conv.history.turns] == [("user", "What time is it?")]  # as the final says it


def test_an_early_final_with_other_words_starts_the_speculation_again_on_its_own():
    conv = Conversation(speculation=Budget())
    (first,) = of(StartResponse, closing(conv, "Philip stills"))
    (early,) = of(TranscribeFinal, conv.speech_paused(1.0, 0.128, 1.13))
    cmds = conv.early_transcript(early.utterance, 1.0, "fill up steels", 1.3)
    assert of(DiscardSpeculation, cmds) == [DiscardSpeculation(first.response)]
    (again,) = of(StartResponse, cmds)
    assert again.speculative and again.messages[-1]["content"] == "fill up steels"
    assert not conv.speculation.provisional


def test_a_closing_partial_after_the_person_went_on_or_after_the_early_final_starts_nothing():
    conv = Conversation(speculation=Budget())
    conv.speech_started(0.1, 0.35)
    conv.speech_paused(1.0, 0.032, 1.04)
    conv.speech_continues(1.1)  # went on
    assert conv.closing_partial(conv.utterance, 1.0, "what time", 1.15) == []
    conv = Conversation(speculation=Budget())
    speculating(conv)  # the early final is in, and speculated
    assert conv.closing_partial(conv.utterance, 1.0, "what time is it", 1.3) == []
