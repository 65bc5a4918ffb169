"""The one backoff: how a delay grows, resets and honours a Retry-After."""

from __future__ import annotations

import random

from nfd.backoff import Backoff


def test_backoff_grows_to_its_cap_with_jitter() -> None:
    b = Backoff(initial=1, cap=8, rng=random.Random(7))
    delays = [b.next_delay() for _ in range(8)]
    ceilings = [1, 2, 4, 8, 8, 8, 8, 8]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert len(set(delays[3:])) > 1  # jittered, not a fixed cap
    assert b.next_delay(retry_after=100) == 100
    assert b.next_delay(retry_after=10**6) == 600  # an absurd Retry-After is bounded
    b.reset()
    assert b.next_delay() <= 1


def test_without_jitter_the_steps_are_exact() -> None:
    b = Backoff(initial=0.1, factor=2, cap=5, jitter=0)
    assert [round(b.next_delay(), 6) for _ in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5, 5]
    b.reset()
    assert b.next_delay() == 0.1


def test_a_lower_cap_for_one_delay_keeps_the_count() -> None:
    b = Backoff(initial=1, cap=60, rng=random.Random(7))
    short = [b.next_delay(cap=2) for _ in range(20)]
    assert all(0.5 <= d <= 2 for d in short) and max(short) > 1.5
    assert 30 <= b.next_delay() <= 60  # the count went on: the next full delay is at the cap
    assert Backoff(cap=0.5, rng=random.Random(7)).next_delay(cap=2) <= 0.5  # a lower cap wins


def test_a_polling_caller_is_due_after_the_delay_on_its_clock() -> None:
    now = [100.0]
    b = Backoff(initial=0.2, cap=10, jitter=0, clock=lambda: now[0])
    assert b.due()
    assert b.fail() == 0.2
    assert not b.due()
    now[0] = 100.25
    assert b.due()
    assert b.fail(retry_after=3) == 3  # a Retry-After is a floor here too
    now[0] = 103.2
    assert not b.due()
    now[0] = 103.3
    assert b.due()
    b.reset()
    assert b.due() and b.fail() == 0.2


def test_the_same_seed_gives_the_same_delays() -> None:
    a, b = Backoff(rng=random.Random(3)), Backoff(rng=random.Random(3))
    assert [a.next_delay() for _ in range(5)] == [b.next_delay() for _ in range(5)]
