"""One scenario through one session on virtual time, on the engines, and what it showed.

The agent is configured exactly as ``python -m voice.run`` would be with the scenario's ``agent``
options (the same parser and checks). The person's turns are rendered, the feed says them as the
microphone of a replay device, recorded (the person left, the assistant as heard right), and the
pump drives the session in lockstep: engine work takes no time on the timeline, so every event
and every sample is the same on every run. Then the expectations are checked; the reply's
language is what Whisper hears in the reply's own audio, and the judge (if asked) is the local
model's yes or no.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import soxr

from core.audio import ASR_RATE
from core.events import Event, PlaybackStart, TurnEnd
from llm.base import LLM
from shell.clock import MonotonicClock, VirtualClock
from shell.engines import EngineConfig, Engines, make_llm, start_engines
from shell.mcp import McpServers, McpStartError
from shell.pump import Pump
from shell.recording import Recording, RecordingDevice
from shell.session import Session
from transport.echo_path import EchoPath
from transport.replay import ReplayDevice
from voice.app.logs import fan_out
from voice.app.options import build_parser
from voice.app.runtime import RunSetup, UsageError, call_config, mcp_specs, run_setup
from voice.scenario.caller import CallerFeed, CallerTurns
from voice.scenario.expect import Check, Judgement, Observed, check
from voice.scenario.feed import Feed, Placed
from voice.scenario.person import TurnAudio, render, room_audio
from voice.scenario.spec import Cue, Line, Scenario, ScenarioError, line_turn

FIRST_CUE = Cue("at", 0.5)
NEXT_CUE = Cue("after_reply_end", 0.5)  # a person who waits for the answer, then speaks
# The fields of EngineConfig that make the LLM: scenarios that differ only in them share the rest.
LLM_FIELDS = (
    "llm_model", "tool_parser", "llm_url", "llm_urls", "llm_affinity", "llm_compile", "llm_dtype", "generation"
)  # fmt: skip
# The fields whose change does not load the speech engines again: the LLM's, and the languages whose
# voices are loaded at start (the others load on their first reply anyway).
NOT_RELOADED = (*LLM_FIELDS, "languages")


def agent_setup(scenario: Scenario) -> tuple[argparse.Namespace, RunSetup]:
    """The scenario's agent, as ``python -m voice.run`` reads the same options. Raises ScenarioError."""
    argv: list[str] = []
    for key, value in scenario.agent.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue
        else:
            argv += [x for v in (value if isinstance(value, list) else [value]) for x in (flag, str(v))]
    parser = build_parser()
    parser.exit_on_error = False
    try:
        args = parser.parse_args(argv)
    except (argparse.ArgumentError, SystemExit) as e:
        raise ScenarioError(f"{scenario.path}: agent: {e}") from None
    try:
        return args, run_setup(args)
    except UsageError as e:
        raise ScenarioError(f"{scenario.path}: agent: {e}") from None


class EngineSource(Protocol):
    """Where a scenario gets its engines: loaded once, shared by every scenario that can."""

    async def get(self, config: EngineConfig) -> Engines: ...


class LoadedEngines:
    """Engines loaded for the scenarios of one run: the speech engines once, an LLM per model asked for."""

    def __init__(self) -> None:
        self._config: EngineConfig | None = None
        self._engines: Engines | None = None
        self._llms: dict[str, Any] = {}
        self.load_s = 0.0  # loading (cold start), not counted in any scenario

    async def get(self, config: EngineConfig) -> Engines:
        t0 = time.monotonic()
        if self._engines is None or speech_config(config) != speech_config(self._config):
            await self.aclose()
            self._engines = await start_engines(config)
            self._config = config
            self._llms = {_llm_key(config): self._engines.llm}
        key = _llm_key(config)
        if key not in self._llms:
            self._llms[key] = await asyncio.to_thread(make_llm, config)
        self.load_s += time.monotonic() - t0
        return dataclasses.replace(self._engines, llm=self._llms[key])

    async def aclose(self) -> None:
        if self._engines is None:
            return
        for llm in self._llms.values():
            if llm is not self._engines.llm:
                await llm.close()
        await self._engines.aclose()
        self._engines = None
        self._llms = {}


def speech_config(config: EngineConfig | None) -> EngineConfig | None:
    """``config`` without what :data:`NOT_RELOADED` names: configs with the same one share the speech engines."""
    if config is None:
        return None
    default = EngineConfig()
    return dataclasses.replace(config, **{f: getattr(default, f) for f in NOT_RELOADED})


def _llm_key(config: EngineConfig) -> str:
    return repr(tuple(getattr(config, f) for f in LLM_FIELDS))


@dataclass
class ScenarioResult:
    scenario: Scenario
    checks: list[Check]
    observed: Observed
    recording: Recording
    output_rate: int
    turns: list[TurnAudio] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def events(self) -> list[Event]:
        return self.observed.events

    @property
    def placed(self) -> list[Placed]:
        return self.observed.placed

    def said(self, index: int) -> str:
        """What the person's turn ``index`` said (a caller's line after the scenario's turns)."""
        return self.observed.said[index]

    @property
    def duration_s(self) -> float:
        return self.recording.mic_samples / ASR_RATE


async def run_scenario(
    scenario: Scenario,
    source: EngineSource,
    setup: RunSetup | None = None,
    judge: LLM | None = None,
    real_time: bool = False,
) -> ScenarioResult:
    """Run ``scenario`` on engines from ``source``, on virtual time, and check what it expects.
    ``setup``: the agent instead of the scenario's (the unit tests' stand-in engines); ``judge``:
    the model that answers the judge's questions (None: the agent's own); ``real_time``: on the
    wall clock instead, the engines' own speed counted (benchmarks: its timings are not exact)."""
    args, agent = agent_setup(scenario)
    setup = setup or agent
    engines = await source.get(setup.engine)
    session_cfg = setup.session
    if scenario.call:
        session_cfg = dataclasses.replace(session_cfg, call=call_config(args))
    turns, lines = await asyncio.to_thread(_render_all, scenario, engines)
    cues = [t.cue or (NEXT_CUE if i or scenario.call else FIRST_CUE) for i, t in enumerate(scenario.turns)]
    events: list[Event] = []
    session: Session | None = None
    specs = mcp_specs(args)  # the agent's MCP servers, started for this scenario (their tools in setup.tools)
    servers = McpServers(specs, setup.tools) if specs and setup.tools is not None else None
    if servers is not None:
        try:
            await servers.start()
        except McpStartError as e:
            raise ScenarioError(f"{scenario.path}: agent: {e}") from None
    room = room_audio(scenario.room, turns) if scenario.room is not None else None
    caller = CallerTurns(scenario.caller) if scenario.caller is not None else None

    def ended() -> bool:
        return session is not None and session.ended.is_set()

    more = None if caller is None else CallerFeed(caller, lines, ended)
    feed = Feed(list(zip(turns, cues, strict=True)), idle=lambda: session is not None and session.idle,
                listen_s=scenario.listen_s, room=room, more=more,
                press=lambda key: session.key_pressed(key) if session is not None else None)  # fmt: skip
    clock = MonotonicClock() if real_time else VirtualClock()
    listeners = [events.append, feed.on_event] + ([caller.on_event] if caller is not None else [])
    session = Session(engines, clock, session_cfg, fan_out(*listeners), lockstep=not real_time, tools=setup.tools)
    echo = None if scenario.echo is None else EchoPath(scenario.echo.db, scenario.echo.delay_ms)
    device = RecordingDevice(ReplayDevice(feed.source, engines.output_rate, echo), engines.output_rate)
    try:
        await Pump(session, device, settle=not real_time).run()
    finally:
        await session.aclose()
        if servers is not None:
            await servers.close()
    caller_said = caller.said if caller is not None else []
    said = [t.label for t in (*scenario.turns, *(line_turn(line) for line in caller_said))]
    observed = Observed(events, session.history.to_json(), feed.placed, ended=session.ended.is_set(), said=said)
    rec = device.recording
    wanted = [t.expect for t in scenario.turns] + [scenario.expect]
    if any(e.language for e in wanted):
        observed.reply_languages = await asyncio.to_thread(_reply_languages, engines, events, rec)
    if any(e.judge for e in wanted):
        observed.judged = await _judge(scenario, judge or engines.llm, observed)
    return ScenarioResult(scenario, check(scenario, observed), observed, rec, engines.output_rate, turns)


def _render_all(scenario: Scenario, engines: Engines) -> tuple[list[TurnAudio], dict[Line, TurnAudio]]:
    """The turns' audio, and each line the caller may say (by its text)."""
    person = scenario.person
    # Made on the first text turn: a scenario of recordings loads no voice of the person's.
    voice = functools.cache(lambda: engines.voices.other(person.voice, person.language, person.speed))

    def word_times(audio: np.ndarray, language: str) -> list[tuple[str, float]]:
        segments, _ = engines.asr_final.model.transcribe(audio, language=language, beam_size=1, word_timestamps=True)
        return [(w.word, w.end) for s in segments for w in s.words]

    turns = [render(t, person, voice, engines.output_rate, word_times) for t in scenario.turns]
    lines = scenario.caller.lines() if scenario.caller is not None else []
    said = {line: render(line_turn(line), person, voice, engines.output_rate, word_times) for line in lines}
    return turns, said


def _reply_languages(engines: Engines, events: list[Event], rec: Recording) -> dict[int, str]:
    """The language Whisper hears in each reply's audio, from its first sample to its end."""
    starts = {e.response: e.t for e in events if isinstance(e, PlaybackStart)}
    ends = {e.response: e.t for e in events if isinstance(e, TurnEnd)}
    track = rec.assistant()
    out: dict[int, str] = {}
    for response, start in starts.items():
        end = ends.get(response, len(track) / rec.output_rate)
        audio = track[round(start * rec.output_rate) : round(end * rec.output_rate)]
        if len(audio) < rec.output_rate // 2:
            continue
        audio = soxr.resample(audio, rec.output_rate, ASR_RATE).astype(np.float32)
        out[response] = engines.asr_final.recognize(audio, language="auto").language
    return out


# The judge reads the model's next token after a few worked examples, rather than asking it in a chat:
# Qwen2.5-Coder-0.5B and SmolLM2-135M said "no" to every question when asked in a chat (0 of 3 yeses
# right), and the examples took Qwen to 4 of 6 (docs/guide/scenarios.md, "The judge").
JUDGE_EXAMPLES = (
    'Reply: "I had eggs for breakfast."\nQuestion: Does the reply mention food?\nAnswer: yes\n\n'
    'Reply: "The train leaves at noon."\nQuestion: Does the reply mention an animal?\nAnswer: no\n\n'
    'Reply: "Sorry, I cannot help with that."\nQuestion: Does the reply refuse?\nAnswer: yes\n\n'
    'Reply: "Berlin is in Germany."\nQuestion: Does the reply give a number?\nAnswer: no\n\n'
)


async def _judge(scenario: Scenario, judge: LLM, observed: Observed) -> dict[tuple[int | None, str], Judgement]:
    """The judge's yes or no to each question (the one check that may change with the model that judges)."""
    asked: list[tuple[int | None, str, str]] = []
    for i, turn in enumerate(scenario.turns):
        placed = next((p for p in observed.placed if p.index == i), None)
        if turn.expect.judge and placed is not None:
            reply = observed.reply_text(observed.replies(observed.utterances(placed)))
            if reply:
                asked.append((i, turn.expect.judge, reply))
    if scenario.expect.judge:
        said = " ".join(t["text"] for t in observed.transcript if t["role"] == "assistant")
        asked.append((None, scenario.expect.judge, said))
    out: dict[tuple[int | None, str], Judgement] = {}
    for i, question, reply in asked:
        text = JUDGE_EXAMPLES + f'Reply: "{reply}"\nQuestion: {question}\nAnswer:'
        yes, no = await yes_and_no(judge, text)
        out[(i, question)] = Judgement(yes > no, f"yes {yes:.2f}, no {no:.2f}")
    return out


async def yes_and_no(judge: LLM, text: str) -> tuple[float, float]:
    """How likely the judge's next token after ``text`` is "yes", and "no" (however spaced or cased)."""
    probabilities = await judge.next_token_probabilities(text)
    yes = sum(p for token, p in probabilities.items() if token.strip().lower() == "yes")
    no = sum(p for token, p in probabilities.items() if token.strip().lower() == "no")
    return yes, no
