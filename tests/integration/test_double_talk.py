"""Double talk at the reply's start, on the real engines, virtual time (issue 44).

The person pauses, the endpoint comes, and they go on just as the reply starts: with the echo
canceller on and the reply echoed back at -20 dB, their second sentence is heard whole (before,
AEC3's unconverged suppressor and an echo gate that learnt their voice as echo lost it).
``python -m voice.bench bargein --grid`` measures the whole grid; these are its three cases that
the issue names, on the default session (Smart Turn, AEC3 for the VAD, the linear canceller for
the ASR).
"""

from __future__ import annotations

import pytest

from voice.bench import double_talk
from voice.bench.scoring import error_rate

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="session")]

# (speaker, onset into the reply): the recording, 20 ms in, and two English speakers.
CASES = [("ja", 0.02), ("aew", 0.0), ("axb", 0.1)]


@pytest.mark.parametrize(("name", "onset"), CASES, ids=[c[0] for c in CASES])
async def test_a_second_sentence_as_the_reply_starts_is_heard_whole(engines, name, onset):
    speaker = double_talk.SPEAKERS[name]
    start = await double_talk.reply_start(engines, speaker)
    cell = await double_talk.one_cell(engines, speaker, "linear", -20.0, onset, start)
    quiet = await double_talk.one_cell(engines, speaker, "linear", None, onset, start)
    assert not cell["lost"], cell
    # As well heard as the same speech with no echo at all (the target: within 0.05).
    assert cell["error"] <= quiet["error"] + 0.05, (cell["heard"], quiet["heard"])
    assert error_rate(speaker.then_text(), cell["heard"], speaker.language) <= 0.3, cell["heard"]
