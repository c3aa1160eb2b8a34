"""`python -m voice.run` as a user runs it: bad input is one line and exit 2;
the main job writes the reply, the event log and the transcript; Ctrl+C while
the engines load is one line and exit 130."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from core.events import (
    AsrFinal,
    AsrPartial,
    LlmFirstToken,
    PlaybackEnd,
    PlaybackStart,
    SpeechEnd,
    SpeechStart,
    TtsChunk,
    TurnEnd,
    event_from_json,
)
from tests.conftest import FIXTURES, ROOT
from voice.bench.scoring import word_error_rate


def voice_run(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "voice.run", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0]


def test_missing_file(tmp_path):
    assert_one_line_error(voice_run("--replay", str(tmp_path / "nope.wav"), "--out", str(tmp_path)), "no such file")


def test_not_audio(tmp_path):
    bad = tmp_path / "notes.wav"
    bad.write_text("this is not audio\n")
    assert_one_line_error(voice_run("--replay", str(bad), "--out", str(tmp_path)), "not a readable audio file")


def test_empty_audio(tmp_path):
    empty = tmp_path / "empty.wav"
    sf.write(empty, [], 16000)
    assert_one_line_error(voice_run("--replay", str(empty), "--out", str(tmp_path)), "empty")


def test_missing_model_names_the_setup_command(tmp_path):
    proc = voice_run(
        "--replay", str(FIXTURES / "ljspeech_LJ001-0002.wav"), "--out", str(tmp_path),
        env={"VOICE_MODELS_DIR": str(tmp_path / "no-models")},
    )  # fmt: skip
    assert_one_line_error(proc, "scripts/setup")


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        ("__all__ = ['f']\ndef f(:\n", "syntax error"),
        ('__all__ = ["f"]\ndef f(city):\n    "The weather."\n', "city has no type annotation"),
        ('__all__ = ["get_current_time"]\ndef get_current_time() -> str:\n    "Now."\n', "already defined"),
        ('def f(city: str) -> str:\n    "The weather."\n', "__all__"),
    ],
    ids=["syntax", "annotation", "clash", "no-all"],
)
def test_a_bad_tools_file_is_one_line_at_start_up(tmp_path, source, needle):
    tools = tmp_path / "my_tools.py"
    tools.write_text(source)
    wav = tmp_path / "q.wav"
    sf.write(wav, np.zeros(16000, dtype=np.float32), 16000)
    proc = voice_run("--replay", str(wav), "--out", str(tmp_path), "--tools", "builtin", "--tools", str(tools))
    assert_one_line_error(proc, "--tools", needle)


def test_tools_need_a_model_that_can_call_them(tmp_path):
    wav = tmp_path / "q.wav"
    sf.write(wav, np.zeros(16000, dtype=np.float32), 16000)
    proc = voice_run("--replay", str(wav), "--tools", "builtin", "--llm-model", "smollm2-135m")
    assert_one_line_error(proc, "cannot call tools")


@pytest.mark.parametrize("url", ["mysql://me:secret@db.example/voice", "postgresql+asyncpg://x"])
def test_a_database_url_of_another_kind_is_one_line_and_makes_no_folder(url):
    before = set(ROOT.iterdir())
    proc = voice_run("--serve", "--port", "0", "--db", url, timeout=120)
    assert_one_line_error(proc, "--db", "is not a database this program stores conversations in")
    assert "secret" not in proc.stderr and set(ROOT.iterdir()) == before


def test_unknown_option_is_a_usage_error():
    proc = voice_run("--no-such-option")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


@pytest.mark.engines
def test_main_job_replays_a_stereo_44k_recording(tmp_path):
    """The README's main job, on a file at another rate and in stereo."""
    import numpy as np

    from core.audio import resample
    from transport.files import load_audio

    mono = load_audio(FIXTURES / "cmu_arctic_us_aew_a0003.wav")
    stereo = np.stack([resample(mono, 16000, 44100)] * 2, axis=1)
    src = tmp_path / "stereo44k.flac"
    sf.write(src, stereo, 44100)
    out, db, rec = tmp_path / "out", tmp_path / "c.db", tmp_path / "rec"
    proc = voice_run("--replay", str(src), "--out", str(out), "--fast", "--record", str(rec), "--db", str(db))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "transcript:" in proc.stdout and "voice-to-voice" in proc.stdout
    transcript = json.loads((out / "transcript.json").read_text())
    assert [t["role"] for t in transcript] == ["user", "assistant"]
    ref = "For the twentieth time that evening the two men shook hands."
    assert word_error_rate(ref, transcript[0]["text"]) <= 0.2
    lines = (out / "events.jsonl").read_text().splitlines()
    events = [event_from_json(json.loads(line)) for line in lines]  # every line is a known event
    assert [json.dumps(e.to_json(), ensure_ascii=False) for e in events] == lines  # and reads back as it was written
    kinds = {type(e) for e in events}
    want = {SpeechStart, SpeechEnd, AsrPartial, AsrFinal, LlmFirstToken, TtsChunk}
    assert want | {PlaybackStart, PlaybackEnd, TurnEnd} <= kinds
    reply, rate = sf.read(out / "reply.wav")
    assert rate == 24000 and len(reply) / rate >= len(mono) / 16000
    assert abs(reply).max() > 0.1
    # --record: one stereo file, the assistant right (reply.wav, sample for sample), the person left
    (recording,) = rec.glob("*.wav")
    both, rate = sf.read(recording)
    n = len(both)
    assert rate == 24000 and both.shape[1] == 2 and np.array_equal(both[:, 1], reply[:n])
    assert not reply[n:].any()  # reply.wav's last block of silence, after the microphone ended
    heard = resample(load_audio(src), 16000, 24000)
    assert np.abs(both[: len(heard), 0] - heard).max() < 2e-4  # the input, at 16 bits
    # ... kept with the stored conversation, and exported with it
    listed = subprocess.run(
        [sys.executable, "-m", "voice.history", "--db", str(db), "export", recording.stem,
         "--audio", str(tmp_path / "x")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    (session,) = json.loads(listed.stdout)["sessions"]
    assert session["meta"]["recordings"] == [str(recording.resolve())]
    assert (tmp_path / "x" / recording.name).read_bytes() == recording.read_bytes()


def test_end_of_turn_flags_out_of_range_are_one_line():
    question = str(FIXTURES / "ljspeech_LJ001-0002.wav")
    smart = ("--turn-detector", "smart-turn")
    proc = voice_run(
        "--replay", question, *smart, "--turn-first-check-ms", "2500", "--turn-max-wait-ms", "2000", timeout=60
    )
    assert_one_line_error(proc, "--turn-*", "first_check_s")
    assert_one_line_error(voice_run("--replay", question, *smart, "--turn-threshold", "0", timeout=60), "threshold")
    proc = voice_run("--replay", question, "--turn-detector", "vad", timeout=60)
    assert proc.returncode == 2 and "smart-turn" in proc.stderr and "Traceback" not in proc.stderr


def test_the_end_of_turn_flags_make_the_session_config():
    from shell.config import SessionConfig
    from voice.app.cli import build_parser, end_of_turn_config

    assert end_of_turn_config(build_parser().parse_args(["--turn-detector", "silence"])) is None
    default = end_of_turn_config(build_parser().parse_args([]))  # Smart Turn (README: Turn-taking)
    assert default == end_of_turn_config(build_parser().parse_args(["--turn-detector", "smart-turn"]))
    assert default is not None and (default.first_check_s, default.recheck_s, default.max_wait_s) == (0.2, None, 2.0)
    assert default == SessionConfig().end_of_turn  # the library's default too
    args = build_parser().parse_args(
        [
            "--turn-detector",
            "smart-turn",
            "--turn-threshold",
            "0.7",
            "--turn-first-check-ms",
            "300",
            "--turn-recheck-ms",
            "0",
            "--turn-max-wait-ms",
            "3000",
        ]
    )
    cfg = end_of_turn_config(args)
    assert cfg is not None and (cfg.threshold, cfg.first_check_s, cfg.recheck_s, cfg.max_wait_s) == (
        0.7,
        0.3,
        None,
        3.0,
    )


def test_the_words_can_be_left_unread_and_the_early_final_moved():
    from voice.app.cli import build_parser, end_of_turn_config

    parse = build_parser().parse_args
    assert end_of_turn_config(parse([])).min_sentence_end == 0.005
    assert end_of_turn_config(parse(["--turn-min-sentence-end", "0"])).min_sentence_end is None
    assert end_of_turn_config(parse(["--turn-min-sentence-end", "0.01"])).min_sentence_end == 0.01
    assert parse([]).early_final_ms == 128
    question = str(FIXTURES / "ljspeech_LJ001-0002.wav")
    assert_one_line_error(voice_run("--replay", question, "--early-final-ms", "0", timeout=60), "--early-final-ms")


def test_serving_off_loopback_needs_a_token():
    assert_one_line_error(voice_run("--serve", "--host", "0.0.0.0", env={"VOICE_TOKEN": ""}, timeout=60), "token")


def test_serve_starts_answers_health_and_a_client_then_stops_on_sigint(tmp_path):
    """The server as a user runs it: a real process, a real client, Ctrl+C."""
    import signal
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voice.run",
            "--serve",
            "--port",
            str(port),
            "--db",
            str(tmp_path / "c.db"),
            "--record",
            str(tmp_path / "rec"),
        ],
        cwd=ROOT,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    assert json.loads(r.read())["status"] == "ready"
                    break
            except OSError:
                time.sleep(1)
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read().decode()
        assert "<html" in page.lower()
        client = subprocess.run(
            [sys.executable, "-m", "transport.client", str(FIXTURES / "cmu_arctic_us_axb_a0004.wav"),
             "--url", f"ws://127.0.0.1:{port}/ws", "--out", str(tmp_path / "client")],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert client.returncode == 0, client.stderr[-2000:]
        assert "you:" in client.stdout and "assistant:" in client.stdout
        assert (tmp_path / "client" / "reply.wav").stat().st_size > 10000
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        # --record: the client's conversation, named by its stored session, with the reply it heard
        (recording,) = (tmp_path / "rec").glob("*.wav")
        both, rate = sf.read(recording)
        assert rate == 24000 and both.shape[1] == 2 and abs(both[:, 0]).max() > 0.1 and abs(both[:, 1]).max() > 0.1
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def session_processes(sid: int) -> list[str]:
    """``pid args`` of every process left in the session ``sid``."""
    ps = subprocess.run(["ps", "-s", str(sid), "-o", "pid=,args="], capture_output=True, text=True)
    return [line.strip() for line in ps.stdout.splitlines()]


@pytest.mark.engines
def test_ctrl_c_while_the_engines_load_is_one_line_and_130_and_leaves_no_process(tmp_path):
    """Ctrl+C as a terminal sends it, to the whole process group, while vLLM's engine core starts
    (before, its traceback and its worker's ran to a hundred lines)."""
    import signal
    import time

    env = {k: v for k, v in os.environ.items() if k != "VLLM_LOGGING_LEVEL"}  # as a user runs it
    stderr = tmp_path / "stderr"
    # Started as from a terminal, SIGINT at its default. A test run started in the background
    # (nohup, &) ignores SIGINT, and an ignored signal stays ignored through exec: voice.run then
    # rightly ignores Ctrl+C too. A handled one is reset to the default.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with open(stderr, "w") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "voice.run", "--replay", str(FIXTURES / "cmu_arctic_us_aew_a0003.wav"),
                 "--out", str(tmp_path / "out"), "--fast"],
                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        deadline = time.monotonic() + 300
        # Its engine core, up and loading the model: the signal comes while the engines load.
        while not any("EngineCore" in p for p in session_processes(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, stderr.read_text()[-2000:]
            time.sleep(0.2)
        time.sleep(1)  # the engine core is loading the model
        before = stderr.read_text()
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(120) == 130, stderr.read_text()[-2000:]
        said = stderr.read_text()
        assert said[len(before) :].splitlines() == ["voice.run: interrupted while loading the engines"], said
        assert "Traceback" not in said
        deadline = time.monotonic() + 10
        while session_processes(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert session_processes(proc.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def test_an_unsure_finished_can_be_left_to_the_model():
    from voice.app.cli import build_parser, end_of_turn_config

    parse = build_parser().parse_args
    assert end_of_turn_config(parse([])).sure_threshold == 0.85
    assert end_of_turn_config(parse(["--turn-sure-threshold", "0"])).sure_threshold is None
