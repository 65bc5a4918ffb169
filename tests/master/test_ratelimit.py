"""The adaptive write rate: halves on 429 and waits out Retry-After, eases off on slow
answers, recovers step by step; against the fake API server's overload mode the master
labels every node while sending far fewer requests than it would without backing off.
The window of requests in flight grows while writes are answered fast and shrinks on
429s and on rising latency."""

from __future__ import annotations

import asyncio

from nfd.kube.ratelimit import AdaptiveRate

from .kubehelpers import kube_master, wait_for

FNS = "feature.node.kubernetes.io"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_429_halves_the_rate_once_per_second():
    clock = Clock()
    r = AdaptiveRate(400, 100, min_qps=5, clock=clock)
    r.throttled()
    assert r.qps == 200
    r.throttled()  # the other requests already on the wire: one congestion event
    assert r.qps == 200
    clock.t += 1.0
    r.throttled()
    assert r.qps == 100
    for _ in range(10):
        clock.t += 1.0
        r.throttled()
    assert r.qps == 5  # never below min_qps
    assert r.decreases == 12


def test_slow_answers_ease_off_and_quiet_seconds_recover_to_the_ceiling():
    clock = Clock()
    r = AdaptiveRate(100, 10, increase_qps=25, slow_s=2.0, clock=clock)
    r.answered(0.5)
    assert r.qps == 100
    r.answered(3.0)
    assert r.qps == 75
    clock.t += 2.0
    r._recover(clock())
    assert r.qps == 100  # +25/s, capped at the ceiling


def test_acquire_keeps_the_rate():
    async def main() -> float:
        clock = Clock()
        r = AdaptiveRate(100, 1, clock=clock)
        await r.acquire()  # the burst
        t0 = r._tokens
        clock.t += 0.005  # half a token's worth
        task = asyncio.ensure_future(r.acquire())
        await asyncio.sleep(0)
        done_early = task.done()
        clock.t += 0.01
        await task
        return t0, done_early

    tokens, early = asyncio.run(main())
    assert tokens == 0 and early is False


def fill(r: AdaptiveRate) -> None:
    """As many requests in flight as the window allows (as busy workers keep it)."""
    r.in_flight = r.window


def answer(r: AdaptiveRate, clock: Clock, seconds: float, n: int = 1) -> None:
    """``n`` writes answered in ``seconds`` each, the window kept full."""
    for _ in range(n):
        fill(r)
        clock.t += seconds / max(1, r.window)
        r.answered(seconds, write=True)
        r.release()


def test_window_starts_at_the_ceiling_as_the_rate_does():
    r = AdaptiveRate(500, 100, max_in_flight=64)
    assert r.window == 64 and r.qps == 500
    assert AdaptiveRate(500, 100, max_in_flight=64, initial_in_flight=100).window == 64


def test_window_started_small_grows_to_the_ceiling_while_writes_are_fast():
    clock = Clock()
    r = AdaptiveRate(500, 100, max_in_flight=64, initial_in_flight=4, clock=clock)
    assert r.window == 4
    answer(r, clock, 0.01, n=4)
    assert r.window == 8  # slow start: one more per answer, doubling each window
    answer(r, clock, 0.01, n=200)
    assert r.window == 64  # and never past --parallelism
    assert r.window_cuts == 0


def test_window_does_not_grow_while_it_is_not_used():
    clock = Clock()
    r = AdaptiveRate(500, 100, max_in_flight=64, initial_in_flight=4, clock=clock)
    for _ in range(100):
        r.in_flight = 1  # one request at a time: nothing learnt about more
        clock.t += 0.01
        r.answered(0.01, write=True)
        r.release()
    assert r.window == 4


def test_rising_latency_shrinks_the_window_at_most_once_a_second():
    clock = Clock()
    r = AdaptiveRate(500, 100, max_in_flight=64, initial_in_flight=64, clock=clock)
    answer(r, clock, 0.06, n=50)  # usually 60 ms
    assert r.window == 64
    fill(r)
    for _ in range(20):  # a queue builds up: 500 ms
        r.answered(0.5, write=True)
    assert r.window == 48  # a quarter off, once (answers already on the wire)
    clock.t += 1.0
    answer(r, clock, 0.5, n=3)
    assert r.window == 36
    assert r.window_cuts == 2
    assert r.qps == 500  # the rate is left alone: the window alone tracks latency


def test_latency_that_grows_with_the_window_does_not_stop_it():
    # A small API server: every request in flight adds ~10 ms to each answer, yet the
    # throughput still grows (etcd commits writes together).
    clock = Clock()
    r = AdaptiveRate(500, 100, max_in_flight=64, initial_in_flight=4, clock=clock)
    for _ in range(3000):
        answer(r, clock, 0.01 * r.window)
    assert r.window == 64


def test_latency_that_jumps_with_the_writes_in_flight_is_no_queue():
    # Eight times the writes in flight at once, each eight times slower: the same
    # throughput (a shared server's answers, a window that just grew), no cut.
    clock = Clock()
    r = AdaptiveRate(500, 100, max_in_flight=64, initial_in_flight=64, clock=clock)
    for in_flight, seconds, n in ((8, 0.02, 50), (64, 0.16, 20)):
        for _ in range(n):
            r.in_flight = in_flight
            clock.t += 0.01
            r.answered(seconds, write=True)
            r.release()
    assert r.window_cuts == 0 and r.window == 64


def test_after_a_cut_the_window_grows_one_per_window_of_fast_answers():
    clock = Clock()
    r = AdaptiveRate(500, 100, max_in_flight=64, initial_in_flight=32, clock=clock)
    answer(r, clock, 0.02, n=10)
    r.throttled()
    assert r.window == 21  # 42 halved: 429
    assert r.qps == 250
    answer(r, clock, 0.02, n=25)
    assert r.window == 22  # about one more per window of answers: additive, not doubling


def test_slow_but_steady_answers_under_fast_s_still_grow():
    # Ten times the base, but 30 ms: not a queue worth backing off from.
    clock = Clock()
    r = AdaptiveRate(500, 100, max_in_flight=64, initial_in_flight=8, fast_s=0.05, clock=clock)
    answer(r, clock, 0.003, n=5)
    answer(r, clock, 0.03, n=100)
    assert r.window == 64 and r.window_cuts == 0


def test_reads_do_not_steer_the_window():
    clock = Clock()
    r = AdaptiveRate(500, 100, max_in_flight=64, initial_in_flight=16, clock=clock)
    fill(r)
    for _ in range(50):
        r.answered(0.001)  # reads from the API server's cache
    answer(r, clock, 0.04, n=50)  # writes: 40 times slower than those reads
    assert r.window_cuts == 0 and r.window == 64


def test_a_new_level_of_latency_becomes_the_usual():
    clock = Clock()
    r = AdaptiveRate(500, 100, max_in_flight=64, initial_in_flight=64, clock=clock)
    answer(r, clock, 0.01, n=100)  # 10 ms
    for _ in range(40):  # the server is busier, steadily: 120 ms
        clock.t += 1.0
        answer(r, clock, 0.12, n=10)
    cuts = r.window_cuts
    assert 1 <= cuts <= 4  # the jump
    for _ in range(40):
        clock.t += 1.0
        answer(r, clock, 0.12, n=10)
    assert r.window_cuts == cuts  # then the new normal, not a rise
    assert r.window > 64 * 0.75**cuts  # growing again


def test_a_write_waits_for_a_place_in_the_window_and_a_read_does_not():
    async def main() -> tuple[bool, bool]:
        r = AdaptiveRate(1000, 100, max_in_flight=2, initial_in_flight=2)
        await r.acquire(write=True)
        await r.acquire(write=True)
        await asyncio.wait_for(r.acquire(), 1)  # a read (a token review) does not wait
        third = asyncio.ensure_future(r.acquire(write=True))
        await asyncio.sleep(0.01)
        waited = not third.done()
        r.release()
        await asyncio.wait_for(third, 1)
        return waited, r.in_flight == 2

    waited, full = asyncio.run(main())
    assert waited and full


def test_master_backs_off_under_429s_and_labels_every_node(fake_api):
    names = [f"n{i}" for i in range(60)]
    for n in names:
        fake_api.create_node(n)
    overload = fake_api.faults.overload(40, burst=5, retry_after=1, verb="patch", resource="nodes")
    with kube_master(fake_api, kube__qps=500.0, kube__burst=100, kube__backoff_max_s=30.0) as m:
        for n in names:
            m.put(n, {"a": "1"})
        wait_for(m.settled, timeout=30, what="every node labelled")
        assert all(fake_api.labels(n).get(f"{FNS}/fixture-a") == "1" for n in names)
        limiter = m.runtime.api.limiter
        assert limiter.decreases >= 1
        # Backing off: the 429s are a fraction of the writes, not a retry storm; each
        # refused write waited its Retry-After (1 s) before it was tried again.
        assert overload.admitted == len(names)
        assert overload.rejected < 2 * len(names)
        metrics = m.client.get("/metrics").text
        assert 'nfd_master_node_update_failures_total{reason="429"}' in metrics


def test_429s_with_retry_after_shrink_the_window_of_node_writes(fake_api):
    names = [f"n{i}" for i in range(80)]
    for n in names:
        fake_api.create_node(n)
    # Writes answered 20 ms late: enough for a window to fill up.
    fake_api.faults.delay(0.02, verb="patch", resource="nodes")
    overload = fake_api.faults.overload(30, burst=3, retry_after=1, verb="patch", resource="nodes")
    with kube_master(fake_api, kube__qps=1000.0, kube__burst=1000, kube__parallelism=32) as m:
        limiter = m.runtime.api.limiter
        for n in names:
            m.put(n, {"a": "1"})
        wait_for(m.settled, timeout=30, what="every node labelled")
        assert all(fake_api.labels(n).get(f"{FNS}/fixture-a") == "1" for n in names)
        assert overload.rejected >= 1
        assert limiter.window_cuts >= 1
        assert limiter.window < limiter.peak_limit  # it grew, then the 429s cut it back
        assert limiter.in_flight == 0
