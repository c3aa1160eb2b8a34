"""What the recognizer is given in an agent's flow, through the real Session on virtual time with the
stand-in engines: in a step that collects fields, the final pass reads the question the person
answers as the text before their words (core/asking.py); elsewhere it is given none. That Whisper
hears short answers better so is measured by ``python -m voice.bench flows`` (docs/bench/flows.md)."""

from __future__ import annotations

import numpy as np
from stand_in_engines import silence, tone
from test_flow_session import call, form, restaurant
from test_session import QUESTION_HZ, run


async def test_in_a_collecting_step_the_final_pass_reads_the_question_the_person_answers():
    nothing = form(name=None, party_size=None, date=None, time=None)
    session, _, _ = restaurant([[call("wants_booking")], nothing, nothing])
    turn = np.concatenate([tone(1.2, hz=QUESTION_HZ), silence(5.0)])
    await run(session, np.concatenate([silence(2.5), turn, turn]), tail_s=10)
    prompts = session.engines.asr_final.prompts  # type: ignore[attr-defined]
    # The greeting collects nothing: no prompt. In details, the question it asked is the text before.
    assert prompts[0] is None and prompts[-1] == "Under what name shall I book it?"
