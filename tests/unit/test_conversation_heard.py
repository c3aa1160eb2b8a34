"""Conversation.heard: the hearing front end's output taken by the core itself, each edge dated as the
session dated it (a voiced frame by its own time, the others by when the session heard of them)."""

from __future__ import annotations

from core.budget import Budget
from core.commands import CheckInterruption, PausePlayback, StartResponse
from core.end_of_turn import CheckEndOfTurn
from core.endpointing import OnsetDropped, SpeechOnset, SpeechStart
from core.floor import State
from core.hearing import Ended, PartialDue, SpeechContinues, SpeechPaused
from core.ledger import Word
from core.partials import PartialConfig, PartialPolicy
from core.turns import Conversation


def of(kind, commands):
    return [c for c in commands if isinstance(c, kind)]


def the_same_by_hand(conv: Conversation, heard, t: float):
    """What the session did with each report before Conversation.heard (its _heard's branches)."""
    if isinstance(heard, SpeechContinues):
        return conv.speech_continues(heard.t)
    if isinstance(heard, SpeechPaused):
        return conv.speech_paused(heard.end, heard.silence_s, t)
    if isinstance(heard, SpeechOnset):
        return conv.speech_onset(heard.onset, t)
    if isinstance(heard, OnsetDropped):
        return conv.onset_dropped(t)
    if isinstance(heard, SpeechStart):
        return conv.speech_started(heard.onset, t)
    assert isinstance(heard, Ended)
    return conv.speech_ended(heard.end, t, heard.level_db, heard.background_db)


def test_heard_drives_a_turn_and_a_barge_in_as_the_separate_calls_did():
    by_heard = Conversation("be brief", speculation=Budget())
    by_hand = Conversation("be brief", speculation=Budget())
    # (report, the session's clock when it came); a report's own time differs from the clock on purpose.
    turn = [
        (SpeechStart(onset=0.1, t=0.3), 0.35),
        (SpeechContinues(t=0.6), 0.65),
        (SpeechPaused(end=1.0, silence_s=0.128), 1.15),
        (Ended(end=1.0, t=1.5, level_db=-30.0, background_db=None), 1.55),
    ]
    for heard, t in turn:
        assert by_heard.heard(heard, t) == the_same_by_hand(by_hand, heard, t)
    for conv in (by_heard, by_hand):
        (start,) = of(StartResponse, conv.early_transcript(1, 1.0, "what time is it", 1.6))
        conv.llm_delta(start.response, "It is noon. ", 1.7)
        conv.tts_audio(start.response, 1, "It is noon.", 24000, [Word("It", 8000)], 1.8, first=True)
        conv.played(2400, 1.9)
    over_reply = [
        (SpeechOnset(onset=2.0, t=2.1), 2.12),
        (OnsetDropped(t=2.3), 2.31),
        (SpeechOnset(onset=2.5, t=2.6), 2.62),
        (SpeechStart(onset=2.5, t=2.7), 2.72),
        (SpeechContinues(t=3.2), 3.25),
        (Ended(end=3.3, t=3.8, level_db=-31.0, background_db=-60.0), 3.85),
    ]
    log = []
    for heard, t in over_reply:
        out = by_heard.heard(heard, t)
        assert out == the_same_by_hand(by_hand, heard, t)
        log += out
    assert of(PausePlayback, log) and of(CheckInterruption, log)
    assert by_heard.state is by_hand.state is State.PAUSED


def test_engine_work_is_left_to_the_shell():
    conv = Conversation()
    conv.heard(SpeechStart(onset=0.1, t=0.3), 0.3)
    partial = PartialDue(PartialPolicy(PartialConfig()), onset=0.1)
    check = CheckEndOfTurn(check=1, onset=0.1, end=1.0, until=1.2)
    assert conv.heard(partial, 1.0) == [] and conv.heard(check, 1.2) == []
    assert conv.state is State.USER_SPEAKING and conv.user_speaking


def test_the_instructions_can_be_changed_mid_conversation():
    """A Realtime client's session.update sets them (transport/connection.py): the next request reads them."""
    from core.commands import StartResponse

    c = Conversation("be brief")
    c.system_prompt = "answer in French"
    assert c.system_prompt == "answer in French"
    (start,) = [cmd for cmd in c.user_text("hello", 1.0) if isinstance(cmd, StartResponse)]
    assert start.messages[0] == {"role": "system", "content": "answer in French"}
