"""The node agents' one supervised loop: rounds, wakes, a failed round logged and retried
after the backoff, a prompt stop that leaves no thread behind."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import pytest

from nfd.backoff import Backoff
from nfd.loopthread import LoopThread

# Long enough that a test passing at all shows the wait was cut short, not sat out.
HOUR = 3600.0


@dataclass
class RecordingBackoff(Backoff):
    given: list[float] = field(default_factory=list)

    def next_delay(self, retry_after: float | None = None, *, cap: float | None = None) -> float:
        delay = super().next_delay(retry_after, cap=cap)
        self.given.append(delay)
        return delay


def loop_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_stop_cuts_the_wait_short_and_joins_the_thread() -> None:
    ran = threading.Event()

    def step() -> None:
        ran.set()

    loop = LoopThread("test-loop-stop", step, interval=HOUR, join_timeout=30)
    loop.start()
    assert ran.wait(10)
    assert loop_threads("test-loop-stop")
    loop.stop()
    assert not loop.is_alive()
    assert not loop_threads("test-loop-stop")
    loop.stop()  # twice is harmless


def test_on_stop_unblocks_a_round_that_waits_on_something_else() -> None:
    inside, release = threading.Event(), threading.Event()

    def step() -> None:
        inside.set()
        release.wait()  # a pipe, a call to kubelet ...

    loop = LoopThread("test-loop-unblock", step, interval=0.0, on_stop=release.set, join_timeout=30)
    loop.start()
    assert inside.wait(10)
    loop.stop()
    assert release.is_set()
    assert not loop.is_alive()


def test_a_failed_round_is_logged_and_the_loop_goes_on_after_the_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rounds: list[int] = []
    recovered = threading.Event()

    def step() -> None:
        rounds.append(len(rounds))
        if len(rounds) <= 2:
            raise OSError(f"round {len(rounds)} broke")
        recovered.set()

    backoff = RecordingBackoff(initial=0.01, cap=1.0, jitter=0)
    loop = LoopThread("test-loop-fail", step, interval=HOUR, backoff=backoff, join_timeout=30)
    with caplog.at_level(logging.ERROR, logger="nfd.loopthread"):
        loop.start()
        try:
            assert recovered.wait(10)
        finally:
            loop.stop()
    assert backoff.given == [0.01, 0.02]  # one growing step per failed round
    assert backoff.failures == 0  # the good round reset it
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "test-loop-fail: OSError: round 1 broke; retry in 0.0 s",
        "test-loop-fail: OSError: round 2 broke; retry in 0.0 s",
    ]
    assert not loop_threads("test-loop-fail")


def test_an_expected_failure_is_logged_as_it_says_itself(caplog: pytest.LogCaptureFixture) -> None:
    class Refused(Exception):
        pass

    failed = threading.Event()

    def step() -> None:
        failed.set()
        raise Refused("the API server said no (HTTP 500)")

    loop = LoopThread(
        "test-loop-expected",
        step,
        interval=HOUR,
        backoff=Backoff(initial=HOUR, jitter=0, cap=HOUR),
        expected=(Refused,),
        join_timeout=30,
    )
    with caplog.at_level(logging.ERROR, logger="nfd.loopthread"):
        loop.start()
        try:
            assert failed.wait(10)
        finally:
            loop.stop()  # also cuts the backoff's hour short
    assert [r.getMessage() for r in caplog.records] == [
        "the API server said no (HTTP 500); retry in 3600.0 s"
    ]
    assert not loop_threads("test-loop-expected")


def test_wake_runs_the_next_round_at_once() -> None:
    rounds = threading.Semaphore(0)

    def step() -> None:
        rounds.release()

    loop = LoopThread("test-loop-wake", step, interval=HOUR, join_timeout=30)
    loop.start()
    try:
        assert rounds.acquire(timeout=10)
        loop.wake()
        assert rounds.acquire(timeout=10)  # not an hour later
    finally:
        loop.stop()


def test_a_round_says_when_the_next_one_comes_and_may_end_the_loop() -> None:
    seen: list[int] = []
    ended = threading.Event()
    loop: LoopThread

    def step() -> float:
        seen.append(1)
        if len(seen) == 3:
            loop.end()
            ended.set()
        return 0.0  # the next round at once, although the interval is an hour

    loop = LoopThread("test-loop-end", step, interval=HOUR, join_timeout=30)
    loop.start()
    assert ended.wait(10)
    loop.stop()
    assert seen == [1, 1, 1]  # no round after end()
    assert loop.sleep(HOUR) is True  # at once: stopping
    assert not loop_threads("test-loop-end")
