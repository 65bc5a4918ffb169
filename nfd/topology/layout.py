"""The node's NUMA layout from sysfs: per NUMA node its CPUs, memory, huge pages and its
distances to the other nodes.

Read below ``HostRoot.sys`` (``devices/system/node/node<N>/``): ``cpulist``, ``meminfo``
(``Node N MemTotal: ... kB``), ``distance`` and ``hugepages/hugepages-<size>kB/nr_hugepages``.
A missing file means that part is absent (a node with no memory line has no memory
capacity); a machine without ``devices/system/node`` is one node holding every online CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nfd import hostfiles
from nfd.hostroot import HostRoot
from nfd.hw.hugepages import hugepage_counts, kib_quantity


@dataclass(frozen=True)
class NumaNode:
    id: int
    cpus: frozenset[int]
    memory_bytes: int | None  # None: sysfs does not say
    hugepages_bytes: dict[str, int] = field(default_factory=dict)  # "hugepages-2Mi" -> bytes
    distances: dict[int, int] = field(default_factory=dict)  # other node id -> distance


@dataclass(frozen=True)
class Layout:
    nodes: tuple[NumaNode, ...]

    def node_of_cpu(self) -> dict[int, int]:
        return {cpu: n.id for n in self.nodes for cpu in n.cpus}

    def ids(self) -> frozenset[int]:
        return frozenset(n.id for n in self.nodes)


def parse_cpulist(text: str) -> frozenset[int]:
    """``0-3,8,10-11`` -> {0, 1, 2, 3, 8, 10, 11}; raises ValueError on anything else."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ValueError(f"bad CPU range {part!r}")
        out.update(range(first, last + 1))
    return frozenset(out)


def _cpus(path: str) -> frozenset[int]:
    text = hostfiles.attr(path)
    if text is None:
        return frozenset()
    try:
        return parse_cpulist(text)
    except ValueError:
        return frozenset()


def _mem_total(path: str) -> int | None:
    for line in (hostfiles.read_text(path) or "").splitlines():
        parts = line.split()
        # "Node 0 MemTotal:       32768000 kB"
        if len(parts) >= 4 and parts[2] == "MemTotal:" and parts[3].isdigit():
            return int(parts[3]) * 1024
    return None


def _hugepages(base: str) -> dict[str, int]:
    return {"hugepages-" + kib_quantity(size): n * size * 1024 for size, n in hugepage_counts(base).items()}


def _distances(path: str, ids: list[int]) -> dict[int, int]:
    values = (hostfiles.attr(path) or "").split()
    if len(values) != len(ids) or not all(v.isdigit() for v in values):
        return {}
    return {i: int(v) for i, v in zip(ids, values, strict=True)}


def read_layout(host: HostRoot) -> Layout:
    base = host.sys / "devices/system/node"
    names = hostfiles.list_dir(base)
    ids = sorted(int(n[4:]) for n in names if n.startswith("node") and n[4:].isdigit())
    if not ids:
        cpus = _cpus(host.sys / "devices/system/cpu/online")
        meminfo = hostfiles.read_text(host.proc / "meminfo") or ""
        total = next(
            (
                int(p[1]) * 1024
                for p in (ln.split() for ln in meminfo.splitlines())
                if len(p) >= 2 and p[0] == "MemTotal:" and p[1].isdigit()
            ),
            None,
        )
        return Layout((NumaNode(0, cpus, total, _hugepages(host.sys / "kernel/mm/hugepages")),))
    nodes = []
    for i in ids:
        d = base / f"node{i}"
        nodes.append(
            NumaNode(
                id=i,
                cpus=_cpus(d / "cpulist"),
                memory_bytes=_mem_total(d / "meminfo"),
                hugepages_bytes=_hugepages(d / "hugepages"),
                distances=_distances(d / "distance", ids),
            )
        )
    return Layout(tuple(nodes))
