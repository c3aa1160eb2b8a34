"""Scenario files as pytest tests: ``pytest scenarios/`` in any project that has this package installed.

The package registers this module as a pytest plugin (the ``pytest11`` entry point). Each YAML
file with a top-level ``turns:`` list that pytest is pointed at, or finds in the folders it
collects, is one test: the scenario runs on virtual time, and a failed expectation fails the test
with the table of its checks. The engines load once per test session, on the plugin's own event
loop (the tests' loop, if they have one, is not touched), and are shared by every scenario.

Options: ``--scenario-record DIR`` (each conversation as a stereo WAV), ``--scenario-report DIR``
(the HTML pages), ``--scenario-judge-url URL`` (a larger model for the judge's questions).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from shell.reaper import start_reaper
from voice.scenario.report import table, write_outputs
from voice.scenario.runner import LoadedEngines, ScenarioResult, run_scenario
from voice.scenario.spec import Scenario, ScenarioError, load_scenario


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("voice.scenario", "voice assistant scenarios (YAML files with turns:)")
    group.addoption("--scenario-record", metavar="DIR", type=Path, help="write each conversation as DIR/NAME.wav")
    group.addoption("--scenario-report", metavar="DIR", type=Path, help="write each scenario's HTML page into DIR")
    group.addoption("--scenario-judge-url", metavar="URL", help="an OpenAI-compatible server for the judge")


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.suffix in (".yaml", ".yml") and _is_scenario(file_path):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


def _is_scenario(path: Path) -> bool:
    """A YAML file whose top level has a list of ``turns`` (any other YAML is not ours to collect)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and isinstance(data.get("turns"), list)


class ScenarioFile(pytest.File):
    def collect(self):
        try:
            scenario = load_scenario(self.path)
        except ScenarioError as e:
            raise self.CollectError(str(e)) from None
        yield ScenarioItem.from_parent(self, name=scenario.name, scenario=scenario)


class ScenarioFailed(Exception):
    def __init__(self, result: ScenarioResult) -> None:
        super().__init__(result.scenario.name)
        self.result = result


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario

    def runtest(self) -> None:
        result = _runner(self.config).run(self.scenario)
        if not result.passed:
            raise ScenarioFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ScenarioFailed):
            failed = [c for c in excinfo.value.result.checks if not c.passed]
            return f"{len(failed)} expectation(s) failed:\n" + table([excinfo.value.result])
        if isinstance(excinfo.value, ScenarioError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario: {self.name}"


class _Runner:
    """The test session's engines and the loop they live on."""

    def __init__(self, config: pytest.Config) -> None:
        for name, value in {"VLLM_LOGGING_LEVEL": "ERROR", "TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1"}.items():
            os.environ.setdefault(name, value)  # as python -m voice.run: the engines' chatter off, nothing fetched
        # The engines' processes end with the test session, however it ends (shell/reaper.py); started
        # here, where this session starts engines, not in every session that has the plugin installed.
        start_reaper()
        self.loop = asyncio.new_event_loop()
        self.engines = LoadedEngines()
        self.record: Path | None = config.getoption("scenario_record")
        self.report: Path | None = config.getoption("scenario_report")
        self.judge = None
        if url := config.getoption("scenario_judge_url"):
            from llm.openai_http import OpenAIChatClient

            self.judge = OpenAIChatClient(url)

    def run(self, scenario: Scenario) -> ScenarioResult:
        result = self.loop.run_until_complete(run_scenario(scenario, self.engines, judge=self.judge))
        write_outputs([result], record=self.record, report=self.report)
        return result

    def close(self) -> None:
        self.loop.run_until_complete(self.engines.aclose())
        if self.judge is not None:
            self.loop.run_until_complete(self.judge.close())
        self.loop.close()


_RUNNER = pytest.StashKey[_Runner]()


def _runner(config: pytest.Config) -> _Runner:
    if _RUNNER not in config.stash:
        config.stash[_RUNNER] = _Runner(config)
    return config.stash[_RUNNER]


def pytest_unconfigure(config: pytest.Config) -> None:
    runner = config.stash.get(_RUNNER, None)
    if runner is not None:
        runner.close()
