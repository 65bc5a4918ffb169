"""Device health as metrics, per resource, fed by the health monitor: the same events
that make a device Unhealthy for kubelet (or tainted in its ResourceSlice)."""

from __future__ import annotations

from collections.abc import Sequence

from nfd.devices.inventory import ResourceState
from nfd.devices.kinds.model import HealthChange
from nfd.promtext import Counter, Gauge, Registry


class HealthMetrics:
    def __init__(self, registry: Registry) -> None:
        self._devices = Gauge("nfd_devices", "Devices of a resource on this node.", ["resource"])
        self._unhealthy = Gauge(
            "nfd_devices_unhealthy", "Devices of a resource that are unhealthy now.", ["resource"]
        )
        self._changes = Counter(
            "nfd_device_health_changes_total",
            "Devices turning unhealthy or healthy again, by resource and new health.",
            ["resource", "health"],
        )
        for family in (self._devices, self._unhealthy, self._changes):
            registry.add(family)

    def changed(self, state: ResourceState, changes: Sequence[HealthChange]) -> None:
        """A health listener."""
        reasons = state.reasons()
        self._devices.set(len(reasons), resource=state.name)
        self._unhealthy.set(sum(r is not None for r in reasons), resource=state.name)
        for c in changes:
            self._changes.inc(resource=state.name, health="unhealthy" if c.reason else "healthy")

    def unhealthy(self, resource: str) -> float:
        return self._unhealthy.value(resource=resource)
