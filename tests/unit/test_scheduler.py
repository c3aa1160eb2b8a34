"""The engines' queues (shell/scheduler.py): order by urgency, cancellation, shedding, on scripted submissions.

Each test holds the queue's one thread on a gate, submits the work it scripts,
then opens the gate and reads the order the work ran in.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from shell.clock import VirtualClock
from shell.scheduler import EngineQueue, Serves, Shed
from shell.work import Work


class Gated:
    """An engine queue whose thread is held on a gate, and the order its work ran in."""

    def __init__(self, priority: bool = True) -> None:
        self.queue = EngineQueue("test", priority=priority)
        self.ran: list[str] = []
        self.gate = threading.Event()
        self.holding = self.queue.submit_as(Serves.AUDIO, self.gate.wait)

    def job(self, name: str):
        def run() -> str:
            self.ran.append(name)
            return name

        return run

    def release(self) -> None:
        self.gate.set()
        self.queue.shutdown(wait=True)


def test_the_most_urgent_work_runs_first_and_the_same_urgency_in_arrival_order():
    g = Gated()
    for name, serves in [
        ("partial", Serves.BACKGROUND),
        ("final", Serves.DECISION),
        ("speech", Serves.AUDIO),
        ("other final", Serves.DECISION),
        ("speculation", Serves.BACKGROUND),
        ("echo", Serves.HEARING),
        ("interruption check", Serves.INTERRUPTION),
    ]:
        g.queue.submit_as(serves, g.job(name))
    g.release()
    assert g.ran == ["echo", "interruption check", "speech", "final", "other final", "partial", "speculation"]
    assert g.queue.stats.ran == {
        Serves.AUDIO: 2,
        Serves.DECISION: 2,
        Serves.BACKGROUND: 2,
        Serves.HEARING: 1,
        Serves.INTERRUPTION: 1,
    }


def test_without_priority_the_queue_keeps_arrival_order_as_before():
    g = Gated(priority=False)
    for name, serves in [("partial", Serves.BACKGROUND), ("final", Serves.DECISION), ("speech", Serves.AUDIO)]:
        g.queue.submit_as(serves, g.job(name))
    g.release()
    assert g.ran == ["partial", "final", "speech"]


def test_work_cancelled_while_queued_never_runs():
    g = Gated()
    dropped = g.queue.submit_as(Serves.BACKGROUND, g.job("discarded speculation"))
    kept = g.queue.submit_as(Serves.AUDIO, g.job("reply"))
    assert dropped.cancel()
    g.release()
    assert g.ran == ["reply"] and kept.result() == "reply"
    assert g.queue.stats.cancelled == 1


def test_a_preview_that_waited_too_long_on_its_sessions_clock_is_shed_and_the_rest_runs():
    g = Gated()
    now = [0.0]
    stale = g.queue.submit_as(Serves.BACKGROUND, g.job("old partial"), now=lambda: now[0], shed_after_s=1.0)
    now[0] = 0.5
    fresh = g.queue.submit_as(Serves.BACKGROUND, g.job("partial"), now=lambda: now[0], shed_after_s=1.0)
    must = g.queue.submit_as(Serves.BACKGROUND, g.job("held speech"), now=lambda: now[0])  # never shed
    now[0] = 1.2  # the first waited 1.2 s, the second 0.7 s
    g.release()
    with pytest.raises(Shed):
        stale.result()
    assert fresh.result() == "partial" and must.result() == "held speech"
    assert g.ran == ["partial", "held speech"] and g.queue.stats.shed == 1


def test_shutdown_cancels_what_is_still_queued():
    g = Gated()
    queued = g.queue.submit_as(Serves.DECISION, g.job("final"))
    g.queue.shutdown(wait=False, cancel_futures=True)
    g.gate.set()
    assert queued.cancelled() and g.ran == []
    with pytest.raises(RuntimeError):
        g.queue.submit_as(Serves.DECISION, g.job("late"))


def test_a_plain_executor_submission_counts_as_a_decision():
    g = Gated()
    g.queue.submit_as(Serves.BACKGROUND, g.job("partial"))
    future = g.queue.submit(g.job("run_in_executor"))
    g.release()
    assert g.ran == ["run_in_executor", "partial"] and future.result() == "run_in_executor"


# -- through the sessions' Work -------------------------------------------------------------


async def test_a_task_cancelled_while_its_pass_is_queued_leaves_no_work_to_run():
    g = Gated()
    work = Work(lambda *_: None)

    async def synthesize() -> str:
        return await work.in_thread(Serves.BACKGROUND, g.queue, g.job("speculation's sentence"))

    task = work.spawn(synthesize())
    await asyncio.sleep(0)
    await work.cancel()
    assert task.cancelled()
    await asyncio.to_thread(g.release)
    assert g.ran == [] and g.queue.stats.cancelled == 1


async def test_another_sessions_previews_never_delay_a_committed_reply():
    g = Gated()
    first = Work(lambda *_: None)
    second = Work(lambda *_: None)
    previews = [second.in_thread(Serves.BACKGROUND, g.queue, g.job(f"second's partial {i}")) for i in range(3)]
    reply = first.in_thread(Serves.AUDIO, g.queue, g.job("first's reply"))
    await asyncio.to_thread(g.release)
    await asyncio.gather(reply, *previews)
    assert g.ran[0] == "first's reply"


async def test_on_virtual_time_nothing_is_shed_however_long_the_engines_take():
    clock = VirtualClock(5.0)
    g = Gated()
    work = Work(lambda *_: None, clock.now)
    partial = work.in_thread(Serves.BACKGROUND, g.queue, g.job("partial"), shed_after_s=0.001)
    await asyncio.sleep(0.05)  # wall time passes; the session's clock stands still
    await asyncio.to_thread(g.release)
    assert await partial == "partial"
