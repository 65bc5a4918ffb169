"""The thread pool whose threads do not hold up the end of the process."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import CancelledError

import pytest

from nfd.daemonpool import DaemonPool


def test_results_and_errors_come_back_through_the_futures() -> None:
    pool = DaemonPool(2, "t")
    try:
        assert [pool.submit(pow, 2, n).result(5) for n in range(4)] == [1, 2, 4, 8]
        with pytest.raises(ZeroDivisionError):
            pool.submit(lambda: 1 / 0).result(5)
    finally:
        pool.shutdown()


def test_at_most_max_workers_threads_run_the_calls() -> None:
    pool = DaemonPool(2, "t")
    gate = threading.Event()
    running: list[str] = []
    both = threading.Barrier(3)

    def call() -> None:
        running.append(threading.current_thread().name)
        if len(running) <= 2:
            both.wait(5)
        gate.wait(5)

    futures = [pool.submit(call) for _ in range(3)]
    both.wait(5)  # two calls run; the third waits for a thread
    assert sorted(running) == ["t-0", "t-1"]
    gate.set()
    for f in futures:
        f.result(5)
    assert len(running) == 3 and set(running) == {"t-0", "t-1"}
    pool.shutdown()


def test_shutdown_cancels_what_has_not_started_and_refuses_more() -> None:
    pool = DaemonPool(1, "t")
    gate = threading.Event()
    busy = pool.submit(gate.wait, 5)
    queued = pool.submit(int, "1")
    pool.shutdown(wait=False, cancel_futures=True)
    gate.set()
    assert busy.result(5) is True
    with pytest.raises(CancelledError):
        queued.result(5)
    with pytest.raises(RuntimeError):
        pool.submit(int, "2")


def test_a_call_still_blocked_does_not_keep_the_process_alive() -> None:
    # concurrent.futures' own pool joins its threads at exit: this process would wait
    # for the blocked call for good.
    code = (
        "import threading\n"
        "from nfd.daemonpool import DaemonPool\n"
        "pool = DaemonPool(1, 'blocked')\n"
        "pool.submit(threading.Event().wait)\n"
        "pool.shutdown(wait=False)\n"
        "print('done', flush=True)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert (p.returncode, p.stdout) == (0, "done\n"), p.stderr
