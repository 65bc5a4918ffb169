"""The DRA driver's kubelet-facing metrics, per claim: how many prepare/unprepare
requests, how long they took, how many are under way and failed, and how many devices
prepared claims hold now."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from nfd.promtext import Counter, Gauge, Histogram, Registry

PREPARE = "prepare"
UNPREPARE = "unprepare"
# Reading a claim and writing a CDI spec: milliseconds, seconds when the API server lags.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class DraMetrics:
    def __init__(self, registry: Registry) -> None:
        self._requests = Counter(
            "nfd_dra_requests_total", "Claims kubelet asked to prepare or unprepare.", ["operation"]
        )
        self._errors = Counter(
            "nfd_dra_errors_total", "Claims that failed to prepare or unprepare.", ["operation"]
        )
        self._duration = Histogram(
            "nfd_dra_request_duration_seconds",
            "Time to prepare or unprepare one claim.",
            ["operation"],
            buckets=DURATION_BUCKETS,
        )
        self._in_flight = Gauge(
            "nfd_dra_requests_in_flight", "Claims being prepared or unprepared now.", ["operation"]
        )
        self._prepared = Gauge("nfd_dra_prepared_devices", "Devices held by prepared claims.")
        for family in (self._requests, self._errors, self._duration, self._in_flight, self._prepared):
            registry.add(family)
        for op in (PREPARE, UNPREPARE):  # present from the start, at zero
            self._requests.inc(0, operation=op)
            self._errors.inc(0, operation=op)
            self._in_flight.set(0, operation=op)
        self._prepared.set(0)

    @contextmanager
    def request(self, operation: str) -> Iterator[None]:
        """Counts and times one claim's call; an exception out of it is an error."""
        self._requests.inc(operation=operation)
        self._in_flight.add(1, operation=operation)
        start = time.monotonic()
        try:
            yield
        except BaseException:
            self._errors.inc(operation=operation)
            raise
        finally:
            self._duration.observe(time.monotonic() - start, operation=operation)
            self._in_flight.add(-1, operation=operation)

    def prepared_devices(self, n: int) -> None:
        self._prepared.set(n)
