"""The pci feature source: one ``pci.device`` instance per ``/sys/bus/pci/devices`` entry.

Attributes as upstream: ``class`` (base class + subclass, 4 hex digits), ``vendor``,
``device``, ``subsystem_vendor``, ``subsystem_device`` (all required: a device missing
one is skipped), and where present ``sriov_totalvfs``, ``iommu_group/type``,
``iommu/intel-iommu/version``. Ours on top, for the device plugin: ``address``
(``0000:3b:00.0``), ``driver`` (bound driver's name) and ``numa_node``.

Labels: ``<field>_<field>....present`` and ``.sriov.capable`` for devices whose class
starts with an entry of ``deviceClassWhitelist``, fields from ``deviceLabelFields``.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from nfd import hostfiles
from nfd.config import SourcesConfig
from nfd.features import Features, Instance, Labels
from nfd.hostroot import HostRoot

if TYPE_CHECKING:
    from collections.abc import Sequence

log = logging.getLogger(__name__)

MANDATORY_ATTRS = ("class", "vendor", "device", "subsystem_vendor", "subsystem_device")
OPTIONAL_ATTRS = ("sriov_totalvfs", "iommu_group/type", "iommu/intel-iommu/version")
DEFAULT_LABEL_FIELDS = ("class", "vendor")


def _value(dev_path: str, name: str) -> str | None:
    raw = hostfiles.attr(os.path.join(dev_path, name))
    if raw is None:
        return None
    value = raw.removeprefix("0x").strip()
    # sysfs gives base class, subclass and programming interface; upstream keeps two.
    return value[:4] if name == "class" else value


def read_device(dev_path: str) -> Instance | None:
    inst: Instance = {}
    for name in MANDATORY_ATTRS:
        value = _value(dev_path, name)
        if value is None:
            log.warning("PCI device %s: no %s, skipped", os.path.basename(dev_path), name)
            return None
        inst[name] = value
    for name in OPTIONAL_ATTRS:
        value = _value(dev_path, name)
        if value is not None:
            inst[name] = value
    inst["address"] = os.path.basename(dev_path)
    driver = hostfiles.link_name(os.path.join(dev_path, "driver"))
    if driver:
        inst["driver"] = driver
    numa = hostfiles.attr(os.path.join(dev_path, "numa_node"))
    if numa is not None:
        inst["numa_node"] = numa
    return inst


def label_fields(configured: Sequence[str], valid: Sequence[str], default: Sequence[str]) -> list[str]:
    """The configured label fields that are valid, in the valid fields' order; the
    default when none is (upstream's rule for pci and usb)."""
    chosen = [f for f in valid if f in configured]
    ignored = sorted(set(configured) - set(valid))
    if ignored:
        log.info("ignoring invalid fields in deviceLabelFields: %s", ", ".join(ignored))
    return chosen or list(default)


def device_labels(
    devices: Sequence[Instance], whitelist: Sequence[str], fields: Sequence[str], *, sriov: bool
) -> Labels:
    out: Labels = {}
    prefixes = [w.lower() for w in whitelist]
    for dev in devices:
        cls = dev.get("class", "")
        if not any(cls.startswith(p) for p in prefixes):
            continue
        name = "_".join(dev.get(f, "") for f in fields)
        out[f"{name}.present"] = "true"
        if sriov and "sriov_totalvfs" in dev:
            out[f"{name}.sriov.capable"] = "true"
    return out


class PciSource:
    name = "pci"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        f = Features()
        paths = hostfiles.device_dirs(host.sys / "bus/pci/devices")
        if paths is None:
            return f
        f.instances["pci.device"] = [d for p in paths if (d := read_device(p)) is not None]
        return f

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        fields = label_fields(config.pci.device_label_fields, MANDATORY_ATTRS, DEFAULT_LABEL_FIELDS)
        return device_labels(
            features.instances.get("pci.device", []),
            config.pci.device_class_whitelist,
            fields,
            sriov=True,
        )
