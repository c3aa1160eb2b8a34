"""The browser page on the real server: headless Chromium with a recording as its microphone.

The page (transport/web) is opened at ``<voice_server.url>/?autostart=1``; Chromium's fake
capture device plays the WAV into getUserMedia, the page streams it to /ws, plays the
reply and reports what it played. The page's ``window.voiceState`` is what is checked.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from tests.conftest import ROOT, recordings
from tests.integration.browser import CHROMIUM, Browser, chromium_available, launch, padded_wav
from voice.bench.scoring import word_error_rate

pytestmark = [
    pytest.mark.engines,
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.skipif(not chromium_available(), reason=f"no {CHROMIUM} (Debian's chromium package) to run the page"),
]

QUESTION = "cmu_arctic_us_aew_a0003"  # "For the twentieth time that evening the two men shook hands."
INTERRUPTER = "ljspeech_LJ001-0005"  # 8 s: long enough to be an interruption whatever the reply
GAP_S = 3.5  # silence after the question: the endpoint and the reply's first audio (about 2.1 s here), then reply


def recording(name: str):
    return next(r for r in recordings() if r.name == name)


def page_url(server: Any, query: str = "") -> str:
    url = f"{server.url.rstrip('/')}/?autostart=1{query}"
    token = getattr(server, "token", None)
    return f"{url}&token={token}" if token else url


async def debug(browser: Browser) -> str:
    try:
        state = await browser.evaluate("window.voiceState")
    except Exception as e:
        state = f"(no state: {e})"
    console = "\n".join(browser.console[-40:])
    return f"voiceState: {json.dumps(state)}\nconsole:\n{console}\nchromium stderr:\n{browser.stderr_tail(1500)}"


QUIET = """(() => { const s = window.voiceState, n = t => s.events.filter(e => e === t).length;
    const speaking = n('speech_start') > n('speech_end');
    return JSON.stringify([s.events.length, s.assistant.every(a => a.done), !speaking]); })()"""


async def wait_until_quiet(browser: Browser, quiet_s: float, timeout: float) -> None:
    """Wait until the person has stopped, every reply is done and no event came for ``quiet_s``:
    a turn the endpoint split at a pause has then been transcribed in all its parts."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = await browser.evaluate(QUIET)
        if now != last:
            last, since = now, time.monotonic()
        elif json.loads(now)[1:] == [True, True] and time.monotonic() - since >= quiet_s:
            return
        await asyncio.sleep(0.25)
    raise TimeoutError(f"the page was not quiet for {quiet_s} s within {timeout} s: {last}")


async def run_page(
    server: Any, wav: Path, until: str, timeout: float, query: str = "", quiet_s: float = 0.0
) -> tuple[dict[str, Any], Browser]:
    """Open the page with ``wav`` as the microphone and wait for ``until`` (a JS expression),
    then, with ``quiet_s``, until the page has been quiet that long."""
    async with launch(wav, hard_timeout_s=timeout + 90) as browser:
        await browser.navigate(page_url(server, query))
        try:
            await browser.wait_for("window.voiceState.status === 'ready'", timeout=30)
            await browser.wait_for(until, timeout=timeout)
            if quiet_s:
                await wait_until_quiet(browser, quiet_s, timeout=timeout)
            state = await browser.evaluate("window.voiceState")
        except Exception as e:
            raise AssertionError(f"{e}\n{await debug(browser)}") from e
        if "transport=webrtc" in query:  # Stop, as a person would: the server sees the peer go at once
            await browser.evaluate("document.getElementById('start').click()")
            await browser.wait_for("window.voiceState.status === 'closed'", timeout=10)
        state["dom"] = await browser.evaluate(
            """(() => [...document.querySelectorAll('#log .turn')].map(el => ({
                  cls: el.className,
                  who: el.querySelector('.who').textContent,
                  lang: el.querySelector('.text').lang,
                  text: el.querySelector('.text').textContent,
                  unheard: [...el.querySelectorAll('del.unheard')].map(d => d.textContent).join(''),
                  cut: !!el.querySelector('.cut')})))()"""
        )
        return state, browser


def words(text: str) -> list[str]:
    return [w for w in (re.sub(r"[^\w']+", "", t.lower()) for t in text.split()) if w]


async def test_page_transcribes_and_answers(voice_server, tmp_path):
    rec = recording(QUESTION)
    wav = padded_wav(rec.path, tmp_path / "mic.wav")
    done = """(() => { const s = window.voiceState;
        return s.transcripts.length > 0 && s.assistant.some(a => a.text) && s.played > 0
            && s.assistant.some(a => a.done) && s.played + s.dropped >= s.received; })()"""
    state, _ = await run_page(voice_server, wav, done, timeout=120)
    assert state["status"] == "ready", state
    assert [e for e in state["errors"] if e["code"] != "input_too_fast"] == [], state["errors"]
    heard = state["transcripts"][0]
    wer = word_error_rate(rec.transcript, heard)
    assert wer <= 0.35, (heard, wer)
    (reply, *_) = [a for a in state["assistant"] if a["text"]]
    assert reply["done"] and not reply["interrupted"], reply
    assert state["played"] > 0
    # Everything received was played, and the server was told so.
    assert state["played"] + state["dropped"] == state["received"], state
    kinds = state["events"]
    assert kinds[0] == "ready"
    assert kinds.index("transcript_final") < kinds.index("assistant_text") < kinds.index("turn_end")
    # The page shows the turn and the reply.
    assert any("user" in t["cls"] and t["text"] == heard for t in state["dom"]), state["dom"]
    assert any("assistant" in t["cls"] and reply["text"] in t["text"] for t in state["dom"]), state["dom"]


async def test_page_shows_the_cut_of_an_interrupted_reply(voice_server, tmp_path):
    q, who = recording(QUESTION), recording(INTERRUPTER)
    a, ra = sf.read(str(q.path), dtype="float32")
    b, rb = sf.read(str(who.path), dtype="float32")
    assert ra == rb
    audio = np.concatenate([a, np.zeros(round(GAP_S * ra), dtype=np.float32), b])
    # Silence after it long enough for every reply before Chromium plays the file again.
    wav = padded_wav(audio, tmp_path / "bargein.wav", rate=ra, pad_s=20.0)
    done = """(() => { const s = window.voiceState;
        return s.assistant.some(a => a.interrupted && a.heard !== null && a.done) && s.transcripts.length >= 2; })()"""
    state, _ = await run_page(voice_server, wav, done, timeout=120, quiet_s=3.0)
    cut = next(a for a in state["assistant"] if a["interrupted"])
    assert cut["text"], cut
    said, heard = words(cut["text"]), words(cut["heard"])
    assert heard == said[: len(heard)], cut  # what was heard is a prefix of what was said
    assert len(heard) < len(said), cut  # and it was cut before its end
    kinds = state["events"]
    assert {"barge_in", "playback_stopped", "truncate"} <= set(kinds), kinds
    assert kinds.index("barge_in") < kinds.index("playback_stopped") < kinds.index("truncate")
    assert state["played"] > 0
    # The bubble shows the unheard rest struck through, with the cut mark.
    (bubble,) = [t for t in state["dom"] if "interrupted" in t["cls"]]
    assert bubble["cut"] and bubble["unheard"].strip(), bubble
    assert words(bubble["unheard"]) == said[len(heard) :], bubble
    # The interruption itself was transcribed: in one turn, or in two where the endpoint took
    # its pause after "considered" (as in one CI run) for the end.
    assert len(state["transcripts"]) >= 2, state["transcripts"]
    interruption = " ".join(state["transcripts"][1:])
    assert word_error_rate(who.transcript, interruption) <= 0.35, state["transcripts"]


async def test_page_over_webrtc_transcribes_and_answers(voice_server, tmp_path):
    """The page's WebRTC switch: the microphone and the reply as RTP (Opus), events on a data channel."""
    rec = recording(QUESTION)
    wav = padded_wav(rec.path, tmp_path / "mic.wav")
    done = """(() => { const s = window.voiceState;
        return s.transcripts.length > 0 && s.assistant.some(a => a.text && a.done); })()"""
    state, _ = await run_page(voice_server, wav, done, timeout=120, query="&transport=webrtc")
    assert state["transport"] == "webrtc" and state["status"] == "ready", state
    assert state["errors"] == [], state["errors"]
    heard = state["transcripts"][0]
    assert word_error_rate(rec.transcript, heard) <= 0.35, heard
    (reply, *_) = [a for a in state["assistant"] if a["text"]]
    assert reply["done"] and not reply["interrupted"], reply
    assert state["received"] == 0  # no audio on the data channel: the reply came as RTP
    kinds = state["events"]
    assert kinds[0] == "ready" and kinds.index("transcript_final") < kinds.index("turn_end")
    for _ in range(100):  # the page's Stop closed the peer connection: its session ends on the server
        if not any(c.peer is not None for c in voice_server.connections.values()):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the WebRTC session outlived the page's Stop")


async def test_page_with_a_language_shows_the_language_each_turn_was_heard_in(voice_server, tmp_path):
    """``/?language=auto``: the page says so in its hello; a Spanish speaker's turn is shown as Spanish."""
    wav = padded_wav(ROOT / "tests" / "fixtures" / "languages" / "es_fleurs_test_es006.wav", tmp_path / "mic.wav")
    done = "window.voiceState.transcripts.length > 0"
    state, _ = await run_page(voice_server, wav, done, timeout=120, query="&language=auto")
    (user, *_) = [t for t in state["dom"] if "user" in t["cls"]]
    assert user["who"] == "You · es" and user["lang"] == "es", user
    assert "luchadores" in user["text"].lower(), user
