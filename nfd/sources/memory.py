"""The memory feature source: NUMA, swap, NVDIMM and huge pages.

Features (upstream's names):
- ``memory.numa``: ``is_numa``, ``node_count`` (entries of ``/sys/bus/node/devices``);
- ``memory.swap``: ``enabled`` (``/proc/swaps`` has more than its header line);
- ``memory.nv``: one instance per ``/sys/bus/nd/devices`` entry: ``name``, ``devtype``,
  ``mode``;
- ``memory.hugepages``: ``enabled`` and ``hugepages-<size>`` (``hugepages-2Mi``) -> the
  configured page count.

Labels: ``numa``, ``swap`` (upstream's code says ``swap``, its docs ``swap.enabled``),
``nv.present``, ``nv.dax``.
"""

from __future__ import annotations

import os

from nfd import hostfiles
from nfd.config import SourcesConfig
from nfd.features import Features, Instance, Labels
from nfd.hostroot import HostRoot
from nfd.hw.hugepages import hugepage_counts, kib_quantity


def _numa(host: HostRoot) -> dict[str, str] | None:
    nodes = hostfiles.entries(str(host.sys / "bus/node/devices"))
    if nodes is None:
        return None
    return {"is_numa": str(len(nodes) > 1).lower(), "node_count": str(len(nodes))}


def _swap(host: HostRoot) -> dict[str, str] | None:
    text = hostfiles.read_line(str(host.proc / "swaps"))
    if text is None:
        return None
    lines = sum(1 for line in text.splitlines() if line.strip())
    return {"enabled": str(lines > 1).lower()}  # the first line is a header


def _nv(host: HostRoot) -> list[Instance]:
    base = str(host.sys / "bus/nd/devices")
    out: list[Instance] = []
    for name in hostfiles.entries(base) or ():
        inst = {"name": name}
        for key in ("devtype", "mode"):
            value = hostfiles.attr(os.path.join(base, name, key))
            if value is not None:
                inst[key] = value
        out.append(inst)
    return out


def _hugepages(host: HostRoot) -> dict[str, str]:
    counts = hugepage_counts(str(host.sys / "kernel/mm/hugepages"))
    out = {"enabled": str(any(n > 0 for n in counts.values())).lower()}
    out.update({"hugepages-" + kib_quantity(size): str(n) for size, n in counts.items()})
    return out


class MemorySource:
    name = "memory"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        f = Features()
        numa = _numa(host)
        if numa is not None:
            f.set_attributes("memory.numa", numa)
        swap = _swap(host)
        if swap is not None:
            f.set_attributes("memory.swap", swap)
        f.set_instances("memory.nv", _nv(host))
        f.set_attributes("memory.hugepages", _hugepages(host))
        return f

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        out: Labels = {}
        if features.attributes.get("memory.numa", {}).get("is_numa") == "true":
            out["numa"] = "true"
        if features.attributes.get("memory.swap", {}).get("enabled") == "true":
            out["swap"] = "true"
        nv = features.instances.get("memory.nv", [])
        if nv:
            out["nv.present"] = "true"
        if any(d.get("devtype") == "nd_dax" for d in nv):
            out["nv.dax"] = "true"
        return out
