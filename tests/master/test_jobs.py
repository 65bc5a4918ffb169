"""The master's periodic jobs: one AsyncIOScheduler in the event loop."""

from __future__ import annotations

import asyncio

import pytest

from nfd.master.core.jobs import Jobs


async def test_a_job_runs_in_the_loop_and_stop_cancels_a_running_one() -> None:
    jobs = Jobs()
    started, cancelled = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    ran_in: list[asyncio.AbstractEventLoop] = []

    async def job() -> None:
        ran_in.append(asyncio.get_running_loop())
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    jobs.start()
    jobs.every(3600, job, job_id="test", first_now=True)
    await asyncio.wait_for(started.wait(), 10)
    jobs.stop()
    await asyncio.wait_for(cancelled.wait(), 10)
    assert ran_in == [loop]


def test_only_a_coroutine_function_is_a_job() -> None:
    def blocking() -> None:  # APScheduler would run it on a thread, off the loop
        pass

    with pytest.raises(TypeError, match="coroutine function"):
        Jobs().every(60, blocking, job_id="blocking")  # type: ignore[arg-type]
