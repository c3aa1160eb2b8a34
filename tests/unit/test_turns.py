"""The turn-taking core, driven by scripted events (no engines, no audio)."""

from __future__ import annotations

from voice.ledger import Word
from voice.turns import Conversation, Emit, StartResponse, State, Synthesize, TranscribeFinal


def emitted(commands) -> list[str]:
    return [c.type for c in commands if isinstance(c, Emit)]


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
    assert emitted(cmds) == ["speech_start"] and conv.state is State.USER_SPEAKING
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
    assert emitted(conv.llm_delta(r, "It is", 1.7)) == ["llm_first_token"]
    (syn,) = of(Synthesize, conv.llm_delta(r, " noon. And", 1.8))
    assert syn.text == "It is noon."
    assert emitted(
        conv.tts_audio(
            r, syn.chunk, "It is noon.", 100, [Word("It", 20), Word("is", 50), Word("noon.", 100)], 1.9, True
        )
    ) == ["tts_chunk"]
    conv.tts_done(r, syn.chunk, 1.9)
    assert emitted(conv.played(60, 2.0)) == ["playback_start"] and conv.state is State.SPEAKING
    (syn2,) = of(Synthesize, conv.llm_done(r, 2.0))
    assert syn2.text == "And"
    conv.tts_audio(r, syn2.chunk, "And", 40, [Word("And", 40)], 2.1, True)
    conv.tts_done(r, syn2.chunk, 2.1)
    assert conv.played(40, 2.1) == []  # 100 of 140 samples played
    assert emitted(conv.played(40, 2.2)) == ["playback_end", "turn_end"]
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


def test_a_user_turn_during_the_reply_is_answered_after_it():
    conv = Conversation()
    r = answer_one(conv)
    conv.llm_delta(r, "One.", 1.7)
    conv.speech_started(2.0, 2.3)
    (tf,) = of(TranscribeFinal, conv.speech_ended(3.0, 3.5))
    assert of(StartResponse, conv.transcript_final(tf.utterance, "and then", 2.0, 3.0, 3.6)) == []
    (syn,) = of(Synthesize, conv.llm_done(r, 3.7))
    conv.tts_audio(r, syn.chunk, "One.", 10, [Word("One.", 10)], 3.8, True)
    conv.tts_done(r, syn.chunk, 3.8)
    (start,) = of(StartResponse, conv.played(10, 3.9))
    assert [m["content"] for m in start.messages] == ["what time is it", "One.", "and then"]


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
    assert "turn_end" in emitted(conv.llm_done(r, 1.7))
    assert [t.role for t in conv.history.turns] == ["user"]
    assert conv.state is State.LISTENING


def test_events_for_a_stale_response_are_ignored():
    conv = Conversation()
    r = answer_one(conv)
    assert conv.llm_delta(r + 1, "x", 1.7) == []
    assert conv.tts_done(r + 1, 1, 1.7) == []
