"""The network feature source: interfaces from ``/sys/class/net``.

- ``network.device``: interfaces backed by a device (``<iface>/device`` exists):
  ``name``, ``operstate``, ``speed``, ``mtu``, ``sriov_numvfs``, ``sriov_totalvfs`` as
  upstream; ours on top: ``driver`` (the device's bound driver) and, for RDMA-capable
  devices, ``rdma_device`` (the ``/sys/class/infiniband`` name(s), comma separated),
  ``rdma_capable=true`` and ``rdma_available=true`` when a user-space verbs device
  (``uverbs*``) is present.
- ``network.virtual``: the other interfaces: ``name``, ``operstate``, ``speed``, ``mtu``.

Attributes the kernel does not give (``speed`` of a link that is down) are left out.
Labels: ``sriov.capable`` (a device with ``sriov_totalvfs`` > 0), ``sriov.configured``
(``sriov_numvfs`` > 0).
"""

from __future__ import annotations

import logging
import os

from nfd import hostfiles
from nfd.config import SourcesConfig
from nfd.features import Features, Instance, Labels
from nfd.hostroot import HostRoot

log = logging.getLogger(__name__)

_COMMON_ATTRS = ("operstate", "speed", "mtu")
_DEVICE_ATTRS = ("device/sriov_numvfs", "device/sriov_totalvfs")


def _rdma(dev: str, inst: Instance) -> None:
    ib = hostfiles.entries(os.path.join(dev, "infiniband"))
    if not ib:
        return
    inst["rdma_device"] = ",".join(ib)
    inst["rdma_capable"] = "true"
    verbs = hostfiles.entries(os.path.join(dev, "infiniband_verbs")) or []
    if any(v.startswith("uverbs") for v in verbs):
        inst["rdma_available"] = "true"


def read_interface(path: str) -> tuple[bool, Instance]:
    """(is physical, attributes) of one interface."""
    inst: Instance = {"name": os.path.basename(path)}
    dev = os.path.join(path, "device")
    physical = os.path.exists(dev)
    inst.update(hostfiles.attrs(path, _COMMON_ATTRS))
    if physical:
        inst.update(hostfiles.attrs(path, _DEVICE_ATTRS))
        driver = hostfiles.link_name(os.path.join(dev, "driver"))
        if driver:
            inst["driver"] = driver
        _rdma(dev, inst)
    return physical, inst


class NetworkSource:
    name = "network"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        f = Features()
        paths = hostfiles.device_dirs(host.sys / "class/net")
        if paths is None:
            return f
        devices: list[Instance] = []
        virtual: list[Instance] = []
        for path in paths:
            if os.path.basename(path) == "bonding_masters":  # a control file, not an interface
                continue
            physical, inst = read_interface(path)
            (devices if physical else virtual).append(inst)
        f.instances["network.device"] = devices
        f.instances["network.virtual"] = virtual
        return f

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        out: Labels = {}
        for dev in features.instances.get("network.device", []):
            for attr, label in (("sriov_totalvfs", "sriov.capable"), ("sriov_numvfs", "sriov.configured")):
                value = dev.get(attr)
                if value is None:
                    continue
                try:
                    if int(value) > 0:
                        out[label] = "true"
                except ValueError:
                    log.warning("network device %s: %s=%r is not a number", dev.get("name"), attr, value)
        return out
