"""The scenario's HTML page (``--report``) in real headless Chromium: it renders, and its audio plays.

The scenario runs on the stand-in engines (tests/unit/stand_in_engines.py: a tone's pitch heard as
words, scripted replies, no model loaded), so the test takes a few seconds, yet the page is made
from a real run: a tool call, a barge-in, a failed check and the judge's answer. The page is opened
from its file, as a person opens a CI artifact, beside the WAV the CLI writes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from core.audio import ASR_RATE
from core.tool_calls import ToolCallDelta
from shell.config import SessionConfig
from shell.engines import EngineConfig
from shell.tools import load_tools
from tests.integration.browser import CHROMIUM, Browser, chromium_available, launch
from tests.unit.stand_in_engines import StandInEngines, StandInLLM, StandInRecognizer, tone
from transport.files import write_wav
from voice.app.runtime import RunSetup
from voice.scenario.html import X0, X1
from voice.scenario.report import write_outputs
from voice.scenario.runner import ScenarioResult, run_scenario
from voice.scenario.spec import load_scenario

pytestmark = [
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.skipif(not chromium_available(), reason=f"no {CHROMIUM} (Debian's chromium package) to run the page"),
]

QUESTION_HZ, STOP_HZ = 300, 700
REPLY = "It is <b>noon</b> & the sun is high in the sky and the day is warm and bright and long."


class StandIns:
    def __init__(self, replies: list) -> None:
        self.engines = StandInEngines(StandInRecognizer({QUESTION_HZ: "what is six times two", STOP_HZ: "stop"}),
                                      StandInLLM(replies, next_tokens={" yes": 0.8, " no": 0.2}))  # fmt: skip

    async def get(self, config: EngineConfig) -> StandInEngines:
        return self.engines


async def report(folder: Path) -> ScenarioResult:
    """A question answered after a tool call, then cut by "stop"; written as ``--report`` writes it."""
    write_wav(folder / "question.wav", tone(1.2, hz=QUESTION_HZ), ASR_RATE)
    write_wav(folder / "stop.wav", tone(1.0, hz=STOP_HZ), ASR_RATE)
    turns = [
        {"audio": "question.wav", "expect": {"answered_within_ms": 1, "tool": {"name": "calculate"}}},  # 1 ms: a FAIL
        {"audio": "stop.wav", "after_reply_start": 1.0, "expect": {"interrupts": {"within_ms": 1500}}},
    ]
    spec = {"name": "report <check>", "turns": turns, "expect": {"judge": "Does the reply give a time?"}}
    (folder / "s.yaml").write_text(yaml.safe_dump(spec))
    call = ToolCallDelta(0, id="c0", name="calculate", arguments='{"expression": "6 * 2"}')
    setup = RunSetup(EngineConfig(), SessionConfig(echo_cancel=False, end_of_turn=None, speculate=False),
                     load_tools(["builtin"]))  # fmt: skip
    result = await run_scenario(load_scenario(folder / "s.yaml"), StandIns([[call], REPLY, "Sure."]), setup)
    write_outputs([result], report=folder / "report")
    return result


async def test_the_report_page_renders_and_plays_its_recording(tmp_path):
    result = await report(tmp_path)
    assert {e.type for e in result.events} >= {"tool_call", "barge_in", "truncate", "tts_chunk", "asr_final"}
    assert [c.passed for c in result.checks].count(False) == 1  # answered within 1 ms
    page = tmp_path / "report" / "report--check.html"
    wav = tmp_path / "report" / "report--check.wav"
    assert page.exists() and wav.exists()
    seconds = len(result.recording.stereo()) / result.output_rate
    async with launch(wav, hard_timeout_s=90) as browser:
        await browser.navigate(page.as_uri())
        try:
            await browser.wait_for("document.getElementById('audio').readyState >= 1", timeout=15)
            shown = await browser.evaluate(PAGE_STATE)
        except Exception as e:
            raise AssertionError(f"{e}\nconsole: {browser.console}") from e
        assert shown["duration"] == pytest.approx(seconds, abs=0.05), shown
        assert shown["waves"] == ["wave person", "wave assistant"] and min(shown["wave_points"]) > 1000, shown
        assert shown["title"] == "report <check>" and shown["verdict"] == "failed", shown
        # A row per check, the failed one marked, the judge's marked as the one that is not repeatable.
        assert len(shown["checks"]) == len(result.checks), shown["checks"]
        assert [r[2] for r in shown["checks"]].count("FAIL") == 1, shown["checks"]
        (judged,) = [r for r in shown["checks"] if r[1].startswith("judge")]
        assert "nondeterministic" in judged[1] and judged[0] == "conversation", judged
        # The timeline: the turns, the events of both sides and the transcript, the text escaped.
        labels = " | ".join(shown["labels"])
        for said in ("1 · question.wav", "2 · stop.wav", "“what is six times two”", "✕ barge-in", "calculate(", "→ 12"):
            assert said in labels, (said, labels)
        assert "It is <b>noon</b> & the sun" in labels and shown["bold"] == 0, labels
        assert shown["cuts"] == 1 and shown["errors"] == [], shown
        await seek_by_a_click(browser, 1.0, seconds)


PAGE_STATE = """(() => {
  const audio = document.getElementById('audio');
  const paths = [...document.querySelectorAll('#timeline path.wave')];
  return {
    duration: Number.isFinite(audio.duration) ? audio.duration : null,
    waves: paths.map(p => p.getAttribute('class')),
    wave_points: paths.map(p => p.getAttribute('d').split('L').length),
    title: document.querySelector('h1').firstChild.textContent.trim(),
    verdict: document.querySelector('h1 .badge').textContent,
    checks: [...document.querySelectorAll('table.checks tbody tr')].map(
      tr => [...tr.querySelectorAll('td')].map(td => td.textContent.trim())),
    labels: [...document.querySelectorAll('#timeline g text')].map(t => t.textContent),
    bold: document.querySelectorAll('b').length,
    cuts: document.querySelectorAll('#timeline line.cut').length,
    errors: [...document.querySelectorAll('#timeline .error')].map(g => g.textContent),
  };
})()"""


async def seek_by_a_click(browser: Browser, t: float, seconds: float) -> None:
    """A click on the timeline at ``t`` seconds moves the audio there, and the playhead with it."""
    at = X0 + (X1 - X0) * t / seconds
    await browser.evaluate(f"""(() => {{
        const svg = document.getElementById('timeline'), m = svg.getScreenCTM();
        svg.dispatchEvent(new MouseEvent('click', {{clientX: m.a * {at} + m.e, clientY: m.f + 40, bubbles: true}}));
    }})()""")
    now = await browser.wait_for("document.getElementById('audio').currentTime", timeout=5)
    assert now == pytest.approx(t, abs=0.05)
    head = float(await browser.evaluate("document.getElementById('playhead').getAttribute('x1')"))
    assert head == pytest.approx(X0 + (X1 - X0) * now / seconds, abs=0.5)
    # Played, the playhead moves on with the audio.
    await browser.evaluate("document.getElementById('audio').play()", await_promise=True)
    moved = "parseFloat(document.getElementById('playhead').getAttribute('x1'))"
    await browser.wait_for(f"{moved} > {at + 5}", timeout=10)
