"""The example scenarios (scenarios/*.yaml) on the real engines: each passes, and a run repeats exactly.

They are the repository's own tests of turn-taking written as a user of the runner would write
them: a question, a pause that must not end the turn, a barge-in through speakers, a backchannel,
a cough, a tool call, a phone caller who goes quiet, another language, noise and the judge. The
engines are the test session's (loaded once); a scenario whose agent asks for Qwen gets the
shared Qwen.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from shell.engines import EngineConfig, Engines
from voice.scenario.report import result_json, table
from voice.scenario.runner import ScenarioResult, run_scenario, speech_config
from voice.scenario.spec import load_scenario

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="session")]

SCENARIOS = sorted((Path(__file__).parents[2] / "scenarios").glob("*.yaml"))
REPEATED = "barge_in"  # the scenario run again, to be compared with its run among the examples
FIRST_RUNS: dict[str, ScenarioResult] = {}


class SharedEngines:
    """The test session's engines, and its Qwen for the agents that ask for it."""

    def __init__(self, engines: Engines, qwen) -> None:
        self.engines = engines
        self.qwen = qwen

    async def get(self, config: EngineConfig) -> Engines:
        assert speech_config(config) == speech_config(EngineConfig()), "a scenario needs engines the tests do not load"
        if config.llm_model == "qwen2.5-coder-0.5b":
            return dataclasses.replace(self.engines, llm=self.qwen)
        assert config.llm_model == "smollm2-135m"
        return self.engines


@pytest.fixture(scope="module")
def shared(engines, qwen) -> SharedEngines:
    return SharedEngines(engines, qwen)


async def test_the_examples_cover_every_expectation_kind():
    kinds = {k for path in SCENARIOS for s in [load_scenario(path)] for t in [*s.turns] for k in t.expect.kinds()}
    kinds |= {k for path in SCENARIOS for k in load_scenario(path).expect.kinds()}
    every = {f.name for f in dataclasses.fields(load_scenario(SCENARIOS[0]).expect)}
    assert kinds == every


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
async def test_an_example_scenario_passes(path, shared):
    result = await run_scenario(load_scenario(path), shared)
    if path.stem == REPEATED:
        FIRST_RUNS[path.stem] = result
    assert result.passed, "\n" + table([result])


async def test_a_scenario_gives_the_same_events_transcript_and_recording_every_run(shared):
    # Its first run is the one among the examples above (other scenarios ran on the same engines since:
    # nothing of theirs may change it); run alone, this test runs it twice.
    scenario = load_scenario(SCENARIOS[0].parent / f"{REPEATED}.yaml")
    first = FIRST_RUNS.pop(REPEATED, None) or await run_scenario(scenario, shared)
    second = await run_scenario(scenario, shared)
    assert json.dumps(result_json(first)) == json.dumps(result_json(second))
    assert np.array_equal(first.recording.stereo(), second.recording.stereo())
