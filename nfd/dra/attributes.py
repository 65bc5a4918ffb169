"""A device's ResourceSlice attributes and capacity, from the inventory and the features.

Names without a domain belong to the driver's domain (``device.attributes["<driver>"]``
in CEL). The standard ``resource.kubernetes.io/pciBusID`` and ``pcieRoot`` let claims
align devices across drivers (``constraints[].matchAttribute``). The API takes at most
32 attributes and capacities per device and string values of at most 64 characters: a
value that does not fit is left out (it costs that value only), never cut.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

from nfd.devices.kinds.model import FoundDevice
from nfd.features import Features
from nfd.hostfiles import attr, link_name, list_dir
from nfd.hostroot import HostRoot

log = logging.getLogger("nfd.dra")

PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
MAX_ATTRIBUTES = 32  # attributes and capacities together
MAX_VALUE = 64
_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_PCIE_ROOT = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
Attr = dict[str, Any]


def pcie_root(host: HostRoot, address: str) -> str | None:
    """The PCIe root complex a device hangs below (``pci0000:00``), from its sysfs path."""
    try:
        real = os.path.realpath(host.sys / "bus/pci/devices" / address)
    except OSError:
        return None
    return next((p for p in real.split(os.sep) if _PCIE_ROOT.match(p)), None)


def version(text: str) -> str | None:
    """``9.0`` or ``12.4`` as a semantic version (``9.0.0``); None when it is not one."""
    parts = text.split(".")
    while len(parts) < 3:
        parts.append("0")
    v = ".".join(parts)
    return v if _SEMVER.match(v) else None


def binary_quantity(n: int) -> str:
    """Bytes as the API server writes a quantity back (``2048Mi`` -> ``2Gi``): compared
    with what is stored, any other spelling would look like a change on every re-sync."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = 2 ** (10 * ("KMGTPE".index(suffix[0]) + 1))
        if n and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def _by(features: Features, name: str, key: str) -> dict[str, Mapping[str, str]]:
    return {i[key]: i for i in features.instances.get(name, []) if i.get(key)}


class AttributeSource:
    """Joins a found device with what the features say about it. Built once per
    inventory: the feature instances are indexed here, not per device."""

    def __init__(self, features: Features, host: HostRoot) -> None:
        self.host = host
        self.pci = _by(features, "pci.device", "address")
        self.gpus = _by(features, "gpu.nvidia", "uuid")
        self.migs = _by(features, "gpu.nvidia_mig", "uuid")
        self.nvidia_driver = features.attributes.get("gpu.nvidia_driver", {})

    def build(self, *, resource: str, kind: str, device: FoundDevice) -> tuple[Attr, Attr]:
        """(attributes, capacity) in the API's form."""
        a = device.attributes
        attrs: Attr = {"resource": {"string": resource}, "kind": {"string": kind}}
        cap: Attr = {}
        address = (a.get("address") or a.get("pci_address") or "").lower()
        if _PCI_ADDRESS.match(address):
            self._pci(address, attrs)
        if device.numa_node is not None:
            attrs["numaNode"] = {"int": device.numa_node}
        uuid = a.get("uuid", "")
        if uuid:
            self._gpu(uuid, attrs, cap)
        if device.partition is not None:
            self._partition(device, attrs, cap)
        for key, name in (("product", "usbProduct"), ("serial", "serial"), ("path", "devicePath")):
            if kind in ("usb", "devnode") and a.get(key):
                attrs[name] = {"string": a[key]}
        if kind == "usb" and a.get("vendor"):
            attrs["vendor"] = {"string": a["vendor"]}
        return _fit(attrs, cap, device.id)

    def _pci(self, address: str, attrs: Attr) -> None:
        attrs[PCI_BUS_ID] = {"string": address}
        root = pcie_root(self.host, address)
        if root:
            attrs[PCIE_ROOT] = {"string": root}
        inst = self.pci.get(address, {})
        sysdir = self.host.sys / "bus/pci/devices" / address
        for key, name in (("vendor", "vendor"), ("device", "device"), ("class", "class")):
            if inst.get(key):
                attrs[name] = {"string": inst[key].lower()}
        driver = link_name(sysdir / "driver") or inst.get("driver", "")
        if driver:
            attrs["driver"] = {"string": driver}
        if os.path.islink(sysdir / "physfn"):
            attrs["sriov"] = {"string": "vf"}
        elif (attr(sysdir / "sriov_totalvfs") or "0") not in ("", "0"):
            attrs["sriov"] = {"string": "pf"}
        for ifname in list_dir(sysdir / "net")[:1]:
            attrs["interface"] = {"string": ifname}
            speed = attr(sysdir / "net" / ifname / "speed")
            if speed and speed.isdigit():  # -1 while the link is down
                attrs["linkSpeedMbps"] = {"int": int(speed)}

    def _gpu(self, uuid: str, attrs: Attr, cap: Attr) -> None:
        attrs["uuid"] = {"string": uuid}
        mig = self.migs.get(uuid)
        gpu = self.gpus.get(mig.get("parent_uuid", "") if mig else uuid, {})
        if gpu.get("name"):
            attrs["productName"] = {"string": gpu["name"]}
        if gpu.get("compute_major") and gpu.get("compute_minor"):
            v = version(f"{gpu['compute_major']}.{gpu['compute_minor']}")
            if v:
                attrs["cudaComputeCapability"] = {"version": v}
        attrs["migEnabled"] = {"bool": gpu.get("mig_enabled") == "true"}
        if mig and mig.get("profile"):
            attrs["migProfile"] = {"string": mig["profile"]}
        memory = (mig or gpu).get("memory", "")
        if memory.isdigit():
            cap["memory"] = {"value": binary_quantity(int(memory) * 2**20)}
        drv = self.nvidia_driver.get("driver_version", "")
        if drv:
            # NVIDIA versions like 535.104.05 are not semantic versions (leading zero).
            v = version(drv)
            attrs["driverVersion"] = {"version": v} if v else {"string": drv}
        cuda = version(self.nvidia_driver.get("cuda_driver_version", ""))
        if cuda:
            attrs["cudaDriverVersion"] = {"version": cuda}

    def _partition(self, device: FoundDevice, attrs: Attr, cap: Attr) -> None:
        """A partitionable GPU's device, named as NVIDIA's DRA driver names them: the
        whole GPU (``type`` gpu) or a MIG placement not made yet (``type`` mig), which
        has no UUID of its own until prepared: its GPU's is ``parentUUID``."""
        a = device.attributes
        mig = bool(a.get("placement_start"))
        attrs["type"] = {"string": "mig" if mig else "gpu"}
        attrs["index"] = {"int": int(a["index"])}
        attrs["minor"] = {"int": int(a["minor"])}
        gpu = self.gpus.get(a["uuid"], {})
        if gpu.get("architecture"):
            attrs["architecture"] = {"string": gpu["architecture"]}
        name = a.get("name", "")
        if name and "productName" not in attrs:
            attrs["productName"] = {"string": name}
        if not mig:
            return
        del attrs["uuid"]
        attrs["parentUUID"] = {"string": a["uuid"]}
        attrs["profile"] = {"string": a["profile"]}
        attrs["placementStart"] = {"int": int(a["placement_start"])}
        attrs["placementSize"] = {"int": int(a["placement_size"])}
        memory = device.partition.consumes.get("memory") if device.partition else None
        if memory:
            cap["memory"] = {"value": memory}
        else:
            cap.pop("memory", None)


def _fit(attrs: Attr, cap: Attr, device_id: str) -> tuple[Attr, Attr]:
    for name in list(attrs):
        value = next(iter(attrs[name].values()))
        if isinstance(value, str) and len(value) > MAX_VALUE:
            log.warning(
                "device %s: attribute %s is longer than %d characters; left out", device_id, name, MAX_VALUE
            )
            del attrs[name]
    while len(attrs) + len(cap) > MAX_ATTRIBUTES:
        dropped = list(attrs)[-1]
        log.warning("device %s: more than %d attributes; %s left out", device_id, MAX_ATTRIBUTES, dropped)
        del attrs[dropped]
    return attrs, cap
