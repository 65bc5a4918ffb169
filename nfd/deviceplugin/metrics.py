"""The device plugin's Prometheus series: kubelet's calls by resource and operation,
the ones refused, the devices handed out, and the devices advertised and unhealthy now.
Written with the worker's small text-format writer (the plugin runs on every node) and
served by the worker's status server on ``--metrics-port``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nfd import __version__
from nfd.devices.inventory import ResourceState
from nfd.worker.promtext import Counter, Gauge, Registry, now

# The kubelet calls counted, as the ``operation`` label names them.
OPERATIONS = ("allocate", "get_preferred_allocation", "list_and_watch", "pre_start_container")


class DevicePluginMetrics:
    def __init__(self, states: Callable[[], Sequence[ResourceState]] = tuple) -> None:
        self._states = states
        self.registry = Registry()
        build = Gauge(
            "nfd_deviceplugin_build_info",
            "Version from which Node Feature Discovery was built (the value: when it started).",
            ["version"],
        )
        build.set(now(), version=__version__)
        self._requests = Counter(
            "nfd_deviceplugin_requests_total",
            "Calls from kubelet by resource and operation (a list_and_watch: one stream opened).",
            ["resource", "operation"],
        )
        self._errors = Counter(
            "nfd_deviceplugin_request_errors_total",
            "Calls from kubelet the plugin refused, by resource, operation and gRPC status code.",
            ["resource", "operation", "code"],
        )
        self._allocated = Counter(
            "nfd_deviceplugin_devices_allocated_total",
            "Device IDs handed to containers by Allocate, by resource.",
            ["resource"],
        )
        self._devices = Gauge(
            "nfd_deviceplugin_devices", "Device IDs advertised to kubelet now, by resource.", ["resource"]
        )
        self._unhealthy = Gauge(
            "nfd_deviceplugin_unhealthy_devices",
            "Device IDs advertised as Unhealthy now, by resource.",
            ["resource"],
        )
        for family in (build, self._requests, self._errors, self._allocated, self._devices, self._unhealthy):
            self.registry.add(family)

    def request(self, resource: str, operation: str) -> None:
        self._requests.inc(resource=resource, operation=operation)

    def error(self, resource: str, operation: str, code: str) -> None:
        self._errors.inc(resource=resource, operation=operation, code=code)

    def allocated(self, resource: str, devices: int) -> None:
        self._allocated.inc(devices, resource=resource)

    def exposition(self) -> bytes:
        # Health is the states' own: read at each scrape, never a second copy to keep.
        for s in self._states():
            _, devices = s.snapshot()
            self._devices.set(len(devices), resource=s.name)
            self._unhealthy.set(sum(1 for d in devices if not d.healthy), resource=s.name)
        return self.registry.exposition()
