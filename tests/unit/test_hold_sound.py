"""An agent's hold sound (core/hold_sound.py, shell/hold_sounds.py) through the real Session on
virtual time, with the stand-in engines: while a slow tool runs, after the filler, the sound plays in
pieces until the answer comes; its pieces are no words of the reply."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from test_session import run
from test_session_tools import QUESTION, call, kinds, make, silence, slow_tools

from core.commands import PlayHoldSound
from core.events import TtsChunk, TurnEnd
from core.flow import Flow
from core.hold_sound import HOLD_PIECE_S
from shell.hold_sounds import HoldSound, HoldSoundError, chime
from voice.agent import AgentFileError, load_agent


def held(hold: str | None) -> Flow:
    return dataclasses.replace(Flow.one_step("You look up orders.", ("look_up_order",)), hold=hold)


async def test_the_hold_sound_plays_after_the_filler_until_the_answer_and_is_no_word_of_the_reply():
    tools, _ = slow_tools(cancel=True)
    replies = [[call("look_up_order", '{"order": "A1"}')], "It has shipped."]
    session, _llm, events = make(replies, tools, flow=held("chime"))
    pieces: list[int] = []
    play = session.handlers[PlayHoldSound]
    session.handlers[PlayHoldSound] = lambda cmd: (pieces.append(cmd.n_samples), play(cmd))
    device = await run(session, np.concatenate([QUESTION, silence(0.5)]), tail_s=30)
    assert [e.text for e in kinds(events, TtsChunk)] == ["One moment.", "It has shipped."]
    (turn,) = kinds(events, TurnEnd)
    assert turn.text == "One moment. It has shipped."  # heard and stored: the words alone
    # The 3 s tool, less the 1 s before the filler and the filler itself: pieces of 0.3 s meanwhile.
    assert len(pieces) >= 3 and set(pieces) == {round(HOLD_PIECE_S * session.output_rate)}
    assert np.abs(device.reply).max() > 0.05  # the chime and the words were played


async def test_without_a_hold_sound_only_the_filler_is_said():
    tools, _ = slow_tools(cancel=True)
    session, _llm, events = make(
        [[call("look_up_order", '{"order": "A1"}')], "It has shipped."], tools, flow=held(None)
    )
    calls: list[PlayHoldSound] = []
    session.handlers[PlayHoldSound] = calls.append
    await run(session, np.concatenate([QUESTION, silence(0.5)]), tail_s=30)
    assert calls == [] and [e.text for e in kinds(events, TtsChunk)] == ["One moment.", "It has shipped."]


def test_a_hold_sound_loops_from_where_it_stopped():
    sound = HoldSound(np.arange(5, dtype=np.float32))
    assert sound.take(3).tolist() == [0, 1, 2] and sound.take(4).tolist() == [3, 4, 0, 1]
    assert len(chime(24000)) == 48000 and 0.05 < np.abs(chime(24000)).max() < 0.2


def test_an_agent_files_hold_is_chime_or_a_sound_file_that_can_be_read(tmp_path: Path):
    sf.write(tmp_path / "music.wav", np.zeros(8000, np.float32) + 0.1, 16000)
    (tmp_path / "not_sound.wav").write_text("hello")
    for hold, want in (("chime", "chime"), ("music.wav", str(tmp_path / "music.wav"))):
        (tmp_path / "a.yaml").write_text(f"role: You help.\nhold: {hold}\nsteps:\n  main: {{}}\n")
        assert load_agent(tmp_path / "a.yaml").flow.hold == want
    (tmp_path / "a.yaml").write_text("role: You help.\nhold: not_sound.wav\nsteps:\n  main: {}\n")
    with pytest.raises(AgentFileError, match=r"a\.yaml: hold: .*not_sound\.wav: not a sound file"):
        load_agent(tmp_path / "a.yaml")
    with pytest.raises(HoldSoundError):
        HoldSound.of(str(tmp_path / "missing.wav"), 24000)
