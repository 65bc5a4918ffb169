"""The adaptive write rate: halves on 429 and waits out Retry-After, eases off on slow
answers, recovers step by step; against the fake API server's overload mode the master
labels every node while sending far fewer requests than it would without backing off."""

from __future__ import annotations

import asyncio

from nfd.master.ratelimit import AdaptiveRate

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
