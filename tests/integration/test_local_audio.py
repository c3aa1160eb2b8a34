"""`python -m voice.run` at a desk, on real (virtual) audio devices: a PulseAudio server
with a null sink as the speaker and a remap source as the microphone, started here.
A recording is played into the microphone with paplay; the speaker is recorded from
its monitor with parec; the events come from --log-json."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from core.events import AsrFinal, BargeIn, Event, PlaybackStart, Truncate, TtsChunk, TurnEnd
from tests.conftest import ROOT, recordings
from transport.files import load_audio
from voice.app.logs import read_events
from voice.app.store import ConversationStore
from voice.bench.pulse import loop_back, start_pulse

pytestmark = [
    pytest.mark.engines,
    pytest.mark.skipif(shutil.which("pulseaudio") is None, reason="needs PulseAudio (scripts/setup installs it)"),
]


def _rec(name: str):
    return next(r for r in recordings() if name in r.name)


@pytest.fixture(scope="module")
def pulse(tmp_path_factory):
    proc, env = start_pulse(tmp_path_factory.mktemp("pulse"))
    yield env
    proc.terminate()
    proc.wait(10)


class Desk:
    """voice.run in a subprocess, and a person at the microphone."""

    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.env, self.tmp = env, tmp
        self.db = tmp / "conversations.db"
        self.err = open(tmp / "run.err", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "voice.run", "--db", str(self.db), "--log-json", "--record", str(tmp / "rec")],
            cwd=ROOT, env=env, stdout=open(tmp / "run.out", "w"), stderr=self.err,  # noqa: SIM115
            start_new_session=True,  # killed as a group on failure: vLLM's engine process too
        )  # fmt: skip
        self.recorder: subprocess.Popen | None = None

    def events(self) -> list[Event]:
        return read_events((self.tmp / "run.err").read_text())

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (self.tmp / "run.err").read_text()[-3000:]
            if predicate():
                return
            time.sleep(0.1)
        self.proc.send_signal(signal.SIGUSR1)  # voice.run prints where each thread is (faulthandler)
        time.sleep(2)
        err = (self.tmp / "run.err").read_text().splitlines()
        other = [line for line in err if not line.startswith("{")][-80:]
        raise AssertionError(
            f"no {what} in {timeout} s: {[e.type for e in self.events()]}\n"
            + "\n".join([*err[-12:], "-- not events:", *other])
        )

    def wait_until_listening(self) -> None:
        self.wait_for(lambda: "listening" in (self.tmp / "run.out").read_text(), 300, "start")

    def say(self, audio: np.ndarray, name: str, wait: bool = True) -> subprocess.Popen:
        path = self.tmp / f"{name}.wav"
        sf.write(path, audio, 16000, subtype="PCM_16")
        p = subprocess.Popen(["paplay", "--device=micfeed", str(path)], env=self.env)
        if wait:
            p.wait(60)
        return p

    def record_speaker(self) -> None:
        self.recorder = subprocess.Popen(
            ["parec", "--device=spk.monitor", "--rate=24000", "--channels=1", "--format=s16le",
             "--file-format=wav", str(self.tmp / "speaker.wav")], env=self.env,
        )  # fmt: skip

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(60)
        if self.recorder is not None:
            self.recorder.terminate()
            self.recorder.wait(10)
        self.err.close()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.recorder is not None and self.recorder.poll() is None:
            self.recorder.kill()


def _of(events, kind):
    return [e for e in events if isinstance(e, kind)]


def test_speak_be_answered_and_interrupt_at_the_desk(pulse, tmp_path):
    desk = Desk(pulse, tmp_path)
    try:
        desk.wait_until_listening()
        desk.record_speaker()
        desk.say(load_audio(_rec("aew_a0003").path), "question")
        desk.wait_for(lambda: _of(desk.events(), PlaybackStart), 60, "reply")
        time.sleep(1.5)
        desk.say(load_audio(_rec("LJ001-0005").path)[: 16000 * 3], "interruption")
        desk.wait_for(lambda: _of(desk.events(), BargeIn), 30, "barge-in")
        desk.wait_for(lambda: len(_of(desk.events(), TurnEnd)) >= 2, 90, "the answer to the interruption")
        assert desk.stop() == 0
    finally:
        desk.kill()
    events = desk.events()
    (trunc,) = _of(events, Truncate)
    assert trunc.audio_end_ms >= 1400  # the 1.5 s before the person spoke came out of the speaker
    out = (tmp_path / "run.out").read_text()
    assert "you:" in out and "assistant:" in out and "✂ cut" in out
    # The conversation is stored: the cut reply as far as it was heard.
    with ConversationStore.open(desk.db) as store:
        (record,) = store.list_sessions()
        turns = store.turns(record.id)
    assert [t.role for t in turns][:3] == ["user", "assistant", "user"]
    cut = turns[1]
    assert cut.interrupted and cut.text == trunc.text and len(cut.text) < len(cut.generated_text)
    # --record: the conversation in stereo, named by its stored session, which keeps its name
    recording = tmp_path / "rec" / f"{record.id}.wav"
    assert record.meta["recordings"] == [str(recording.resolve())]
    both, rate = sf.read(recording, dtype="float32")
    assert rate == 24000 and np.abs(both[:, 0]).max() > 0.05 and np.abs(both[:, 1]).max() > 0.05
    # The speaker played the reply, and was silent soon after the interruption began.
    speaker, _ = sf.read(tmp_path / "speaker.wav", dtype="float32")
    assert float(np.sqrt(np.mean(speaker**2))) > 0.005


def test_its_own_voice_through_the_room_does_not_interrupt_it(pulse, tmp_path):
    # The speaker's sound comes back into the microphone at -12 dB, 40 ms later (a laptop on a desk).
    module = loop_back(pulse, -12.0, latency_ms=40)
    try:
        desk = Desk(pulse, tmp_path)
        try:
            desk.wait_until_listening()
            desk.say(load_audio(_rec("aew_a0003").path), "question")
            desk.wait_for(lambda: _of(desk.events(), TurnEnd), 90, "the end of the reply")
            assert desk.stop() == 0
        finally:
            desk.kill()
    finally:
        subprocess.run(["pactl", "unload-module", module], env=pulse)
    events = desk.events()
    (end,) = _of(events, TurnEnd)
    assert not end.interrupted and not _of(events, BargeIn)
    assert len(_of(events, TtsChunk)) >= 1


@pytest.mark.parametrize(
    ("args", "server", "needle"),
    [
        (["--output-device", "nosuch"], None, "no speaker matches that name"),
        (["--input-device", "nosuch"], None, "no microphone matches that name"),
        ([], "unix:/nonexistent/native", "no microphone found"),
    ],
    ids=["unknown-speaker", "unknown-microphone", "no-devices"],
)
def test_device_problems_are_one_line_that_says_what_to_do(pulse, tmp_path, args, server, needle):
    env = {**pulse, **({"PULSE_SERVER": server} if server else {})}
    proc = subprocess.run(
        [sys.executable, "-m", "voice.run", "--db", str(tmp_path / "c.db"), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("voice.run:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(lines) == 1 and needle in lines[0], proc.stderr


def test_a_device_that_disappears_mid_conversation_is_one_line_and_the_turns_are_kept(tmp_path):
    # Its own sound server, killed mid-conversation: every device goes at once (a USB headset pulled out).
    d = tmp_path / "pulse"
    d.mkdir()
    server, env = start_pulse(d)
    desk = Desk(env, tmp_path)
    try:
        desk.wait_until_listening()
        desk.say(load_audio(_rec("aew_a0003").path), "question")
        desk.wait_for(lambda: _of(desk.events(), AsrFinal), 60, "the transcript")
        server.kill()
        server.wait(10)
        code = desk.proc.wait(60)
        desk.err.close()
    finally:
        desk.kill()
        if server.poll() is None:
            server.kill()
    err = (tmp_path / "run.err").read_text()
    lines = [ln for ln in err.splitlines() if ln.startswith("voice.run:")]
    assert code == 1 and "Traceback" not in err and "leaked" not in err, err[-3000:]
    assert len(lines) == 1 and "audio device" in lines[0], err[-3000:]
    # What the person said before the device went is kept.
    with ConversationStore.open(desk.db) as store:
        (record,) = store.list_sessions()
        turns = store.turns(record.id)
    assert turns and turns[0].role == "user" and turns[0].text


def test_list_devices_shows_the_virtual_ones(pulse):
    proc = subprocess.run(
        [sys.executable, "-m", "voice.run", "--list-devices"], cwd=ROOT, env=pulse, capture_output=True, text=True
    )
    assert proc.returncode == 0 and "pulse" in proc.stdout
