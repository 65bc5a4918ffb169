"""The master's periodic jobs, on one APScheduler ``AsyncIOScheduler`` in its event loop.

Every job that runs on a clock goes here: garbage collection, the publisher's full
resync, a follower's copy of the leader's nodes, the certificate's renewal. A job does
not overlap itself (``max_instances=1``) and runs missed by a busy loop are folded into
one (``coalesce``). Its first run is one interval after it is added, as a timer's would
be, unless it asks for one at once. A job logs its own failures; one that raises anyway is logged by the scheduler and
runs again at its next time.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger(__name__)


class Jobs:
    def __init__(self) -> None:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        sched_log = logging.getLogger(f"{__name__}.apscheduler")
        sched_log.setLevel(logging.ERROR)  # its job errors, not a line per run
        self._sched: Any = AsyncIOScheduler(
            logger=sched_log,
            timezone=UTC,
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )

    def every(
        self,
        seconds: float,
        job: Callable[[], Coroutine[Any, Any, object]],
        *,
        job_id: str,
        first_now: bool = False,
    ) -> None:
        """Run ``job`` every ``seconds`` (replacing a job of that id); with ``first_now``,
        the first run is now rather than an interval from now."""
        # APScheduler runs anything but a coroutine function on a thread, off the loop.
        if not inspect.iscoroutinefunction(job):
            raise TypeError(f"job {job_id}: a coroutine function is needed, not {job!r}")
        self._sched.add_job(
            job,
            "interval",
            seconds=seconds,
            id=job_id,
            replace_existing=True,
            **({"next_run_time": datetime.now(UTC)} if first_now else {}),
        )

    def cancel(self, job_id: str) -> None:
        if self._sched.get_job(job_id) is not None:
            self._sched.remove_job(job_id)

    def start(self) -> None:
        """Start running jobs; call it in the event loop they run in."""
        if not self._sched.running:
            self._sched.start()

    def stop(self) -> None:
        if self._sched.running:
            self._sched.shutdown(wait=False)
