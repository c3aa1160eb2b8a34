"""Several voice workers behind one front door, as deploy/ ships them: Debian's HAProxy with
deploy/haproxy.cfg, two `python -m voice.run --serve` processes sharing two vLLM servers and one
PostgreSQL database (Debian's, on a private port). Real clients speak real recordings through
the front door.

- New sessions go only to workers with room: a full or draining worker is skipped, and with
  every worker full the front door refuses (503) rather than overload one.
- A drained worker (SIGTERM) takes no new session, finishes the live one, then exits 0.
- A conversation whose worker is killed (SIGKILL) resumes on another, from the shared store.
"""

from __future__ import annotations

import asyncio
import signal
import time

import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from shell.models import llm_model_path
from tests.conftest import recordings
from transport.client import talk
from transport.files import load_audio
from voice.app.store import ConversationStore
from voice.bench.common import free_port
from voice.bench.deployment import FrontDoor, Worker, worker_args
from voice.bench.vllm_server import launch_vllm_server, stop_server

pytestmark = [pytest.mark.engines, pytest.mark.asyncio(loop_scope="module")]


def _speech(name: str, lead_s: float = 0.0) -> np.ndarray:
    audio = load_audio(next(r for r in recordings() if name in r.name).path)
    return np.concatenate([np.zeros(round(lead_s * 16000), np.float32), audio])


class Deployment:
    def __init__(self, workers: list[Worker], front: FrontDoor, db: str) -> None:
        self.workers, self.front, self.db = workers, front, db

    @property
    def url(self) -> str:
        return self.front.url

    def serving(self) -> list[Worker]:
        """The workers that hold a session now."""
        return [w for w in self.workers if w.sessions]

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
    work = tmp_path_factory.mktemp("deployment")
    servers = []
    for i in (1, 2):  # two vLLM servers: each worker's pool routes a conversation to the one caching it
        (work / f"vllm{i}").mkdir()
        servers.append(launch_vllm_server(llm_model_path("smollm2-135m"), work / f"vllm{i}"))
    db = postgres.create_database("workers")
    address = f"127.0.0.1:{free_port()}"
    args = worker_args(db, [url for url, _ in servers], address, 1, "--drain-timeout", "60")
    workers = [Worker(free_port(), work / f"worker{i}.log", args) for i in (1, 2)]
    front = None
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.wait_ready()
        front = FrontDoor(address, workers, 1, work / "haproxy.log")
        yield Deployment(workers, front, db)
    finally:
        for w in workers:
            w.stop()
        if front is not None:
            front.close()
        for _, proc in servers:
            stop_server(proc)


async def test_sessions_go_to_workers_with_room_and_a_drained_worker_finishes_its_own(deployment):
    d = deployment
    await d.wait_checked()
    # A first conversation; 3 s of silence before the question leave time to drain its worker.
    first = asyncio.create_task(talk(d.url, _speech("aew_a0003", lead_s=3.0), quiet_s=3.0))
    (a,) = await d.wait_for(d.serving)
    (b,) = [w for w in d.workers if w is not a]
    a.proc.send_signal(signal.SIGTERM)  # drain: no new session, the live one goes on
    await d.wait_for(lambda: (a.health() or {}).get("status") == "draining")
    await d.wait_checked()
    # A second one goes to the other worker, while the first goes on on the draining one.
    second = asyncio.create_task(talk(d.url, _speech("axb_a0004", lead_s=2.0), quiet_s=3.0))
    await d.wait_for(lambda: b.sessions == 1)
    assert a.sessions == 1
    await d.wait_checked()
    # Every worker is full or draining: a third is refused by the front door, not squeezed in.
    with pytest.raises(InvalidStatus) as refused:
        async with connect(d.url, open_timeout=30):
            pass
    assert refused.value.response.status_code == 503
    one, two = await asyncio.gather(first, second)
    for result in (one, two):
        kinds = [e["type"] for e in result.events]
        errors = [e for e in result.events if e["type"] == "error"]
        assert "turn_end" in kinds and not errors, (errors, kinds)
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
    served.kill()
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
