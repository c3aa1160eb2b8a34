"""The engine-call log of ``python -m voice.bench trace``, on stand-in engines (the wiring only: what it
times on the real ones is the script's figure)."""

from __future__ import annotations

import numpy as np
from stand_in_engines import StandInSmartTurn, silence, tone
from test_session import EOT, QUESTION_HZ, make_session, run

from voice.bench.engine_calls import run_alone, timed


async def test_every_engine_call_of_a_turn_is_timed_and_can_be_run_again_alone():
    session = make_session(smart_turn=StandInSmartTurn([0.9]), end_of_turn=EOT, partials=True)
    engines = session.engines
    log = timed(engines)  # type: ignore[arg-type]
    await run(session, np.concatenate([silence(0.5), tone(1.2, hz=QUESTION_HZ), silence(0.2)]))
    kinds = {c.kind for c in log.calls}
    assert {"partial", "final", "smart_turn", "reading", "llm", "tts"} <= kinds
    assert all(c.end >= c.start for c in log.calls)
    (reply, *_) = [c for c in log.calls if c.kind == "llm"]
    assert len(reply.tokens) == 7  # one stamp a delta: "It is noon. Have a good day." word by word
    # The pipeline saw its engines' answers through the wrappers: the turn was answered.
    assert [t.role for t in session.history.turns] == ["user", "assistant"]
    asked, logged = len(engines.llm.requests), len(log.calls)  # type: ignore[attr-defined]
    for kind in sorted(kinds):
        call = next(c for c in log.calls if c.kind == kind)
        quiet = await run_alone(log, call)
        assert quiet["duration"] >= 0
        if kind == "llm":
            assert quiet["ttft"] >= 0 and not quiet["per_token"] < 0  # nan: a one-delta reply
    # Run again through the engines' own methods: not logged as calls of the pipeline's.
    assert len(engines.llm.requests) == asked + 1  # type: ignore[attr-defined]
    assert len(log.calls) == logged
