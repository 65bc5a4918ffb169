"""The node daemons' few metrics (worker, device plugin, DRA driver) in Prometheus' text
format (0.0.4), written directly.

prometheus-client costs a process about 2 MB of resident memory for a few metric
families (it pulls in urllib.request, email, wsgiref ...), and what runs on every node
must stay small. The master, which has many metrics, uses prometheus-client; tests
parse this output with prometheus-client's own parser.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Sequence

from nfd import __version__

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[tuple[str, str], ...]


def _value(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if math.isnan(v):
        return "NaN"
    return repr(float(v))


def _escape(s: str) -> str:
    return s.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


class _Family:
    kind = ""

    def __init__(self, name: str, help_text: str, label_names: Sequence[str]) -> None:
        self.name = name
        self.help = help_text
        self.label_names = tuple(label_names)
        self._lock = threading.Lock()

    def _key(self, values: dict[str, str]) -> Labels:
        # As many labels as the family's, each of them there: the same names (no sets
        # built: this runs for every sample a hot path records).
        if len(values) == len(self.label_names):
            try:
                return tuple([(n, values[n]) for n in self.label_names])
            except KeyError:
                pass
        raise ValueError(f"{self.name}: labels {sorted(values)} != {sorted(self.label_names)}")

    def header(self) -> list[str]:
        help_text = self.help.replace("\\", r"\\").replace("\n", r"\n")
        return [f"# HELP {self.name} {help_text}", f"# TYPE {self.name} {self.kind}"]

    def lines(self) -> list[str]:
        raise NotImplementedError


class _Single(_Family):
    """A family of one sample per label set (gauges and counters)."""

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, label_names)
        self._values: dict[Labels, float] = {}

    def _add(self, amount: float, labels: dict[str, str]) -> None:
        with self._lock:
            key = self._key(labels)
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        with self._lock:
            return self._values.get(self._key(labels), 0.0)

    def lines(self) -> list[str]:
        with self._lock:
            items = list(self._values.items())
        return [*self.header(), *(f"{self.name}{_labels(k)} {_value(v)}" for k, v in items)]


class Gauge(_Single):
    kind = "gauge"

    def set(self, value: float, **labels: str) -> None:
        with self._lock:
            self._values[self._key(labels)] = value

    def add(self, amount: float, **labels: str) -> None:
        self._add(amount, labels)


class Counter(_Single):
    kind = "counter"

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        # As prometheus-client writes the 0.0.4 text format: _total in TYPE and samples.
        super().__init__(name.removesuffix("_total") + "_total", help_text, label_names)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        self._add(amount, labels)


class Histogram(_Family):
    kind = "histogram"

    def __init__(
        self, name: str, help_text: str, label_names: Sequence[str], *, buckets: Sequence[float]
    ) -> None:
        super().__init__(name, help_text, label_names)
        self.buckets = tuple(sorted(buckets))
        self._counts: dict[Labels, list[int]] = {}  # per bucket, not cumulative; last is +Inf
        self._sums: dict[Labels, float] = {}

    def observe(self, value: float, **labels: str) -> None:
        with self._lock:
            key = self._key(labels)
            counts = self._counts.setdefault(key, [0] * (len(self.buckets) + 1))
            i = bisect.bisect_left(self.buckets, value)  # the first bucket with value <= bound
            counts[i] += 1
            self._sums[key] = self._sums.get(key, 0.0) + value

    def lines(self) -> list[str]:
        out = self.header()
        with self._lock:
            items = [(k, list(c), self._sums[k]) for k, c in self._counts.items()]
        for key, counts, total in items:
            running = 0
            for bound, n in zip((*self.buckets, math.inf), counts, strict=True):
                running += n
                out.append(f"{self.name}_bucket{_labels((('le', _value(bound)), *key))} {_value(running)}")
            out.append(f"{self.name}_count{_labels(key)} {_value(running)}")
            out.append(f"{self.name}_sum{_labels(key)} {_value(total)}")
        return out


class Registry:
    def __init__(self) -> None:
        self._families: list[_Family] = []

    def add(self, family: _Family) -> None:
        self._families.append(family)

    def exposition(self) -> bytes:
        return ("\n".join(line for f in self._families for line in f.lines()) + "\n").encode()


def now() -> float:
    return time.time()


def build_info(
    name: str,
    help_text: str = "Version from which Node Feature Discovery was built (the value: when it started).",
) -> Gauge:
    """The daemon's ``version`` gauge, its value the time it started."""
    gauge = Gauge(name, help_text, ["version"])
    gauge.set(now(), version=__version__)
    return gauge
