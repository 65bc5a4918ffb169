"""The topology updater's Prometheus series, upstream's names: its build and the
PodResources scans that failed. Written with the worker's small text-format writer and
served by the worker's status server: the updater runs on every node and stays lean."""

from __future__ import annotations

from nfd.promtext import Counter, Registry, build_info


class TopologyMetrics:
    def __init__(self) -> None:
        self.registry = Registry()
        build = build_info("nfd_topology_updater_build_info")
        self._scan_errors = Counter(
            "nfd_topology_updater_scan_errors_total",
            "Passes that could not read the pods' resource allocation from kubelet.",
        )
        self._scan_errors.inc(0)  # present from the start: rate() needs the zero
        for family in (build, self._scan_errors):
            self.registry.add(family)

    def scan_failed(self) -> None:
        self._scan_errors.inc()

    def exposition(self) -> bytes:
        return self.registry.exposition()
