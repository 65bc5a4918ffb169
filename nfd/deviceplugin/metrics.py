"""The device plugin's Prometheus series: kubelet's calls by resource and operation,
the ones refused, the devices handed out, and the devices advertised and unhealthy now.
Written with the worker's small text-format writer (the plugin runs on every node) and
served by the worker's status server on ``--port``; the devices and their health are
the health monitor's series (``nfd.devices.metrics``)."""

from __future__ import annotations

from nfd.devices.metrics import HealthMetrics
from nfd.promtext import Counter, Registry, build_info

# The kubelet calls counted, as the ``operation`` label names them.
OPERATIONS = ("allocate", "get_preferred_allocation", "list_and_watch", "pre_start_container")


class DevicePluginMetrics:
    def __init__(self) -> None:
        self.registry = Registry()
        build = build_info("nfd_deviceplugin_build_info")
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
        for family in (build, self._requests, self._errors, self._allocated):
            self.registry.add(family)
        # Devices and their health: the one health source's series, in this registry.
        self.health = HealthMetrics(self.registry)

    def request(self, resource: str, operation: str) -> None:
        self._requests.inc(resource=resource, operation=operation)

    def error(self, resource: str, operation: str, code: str) -> None:
        self._errors.inc(resource=resource, operation=operation, code=code)

    def allocated(self, resource: str, devices: int) -> None:
        self._allocated.inc(devices, resource=resource)

    def exposition(self) -> bytes:
        return self.registry.exposition()
