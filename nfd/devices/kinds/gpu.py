"""GPUs as allocatable devices: NVIDIA GPUs and MIG devices through NVML, AMD and Intel
GPUs from their DRM cards.

Config (one resource per selector)::

    resources:
      - name: nvidia.com/gpu              # full GPUs (those without MIG)
        gpu: {vendor: nvidia}
        replicas: 4                       # time-slicing: nvidia.com/gpu = 4 x GPUs
      - name: nvidia.com/mig-1g.10gb      # MIG devices of one profile
        gpu: {vendor: nvidia, migProfile: 1g.10gb}
      - name: gpu.intel.com/i915
        gpu: {vendor: intel, driver: i915}
      - name: amd.com/gpu
        gpu: {vendor: amd}

NVIDIA devices are named by UUID (CDI names ``nvidia.com/gpu=GPU-...``), get
``/dev/nvidia<minor>``, ``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools``
(the UVM nodes when the host has them), MIG devices also their ``/dev/nvidia-caps`` nodes,
and ``NVIDIA_VISIBLE_DEVICES``. Health: a critical XID error marks the GPU (or just the MIG
device it names) unhealthy, as NVIDIA's plugin does; unlike that plugin, the device
becomes healthy again once NVML answers for it after ``recoverAfter`` seconds without a
new error. NVML is also asked every ``checkInterval`` seconds, which catches a GPU that
fell off the bus without an event.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nfd.devices.kinds import describe_fields, mapping, string_list
from nfd.devices.model import ConfigError, DeviceNode, FoundDevice
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.sources.accel_sysfs import pci_functions
from nfd.sources.gpu import AMD, AMD_DRIVERS, GPU_CLASSES, INTEL, INTEL_DRIVERS, drm_cards
from nfd.sources.nvml import NO_INSTANCE, GpuInfo, Nvml, NvmlError, NvmlUnavailable, XidEvent

log = logging.getLogger("nfd.deviceplugin")

_KEYS = ("vendor", "driver", "migProfile", "recoverAfter", "checkInterval", "ignoreXids")
VENDORS = ("nvidia", "amd", "intel")
# XIDs that are application errors: the GPU stays usable (NVIDIA's plugin ignores these).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
FIELDS = frozenset(
    {
        "uuid",
        "index",
        "minor",
        "pci_address",
        "name",
        "profile",
        "parent_uuid",
        "card",
        "card_node",
        "render_node",
        "vendor",
        "device",
        "driver",
    }
)
_PROFILE = re.compile(r"^(\d+c\.)?\d+g\.\d+gb([+-][a-z]+(\.[a-z]+)*)?$|^\*$")


@dataclass(frozen=True)
class GpuSelector:
    vendor: str
    drivers: tuple[str, ...] = ()
    mig_profiles: tuple[str, ...] = ()  # () = full GPUs; "*" = every MIG device
    recover_after: float = 30.0
    check_interval: float = 10.0
    ignore_xids: frozenset[int] = APPLICATION_XIDS


@dataclass
class _Health:
    """What the kind knows about one NVIDIA device (GPU or MIG) between polls."""

    xid: int | None = None
    xid_at: float = 0.0
    checked_at: float | None = None
    problem: str | None = None  # NVML's answer at the last check


def _seconds(raw: Any, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 0:
        raise ConfigError(f"{where}: expected a number of seconds (0 or more)")
    return float(raw)


@dataclass
class GpuKind:
    """``nvml`` makes the NVML adapter (default: the real one); ``clock`` is for tests."""

    nvml: Callable[[], Nvml] | None = None
    clock: Callable[[], float] = time.monotonic
    # How long one NVML event wait blocks; bounds how long close() takes.
    event_wait: float = 1.0
    # Seconds without a health refresh after which the event thread stops (real time).
    idle_stop: float = 60.0
    name = "gpu"
    template_fields = FIELDS
    udev_subsystems: tuple[str, ...] = ("pci", "drm")

    _adapter: Nvml | None = field(default=None, init=False, repr=False)
    _unavailable: str | None = field(default=None, init=False, repr=False)
    _health: dict[str, _Health] = field(default_factory=dict, init=False, repr=False)
    # (parent uuid, gpu instance, compute instance) -> MIG uuid, for XID events on MIG.
    _mig_places: dict[tuple[str, int, int], str] = field(default_factory=dict, init=False, repr=False)
    _children: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False)
    _policy: dict[str, GpuSelector] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _watch_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _watcher: threading.Thread | None = field(default=None, init=False, repr=False)
    _watched: list[str] = field(default_factory=list, init=False, repr=False)
    _events_broken: bool = field(default=False, init=False, repr=False)
    _last_refresh: float = field(default=0.0, init=False, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)

    # -- config -------------------------------------------------------------------------
    def parse_selector(self, raw: Any, where: str) -> GpuSelector:
        m = mapping(raw, where, _KEYS)
        vendor = m.get("vendor")
        if vendor not in VENDORS:
            raise ConfigError(f"{where}.vendor: required, one of {', '.join(VENDORS)}")
        drivers = string_list(m["driver"], f"{where}.driver") if "driver" in m else ()
        profiles: tuple[str, ...] = ()
        if "migProfile" in m:
            if vendor != "nvidia":
                raise ConfigError(f"{where}.migProfile: MIG devices are NVIDIA's; vendor is {vendor}")
            profiles = string_list(m["migProfile"], f"{where}.migProfile")
            for p in profiles:
                if not _PROFILE.match(p):
                    raise ConfigError(f"{where}.migProfile: {p!r} is not a MIG profile like 1g.10gb (or *)")
        nvidia_only = [k for k in ("recoverAfter", "checkInterval", "ignoreXids") if k in m]
        if nvidia_only and vendor != "nvidia":
            raise ConfigError(f"{where}.{nvidia_only[0]}: NVML health applies to vendor nvidia only")
        ignore = set(APPLICATION_XIDS)
        for x in m.get("ignoreXids") or []:
            if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
                raise ConfigError(f"{where}.ignoreXids: {x!r} is not an XID number")
            ignore.add(x)
        return GpuSelector(
            vendor=vendor,
            drivers=drivers,
            mig_profiles=profiles,
            recover_after=_seconds(m.get("recoverAfter", 30), f"{where}.recoverAfter"),
            check_interval=_seconds(m.get("checkInterval", 10), f"{where}.checkInterval"),
            ignore_xids=frozenset(ignore),
        )

    def describe(self, selector: Any) -> str:
        s: GpuSelector = selector
        return describe_fields(
            "gpu", (("vendor", s.vendor), ("driver", s.drivers), ("migProfile", s.mig_profiles))
        )

    # -- discovery ----------------------------------------------------------------------
    def discover(
        self, selector: Any, *, resource: str, features: Features, host: HostRoot
    ) -> list[FoundDevice]:
        sel: GpuSelector = selector
        if sel.vendor == "nvidia":
            return self._nvidia(sel, host)
        return drm_devices(sel, host)

    def _open(self) -> Nvml | None:
        if self._adapter is None and self._unavailable is None:
            if self.nvml is not None:
                self._adapter = self.nvml()
            else:
                from nfd.sources.nvml import PynvmlAdapter

                self._adapter = PynvmlAdapter()
        return self._adapter

    def _nvidia(self, sel: GpuSelector, host: HostRoot) -> list[FoundDevice]:
        if not any(f.vendor == "10de" for f in pci_functions(host, classes=GPU_CLASSES)):
            return []  # no NVIDIA GPU on PCI: nothing to ask NVML about
        nvml = self._open()
        if nvml is None:
            return []
        try:
            snap = nvml.snapshot()
        except (NvmlUnavailable, NvmlError) as e:
            if self._unavailable is None:
                log.warning("NVML not available, no NVIDIA devices to serve: %s", e)
            self._unavailable = str(e)
            return []
        uvm = [
            DeviceNode(p, p, "rwm")
            for p in ("/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
            if os.path.exists(host.dev / p[len("/dev/") :])
        ]
        common = (DeviceNode("/dev/nvidiactl", "/dev/nvidiactl", "rwm"), *uvm)
        found: list[FoundDevice] = []
        watched: list[str] = []
        for g in snap.gpus:
            watched.append(g.uuid)
            gpu_node = DeviceNode(f"/dev/nvidia{g.minor}", f"/dev/nvidia{g.minor}", "rwm")
            numa = _numa(host, g.sysfs_address)
            if not sel.mig_profiles:
                if g.mig_enabled:
                    continue  # its capacity is handed out as MIG devices
                found.append(
                    FoundDevice(
                        id=g.uuid,
                        numa_node=numa,
                        device_nodes=(gpu_node, *common),
                        env=(("NVIDIA_VISIBLE_DEVICES", g.uuid),),
                        attributes=_attrs(g, uuid=g.uuid, profile="", parent=""),
                    )
                )
                self._policy[g.uuid] = sel
                continue
            for m in g.mig_devices:
                with self._lock:
                    self._mig_places[(g.uuid, m.gpu_instance_id, m.compute_instance_id)] = m.uuid
                    kids = self._children.setdefault(g.uuid, [])
                    if m.uuid not in kids:
                        kids.append(m.uuid)
                if "*" not in sel.mig_profiles and m.profile not in sel.mig_profiles:
                    continue
                caps = mig_cap_nodes(host, g.minor, m.gpu_instance_id, m.compute_instance_id)
                found.append(
                    FoundDevice(
                        id=m.uuid,
                        numa_node=numa,
                        device_nodes=(gpu_node, *common, *caps),
                        env=(("NVIDIA_VISIBLE_DEVICES", m.uuid),),
                        attributes=_attrs(g, uuid=m.uuid, profile=m.profile, parent=g.uuid),
                    )
                )
                self._policy[m.uuid] = sel
        self._watch(nvml, watched)
        return found

    # -- health -------------------------------------------------------------------------
    def _watch(self, nvml: Nvml, uuids: list[str]) -> None:
        with self._lock:
            self._watched.extend(u for u in uuids if u not in self._watched)
        self._last_refresh = time.monotonic()
        self._ensure_watcher()

    def _ensure_watcher(self) -> None:
        """Run the event thread while someone asks for health. It stops by itself after
        ``idle_stop`` seconds without a refresh (a one-off look at the devices, as the
        worker's view of served resources takes, must not leave a thread behind) and
        starts again, re-registering for events, at the next refresh."""
        nvml = self._adapter
        # Health polls and Allocate calls refresh from different threads: one starts it.
        with self._watch_lock:
            with self._lock:
                if nvml is None or not self._watched or self._stop.is_set():
                    return
                if self._watcher is not None and self._watcher.is_alive():
                    return
                uuids = list(self._watched)
            try:
                nvml.watch(uuids)
            except (NvmlUnavailable, NvmlError) as e:
                if not self._events_broken:
                    log.warning("NVML events unavailable, health from periodic NVML checks only: %s", e)
                    self._events_broken = True
                return
            thread = threading.Thread(target=self._events, args=(nvml,), name="nfd-dp-nvml", daemon=True)
            with self._lock:
                self._watcher = thread
            thread.start()

    def _events(self, nvml: Nvml) -> None:
        while not self._stop.is_set():
            if time.monotonic() - self._last_refresh > self.idle_stop:
                log.debug("nobody asks for GPU health: NVML event thread stops")
                nvml.close()
                return
            try:
                event = nvml.wait_event(self.event_wait)
            except (NvmlUnavailable, NvmlError) as e:
                # As NVIDIA's plugin does: an event stream that fails says nothing good
                # about any GPU. Each recovers once NVML answers for it again.
                log.warning("NVML event wait failed, marking NVIDIA devices unhealthy: %s", e)
                with self._lock:
                    for uuid in list(self._policy):
                        self._mark(uuid, 0)
                self._stop.wait(1.0)
                continue
            if event is not None:
                self.on_xid(event)

    def on_xid(self, event: XidEvent) -> None:
        """Record a critical XID error (called by the event thread; public for tests)."""
        with self._lock:
            sel = self._policy.get(event.uuid) or next(
                (self._policy[k] for k in self._children.get(event.uuid, []) if k in self._policy), None
            )
            if sel is not None and event.xid in sel.ignore_xids:
                log.info("XID %d on %s is an application error; device stays healthy", event.xid, event.uuid)
                return
            if event.gpu_instance_id != NO_INSTANCE and event.compute_instance_id != NO_INSTANCE:
                mig = self._mig_places.get((event.uuid, event.gpu_instance_id, event.compute_instance_id))
                targets = [mig] if mig else [event.uuid, *self._children.get(event.uuid, [])]
            else:
                targets = [event.uuid, *self._children.get(event.uuid, [])]
            for uuid in targets:
                self._mark(uuid, event.xid)
        log.warning("XID %d on %s: marking %s unhealthy", event.xid, event.uuid, ", ".join(targets))

    def _mark(self, uuid: str, xid: int) -> None:
        h = self._health.setdefault(uuid, _Health())
        h.xid, h.xid_at = xid, self.clock()

    def refresh(self, device: FoundDevice, host: HostRoot) -> FoundDevice | str:
        a = device.attributes
        if a.get("pci_address") and not os.path.isdir(
            host.sys / "bus" / "pci" / "devices" / a["pci_address"]
        ):
            return "PCI device gone from sysfs"
        if a.get("vendor") != "10de":
            driver = _driver(host, a.get("pci_address", ""))
            if a.get("driver") and driver != a["driver"]:
                return f"driver {a['driver']} unbound" if driver is None else f"driver changed to {driver}"
            return device
        self._last_refresh = time.monotonic()
        self._ensure_watcher()
        return self._nvidia_health(device)

    def _nvidia_health(self, device: FoundDevice) -> FoundDevice | str:
        uuid = device.attributes["uuid"]
        sel = self._policy.get(uuid)
        now = self.clock()
        with self._lock:
            h = self._health.setdefault(uuid, _Health())
            xid, xid_at, checked_at = h.xid, h.xid_at, h.checked_at
        recover_after = sel.recover_after if sel else 30.0
        interval = sel.check_interval if sel else 10.0
        due = checked_at is None or now - checked_at >= interval
        if (
            xid is not None
            and now - xid_at >= recover_after
            and (checked_at is None or checked_at < xid_at + recover_after)
        ):
            due = True  # the quiet period is over: ask NVML now rather than at the next tick
        if due:
            problem = self._check(uuid)
            with self._lock:
                h.checked_at, h.problem = now, problem
                if problem is None and h.xid is not None and now - h.xid_at >= recover_after:
                    log.info("%s answers NVML again after XID %d", uuid, h.xid)
                    h.xid = None
        with self._lock:
            if h.problem is not None:
                return f"NVML: {h.problem}"
            if h.xid is not None:
                return "NVML event stream failed" if h.xid == 0 else f"XID {h.xid}"
        return device

    def _check(self, uuid: str) -> str | None:
        nvml = self._adapter
        if nvml is None:
            return "NVML not open"
        try:
            return nvml.check(uuid)
        except (NvmlUnavailable, NvmlError) as e:
            return str(e)

    def close(self) -> None:
        """Stop the event thread and release NVML."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=3)
        if self._adapter is not None:
            self._adapter.close()


# -- helpers ---------------------------------------------------------------------------------


def _attrs(g: GpuInfo, *, uuid: str, profile: str, parent: str) -> dict[str, str]:
    out = dict.fromkeys(FIELDS, "")
    out.update(
        uuid=uuid,
        index=str(g.index),
        minor=str(g.minor),
        pci_address=g.sysfs_address,
        name=g.name,
        profile=profile,
        parent_uuid=parent,
        vendor="10de",
        device=f"{g.pci_device_id >> 16:04x}" if g.pci_device_id else "",
        driver="nvidia",
    )
    return out


def _numa(host: HostRoot, address: str) -> int | None:
    from nfd.sources.accel_sysfs import numa_node

    return numa_node(host, address)


def _driver(host: HostRoot, address: str) -> str | None:
    try:
        return os.path.basename(os.readlink(host.sys / "bus" / "pci" / "devices" / address / "driver"))
    except OSError:
        return None


def _cap_minor(path: Any) -> int | None:
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "DeviceFileMinor":
                    return int(value.strip())
    except (OSError, ValueError):
        return None
    return None


def mig_cap_nodes(host: HostRoot, minor: int, gi: int, ci: int) -> tuple[DeviceNode, ...]:
    """The /dev/nvidia-caps nodes that grant access to one MIG device, from the driver's
    capability files in /proc; none when the driver does not show them (the NVIDIA
    container runtime then adds them from NVIDIA_VISIBLE_DEVICES)."""
    base = host.proc / "driver" / "nvidia" / "capabilities" / f"gpu{minor}" / "mig" / f"gi{gi}"
    out = []
    for f in (base / "access", base / f"ci{ci}" / "access"):
        m = _cap_minor(f)
        if m is not None:
            p = f"/dev/nvidia-caps/nvidia-cap{m}"
            out.append(DeviceNode(p, p, "r"))
    return tuple(out)


def drm_devices(sel: GpuSelector, host: HostRoot) -> list[FoundDevice]:
    """AMD or Intel GPUs from their DRM cards: card and render nodes (and /dev/kfd for
    AMD's compute stack)."""
    vendor_id, drivers = (AMD, AMD_DRIVERS) if sel.vendor == "amd" else (INTEL, INTEL_DRIVERS)
    wanted = set(sel.drivers) or set(drivers)
    kfd = (
        [DeviceNode("/dev/kfd", "/dev/kfd", "rw")]
        if sel.vendor == "amd" and os.path.exists(host.dev / "kfd")
        else []
    )
    out: list[FoundDevice] = []
    for c in drm_cards(host):
        if c.get("vendor") != vendor_id or c.get("driver") not in wanted or not c.get("pci_address"):
            continue
        nodes = [DeviceNode(c["card_node"], c["card_node"], "rw")]
        if c.get("render_node"):
            nodes.append(DeviceNode(c["render_node"], c["render_node"], "rw"))
        attrs = dict.fromkeys(FIELDS, "")
        attrs.update({k: v for k, v in c.items() if k in FIELDS})
        numa = c.get("numa_node")
        out.append(
            FoundDevice(
                id=c["pci_address"],
                numa_node=int(numa) if numa is not None else None,
                device_nodes=(*nodes, *kfd),
                attributes=attrs,
            )
        )
    return out
