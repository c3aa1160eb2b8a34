"""The turn-taking core, driven by scripted events (no engines, no audio)."""

from __future__ import annotations

from typing import TypeVar

from voice.core.events import (
    AsrFinal,
    Backchannel,
    BargeIn,
    Event,
    InterruptionCheck,
    LlmFirstToken,
    PlaybackEnd,
    PlaybackPaused,
    PlaybackStart,
    PlaybackStopped,
    ResponseStart,
    SpeechEnd,
    SpeechStart,
    Truncate,
    TtsChunk,
    TurnEnd,
)
from voice.core.history import INTERRUPTED_MARKER
from voice.core.ledger import Word
from voice.core.turns import (
    BargeInPolicy,
    CancelResponse,
    CheckInterruption,
    Conversation,
    Emit,
    PausePlayback,
    ResumePlayback,
    StartResponse,
    State,
    Synthesize,
    TranscribeFinal,
)

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
