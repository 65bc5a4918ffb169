"""When passes run: at start, every interval, soon after a change, after a backoff, and
when the features change by themselves.

One APScheduler 3 interval job runs the passes. ``max_instances=1`` keeps passes from
overlapping; ``coalesce`` folds missed runs into one. A trigger (features.d change,
hot-plug) or a retry moves the job's next run time; a trigger that arrives during a
pass is remembered and runs another pass right after, because that pass may have read
the host before the change. A date job stands for the time the last pass's features
change on their own (a features.d line's ``expiry-time``, ``Worker.changes_at``): it
triggers a pass then, so an expired line is gone on time, not an interval later.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from nfd.worker.loop import Outcome, Worker

log = logging.getLogger(__name__)

JOB_ID = "nfd-worker-pass"
CHANGE_JOB_ID = "nfd-worker-features-change"
# sleepInterval 0 means "no periodic passes" (upstream); the job then waits this long.
NO_INTERVAL = timedelta(days=365)


class PassScheduler:
    def __init__(self, worker: Worker, interval: float) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        self.worker = worker
        self.interval = interval
        # A pass that outlasts a short interval makes APScheduler warn at every skipped
        # run; skipping is what max_instances=1 is for, so only its errors are shown.
        sched_log = logging.getLogger(f"{__name__}.apscheduler")
        sched_log.setLevel(logging.ERROR)
        self._sched: Any = BackgroundScheduler(
            logger=sched_log,
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(max_workers=1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._lock = threading.Lock()
        self._running = False
        self._wanted = ""  # why another pass is wanted right after the current one
        self._started = False  # set before the scheduler starts, cleared as stop() begins
        self._idle = threading.Event()  # no pass is running
        self._idle.set()
        self.last_outcome: Outcome | None = None

    def start(self) -> None:
        every = timedelta(seconds=self.interval) if self.interval > 0 else NO_INTERVAL
        self._sched.add_job(
            self._job,
            "interval",
            seconds=every.total_seconds(),
            id=JOB_ID,
            name="discover and deliver",
            next_run_time=_now(),
        )
        self._started = True  # before start(): the first pass may begin at once
        self._sched.start()

    def stop(self) -> None:
        """Stop scheduling, then wait for a running pass to end."""
        with self._lock:
            if not self._started:
                return
            self._started = False  # a pass that has not begun returns at once
        # Not shutdown(wait=True): it holds the job-store lock while it waits for the
        # running pass, and that pass takes the lock when it ends (it reschedules):
        # SIGTERM during a pass would hang the worker until it is killed.
        self._sched.shutdown(wait=False)
        self._idle.wait()

    @property
    def running(self) -> bool:
        return bool(self._started and self._sched.running)

    def trigger(self, reason: str) -> None:
        """Run a pass as soon as possible (thread-safe)."""
        with self._lock:
            if self._running:
                self._wanted = reason
                return
        log.info("pass triggered: %s", reason)
        self._run_at(_now())

    # -- internals ------------------------------------------------------------------
    def _run_at(self, when: datetime) -> None:
        if self._started:
            self._sched.modify_job(JOB_ID, next_run_time=when)

    def _job(self) -> None:
        with self._lock:
            if not self._started:  # stopping: a pass queued before shutdown does not run
                return
            self._running = True
            self._wanted = ""
            self._idle.clear()
        try:
            self._pass_and_reschedule()
        finally:
            self._idle.set()

    def _pass_and_reschedule(self) -> None:
        outcome: Outcome | None = None
        try:
            outcome = self.worker.run_pass()
            self.last_outcome = outcome
        except Exception:  # never let one bad pass stop the schedule
            log.exception("worker pass failed")
        finally:
            with self._lock:
                self._running = False
                again = self._wanted
        self._wake_for_change(self.worker.changes_at)
        if again:
            log.info("pass triggered during the last one: %s", again)
            self._run_at(_now())
        elif outcome is not None and outcome.retry_in is not None:
            self._run_at(_now() + timedelta(seconds=outcome.retry_in))

    def _wake_for_change(self, when: datetime | None) -> None:
        """One date job at ``when`` (replacing the last one), or none."""
        if not self._started:
            return
        if when is None:
            if self._sched.get_job(CHANGE_JOB_ID) is not None:
                self._sched.remove_job(CHANGE_JOB_ID)
            return
        self._sched.add_job(
            self.trigger,
            "date",
            run_date=max(when, _now()),
            args=["features change (features.d expiry time)"],
            id=CHANGE_JOB_ID,
            name="features change",
            replace_existing=True,
        )


def _now() -> datetime:
    return datetime.now(UTC)
