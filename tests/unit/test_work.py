"""Work in flight and the one submission point for engine work (shell/work.py)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from shell.work import Serves, Work


async def test_settle_waits_for_every_task_and_thread_started():
    errors: list[tuple[str, str]] = []
    work = Work(lambda where, message: errors.append((where, message)))
    gate = asyncio.Event()
    with ThreadPoolExecutor(1) as pool:

        async def pass_() -> int:
            await gate.wait()
            return await work.in_thread(Serves.DECISION, pool, sum, [1, 2])

        task = work.spawn(pass_())
        assert work.busy
        settled = asyncio.ensure_future(work.settle())
        await asyncio.sleep(0)
        assert not settled.done()  # the pass is still waiting
        gate.set()
        await settled
    assert not work.busy and task.result() == 3 and errors == []
    assert work.submitted == {Serves.DECISION: 1}


async def test_a_task_that_fails_is_reported_and_counted_done():
    errors: list[tuple[str, str]] = []
    work = Work(lambda where, message: errors.append((where, message)))

    async def broken() -> None:
        raise RuntimeError("engine gone")

    work.spawn(broken())
    await work.settle()
    assert errors == [("internal", "RuntimeError('engine gone')")] and not work.busy


async def test_work_on_the_loop_runs_now_and_is_counted_by_what_it_serves():
    work = Work(lambda where, message: None)
    assert work.call(Serves.HEARING, max, 1, 2) == 2
    assert work.call(Serves.BACKGROUND, dict, a=1) == {"a": 1}
    assert work.submitted == {Serves.HEARING: 1, Serves.BACKGROUND: 1}


async def test_cancel_ends_the_tasks_in_flight():
    work = Work(lambda where, message: None)
    task = work.spawn(asyncio.sleep(60))
    await work.cancel()
    assert task.cancelled() and not work.busy
