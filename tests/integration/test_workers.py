"""Several voice workers behind one front door, as deploy/ ships them: Debian's HAProxy with
deploy/haproxy.cfg, two `python -m voice.run --serve` processes sharing one vLLM server and one
PostgreSQL database (Debian's, on a private port). Real clients speak real recordings through
the front door.

- New sessions go only to workers with room: a full or draining worker is skipped, and with
  every worker full the front door refuses (503) rather than overload one.
- A drained worker (SIGTERM) takes no new session, finishes the live one, then exits 0.
- A conversation whose worker is killed (SIGKILL) resumes on another, from the shared store.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.conftest import ROOT, recordings
from tests.integration.servers import free_port, launch_vllm_server, stop_server
from transport.client import talk
from transport.files import load_audio
from voice.app.store import ConversationStore
from voice.shell.models import llm_model_path

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="module")]


def _speech(name: str, lead_s: float = 0.0) -> np.ndarray:
    audio = load_audio(next(r for r in recordings() if name in r.name).path)
    return np.concatenate([np.zeros(round(lead_s * 16000), np.float32), audio])


class Worker:
    """One `voice.run --serve` process of the deployment."""

    def __init__(self, port: int, db: str, llm_url: str, front: str, log: Path) -> None:
        self.port, self.db, self.llm_url, self.front, self.log = port, db, llm_url, front, log
        self.proc: subprocess.Popen | None = None

    def start(self) -> Worker:
        log = open(self.log, "a")  # noqa: SIM115 - the process holds it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "voice.run", "--serve", "--port", str(self.port), "--db", self.db,
             "--llm-url", self.llm_url, "--public-url", f"http://{self.front}", "--max-sessions", "1",
             "--drain-timeout", "60", "--log-json"],
            cwd=ROOT, stdout=log, stderr=log, start_new_session=True,  # its own group: killed whole
        )  # fmt: skip
        return self

    def health(self) -> dict | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:  # 503: full or draining, and says so
            return json.loads(e.read())
        except OSError:
            return None

    def wait_ready(self, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, self.log.read_text()[-3000:]
            if (self.health() or {}).get("status") == "ready":
                return
            time.sleep(0.5)
        raise AssertionError(f"worker on {self.port} not ready: {self.log.read_text()[-3000:]}")

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        if sig == signal.SIGKILL:
            os.killpg(self.proc.pid, sig)  # the whole process group, at once: as a crash or an OOM kill
        else:
            self.proc.send_signal(sig)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


class Deployment:
    def __init__(self, workers: list[Worker], front: str, db: str) -> None:
        self.workers, self.front, self.db = workers, front, db

    @property
    def url(self) -> str:
        return f"ws://{self.front}/ws"

    def serving(self) -> list[Worker]:
        """The workers that hold a session now."""
        return [w for w in self.workers if (w.health() or {}).get("sessions")]

    async def wait_for(self, predicate, timeout_s: float = 60):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if value := predicate():
                return value
            await asyncio.sleep(0.2)
        raise AssertionError("timed out")

    async def wait_checked(self) -> None:
        """Long enough for HAProxy to have checked every worker since the last change (inter 1s)."""
        await asyncio.sleep(2.5)


@pytest.fixture(scope="module")
def deployment(postgres, tmp_path_factory):
    if shutil.which("haproxy") is None:
        pytest.fail("HAProxy is not installed: scripts/setup installs Debian's haproxy")
    work = tmp_path_factory.mktemp("deployment")
    llm_url, llm = launch_vllm_server(llm_model_path("smollm2-135m"), work)
    db = postgres.create_database("workers")
    front = f"127.0.0.1:{free_port()}"
    workers = [Worker(free_port(), db, llm_url, front, work / f"worker{i}.log") for i in (1, 2)]
    env = {
        **os.environ,
        "VOICE_FRONT": front,
        "VOICE_WORKER_1": f"127.0.0.1:{workers[0].port}",
        "VOICE_WORKER_2": f"127.0.0.1:{workers[1].port}",
        "VOICE_WORKER_3": f"127.0.0.1:{free_port()}",  # deploy/haproxy.cfg names three; nobody listens here
        "VOICE_WORKER_SESSIONS": "1",
    }
    haproxy_log = open(work / "haproxy.log", "w")  # noqa: SIM115 - the process holds it
    haproxy = subprocess.Popen(
        ["haproxy", "-f", str(ROOT / "deploy" / "haproxy.cfg"), "-db"], env=env, stdout=haproxy_log, stderr=haproxy_log
    )
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.wait_ready()
        assert haproxy.poll() is None, (work / "haproxy.log").read_text()
        yield Deployment(workers, front, db)
    finally:
        for w in workers:
            w.stop()
        haproxy.terminate()
        haproxy.wait(10)
        stop_server(llm)


async def test_sessions_go_to_workers_with_room_and_a_drained_worker_finishes_its_own(deployment):
    d = deployment
    await d.wait_checked()
    # A first conversation; 3 s of silence before the question leave time to drain its worker.
    first = asyncio.create_task(talk(d.url, _speech("aew_a0003", lead_s=3.0), quiet_s=3.0))
    (a,) = await d.wait_for(d.serving)
    (b,) = [w for w in d.workers if w is not a]
    a.signal(signal.SIGTERM)  # drain: no new session, the live one goes on
    await d.wait_for(lambda: (a.health() or {}).get("status") == "draining")
    await d.wait_checked()
    # A second one goes to the other worker, while the first goes on on the draining one.
    second = asyncio.create_task(talk(d.url, _speech("axb_a0004", lead_s=2.0), quiet_s=3.0))
    await d.wait_for(lambda: (b.health() or {}).get("sessions") == 1)
    assert a.health()["sessions"] == 1
    await d.wait_checked()
    # Every worker is full or draining: a third is refused by the front door, not squeezed in.
    with pytest.raises(InvalidStatus) as refused:
        async with connect(d.url, open_timeout=30):
            pass
    assert refused.value.response.status_code == 503
    one, two = await asyncio.gather(first, second)
    for result in (one, two):
        kinds = [e["type"] for e in result.events]
        assert "turn_end" in kinds and "error" not in kinds, kinds
        assert result.played > 0.5 * result.output_rate  # the reply was heard
    # The drained worker ended its session whole, then exited by itself.
    assert await asyncio.to_thread(a.proc.wait, 60) == 0, a.log.read_text()[-3000:]
    log = a.log.read_text()
    assert one.session in log and two.session not in log and "drained: 1 sessions ended, 0 cut" in log
    with ConversationStore.open(d.db) as store:
        assert [t.role for t in store.turns(one.session)] == ["user", "assistant"]
        assert [t.role for t in store.turns(two.session)] == ["user", "assistant"]
    a.start().wait_ready()  # back for the next test


async def test_a_conversation_resumes_on_another_worker_after_its_own_is_killed(deployment):
    d = deployment
    await d.wait_checked()
    question = _speech("aew_a0003")
    before = await talk(d.url, question, quiet_s=3.0)
    assert [t["type"] for t in before.events].count("turn_end") == 1
    with ConversationStore.open(d.db) as store:
        stored = [(t.role, t.text) for t in store.turns(before.session)]
    assert [r for r, _ in stored] == ["user", "assistant"]
    served = next(w for w in d.workers if before.session in w.log.read_text())
    served.signal(signal.SIGKILL)
    served.proc.wait(10)
    # The client comes back with its id through the same front door: the other worker has it.
    after = await talk(d.url, _speech("axb_a0004"), resume=before.session, quiet_s=3.0)
    assert after.session == before.session
    assert [(t["role"], t["text"]) for t in after.history] == stored
    kinds = [e["type"] for e in after.events]
    assert "turn_end" in kinds and "error" not in kinds, kinds
    with ConversationStore.open(d.db) as store:
        assert [t.role for t in store.turns(before.session)] == ["user", "assistant", "user", "assistant"]
    other = next(w for w in d.workers if w is not served)
    assert before.session in other.log.read_text()
    served.start().wait_ready()
