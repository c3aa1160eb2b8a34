"""The terminal view: events in, lines and a status line out."""

from __future__ import annotations

import io

from core.events import (
    AsrFinal,
    AsrPartial,
    PlaybackStart,
    ResponseStart,
    SpeechStart,
    Truncate,
    TtsChunk,
    TurnEnd,
)
from voice.app.terminal import TerminalView, meter


def test_meter_spans_minus_60_to_0_dbfs():
    assert meter(None) == " " * 8 and meter(-80) == " " * 8
    assert meter(0) == "█" * 8 and len(meter(-30)) == 8 and meter(-30).startswith("████")


def test_a_cut_turn_shows_what_was_heard_and_what_was_not():
    out = io.StringIO()
    view = TerminalView(out, live=False)
    for e in [
        SpeechStart(0.3, onset=0.1, utterance=1),
        AsrFinal(1.5, utterance=1, text="what time is it"),
        ResponseStart(1.5, response=1, utterance=1, text="what time is it"),
        TtsChunk(1.8, response=1, chunk=1, text="It is noon."),
        TtsChunk(2.0, response=1, chunk=2, text="Lunch is ready."),
        PlaybackStart(1.9, response=1),
        Truncate(2.9, response=1, audio_end_ms=900, text="It is noon."),
        TurnEnd(2.9, response=1, text="It is noon.", interrupted=True),
    ]:
        view.event(e)
    lines = out.getvalue().splitlines()
    assert lines == [
        "you:        what time is it",
        "assistant:  It is noon.",
        "assistant:  Lunch is ready.",
        "✂ cut:       heard 'It is noon.', not 'Lunch is ready.'",
    ]
    assert view.state == "listening"


def test_the_live_line_is_redrawn_in_place_and_cleared_for_lines():
    out = io.StringIO()
    view = TerminalView(out, live=True)
    view.level(-20)
    view.event(SpeechStart(0.3, onset=0.1, utterance=1))
    view.event(AsrPartial(0.8, text="what time", stable="what"))
    assert out.getvalue().endswith("what time") and "you're speaking" in out.getvalue()
    view.event(AsrFinal(1.5, utterance=1, text="what time is it"))
    assert "\r\x1b[2Kyou:        what time is it\n" in out.getvalue()
