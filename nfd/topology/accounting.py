"""Per-NUMA-zone capacity, allocatable and available, as kubelet's resource managers
count them. Pure: takes the NUMA layout, kubelet's two PodResources answers and, where the
pods are known, what the running pods request.

- cpu (counted in milli-CPUs): capacity is the zone's CPUs (sysfs). Under the static CPU
  manager (kubelet lists allocatable CPU IDs), allocatable is the CPUs kubelet may hand out
  (``GetAllocatableResources``, which leaves out ``reservedSystemCPUs``) and available is
  allocatable less the CPUs assigned exclusively. Only containers that the CPU manager
  pins count: ``is_exclusive`` says which (Guaranteed pod, integer CPU request); older
  kubelets list the shared pool for every other container too. For a pod it does not
  know (yet), a container counts unless its CPUs are listed for another container too
  (pinned sets never overlap; the shared pool is listed for every shared container).
- memory and ``hugepages-*``: capacity from sysfs; under the memory manager's static
  policy (kubelet answers per NUMA node), allocatable is that answer and available less
  what the memory manager pinned to the zone. A block pinned to several zones is taken
  from them in ascending order, as the memory manager fills them.
- CPU manager ``none`` (no allocatable CPU IDs) and memory manager ``None`` (no
  allocatable memory): kubelet hands these out from one node-wide pool, so every zone's
  CPUs and memory are allocatable, and what the running pods request (``requested``) is
  taken from the zones in ascending order, so that the zones add up to what the node has
  left. Without the pods (``requested`` None) available is allocatable.
- devices: capacity and allocatable are the devices kubelet reports with that NUMA node
  in their topology (a device on several nodes counts in each; one with no topology in
  none); available less those assigned to containers.

Bad input costs that value only: a CPU, device or memory block naming a NUMA node this
machine lacks is left out and reported in ``warnings``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from nfd.topology import messages
from nfd.topology.layout import Layout

# (namespace, pod, container) -> whether the CPU manager pinned its CPUs; None: unknown
# (kubelet's answer is taken as it is).
IsExclusive = Callable[[str, str, str], bool | None]

MILLI = 1000  # cpu amounts are milli-CPUs: pod requests come in them


@dataclass
class Amount:
    capacity: int = 0
    allocatable: int = 0
    available: int = 0


@dataclass
class Zone:
    id: int
    resources: dict[str, Amount] = field(default_factory=dict)

    def amount(self, name: str) -> Amount:
        a = self.resources.get(name)
        if a is None:
            a = self.resources[name] = Amount()
        return a


@dataclass
class Accounting:
    zones: list[Zone]
    warnings: list[str]


def account(
    layout: Layout,
    allocatable: messages.AllocatableResourcesResponse,
    pods: messages.ListPodResourcesResponse,
    *,
    is_exclusive: IsExclusive | None = None,
    requested: Mapping[str, int] | None = None,
) -> Accounting:
    """``requested``: what the node's running pods request together (cpu in milli-CPUs,
    memory and huge pages in bytes); None when the pods are not known."""
    zones = {n.id: Zone(n.id) for n in layout.nodes}
    warnings: list[str] = []
    node_of_cpu = layout.node_of_cpu()
    cpu_pool = not allocatable.cpu_ids  # CPU manager "none": no CPU is ever pinned
    memory_pool = not allocatable.memory  # memory manager "None"

    for n in layout.nodes:
        z = zones[n.id]
        z.amount("cpu").capacity = len(n.cpus) * MILLI
        if cpu_pool:
            z.amount("cpu").allocatable = len(n.cpus) * MILLI
        if n.memory_bytes is not None:
            z.amount("memory").capacity = n.memory_bytes
        for name, size in n.hugepages_bytes.items():
            z.amount(name).capacity = size

    stray = sorted(c for c in allocatable.cpu_ids if c not in node_of_cpu)
    if stray:
        warnings.append(f"allocatable CPUs {_ids(stray)} are on no NUMA node of this machine")
    for cpu in set(allocatable.cpu_ids):
        if cpu in node_of_cpu:
            zones[node_of_cpu[cpu]].amount("cpu").allocatable += MILLI

    _allocatable_memory(zones, allocatable.memory, warnings)

    device_zones: dict[tuple[str, str], list[int]] = {}
    for dev in allocatable.devices:
        nodes = _known(list(dev.topology), zones, f"allocatable {dev.resource_name}", warnings)
        for device_id in dev.device_ids:
            device_zones[(dev.resource_name, device_id)] = nodes
            for node in nodes:
                zones[node].amount(dev.resource_name).capacity += 1
                zones[node].amount(dev.resource_name).allocatable += 1

    for z in zones.values():
        for a in z.resources.values():
            a.available = a.allocatable

    shared: set[int] | None = None
    for pod in pods.pod_resources:
        for c in pod.containers:
            where = f"pod {pod.namespace}/{pod.name} container {c.name}"
            pinned = None
            # Under CPU manager "none" nothing is pinned (an older kubelet may still list
            # the pool); the pods' requests are taken below.
            if c.cpu_ids and not cpu_pool:
                if is_exclusive is not None:
                    pinned = is_exclusive(pod.namespace, pod.name, c.name)
                if pinned is None:
                    # A pod not (yet) known: pinned sets never overlap, so CPUs that another
                    # container is listed with too are the shared pool.
                    shared = _listed_twice(pods) if shared is None else shared
                    pinned = shared.isdisjoint(c.cpu_ids)
            if pinned:
                _take_cpus(zones, node_of_cpu, c.cpu_ids, where, warnings)
            for dev in c.devices:
                listed = list(dev.topology)
                for device_id in dev.device_ids:
                    known = device_zones.get((dev.resource_name, device_id))
                    if known is None:
                        known = _known(listed, zones, f"{where}: {dev.resource_name}", warnings)
                    for node in known:
                        zones[node].amount(dev.resource_name).available -= 1
            for mem in c.memory:
                nodes = _known(list(mem.topology), zones, f"{where}: {mem.memory_type}", warnings)
                _take(zones, nodes, mem.memory_type, mem.size)

    for name, amount in (requested or {}).items():
        if (cpu_pool and name == "cpu") or (
            memory_pool and (name == "memory" or name.startswith("hugepages-"))
        ):
            _take(zones, [z.id for z in zones.values() if name in z.resources], name, amount)

    for z in zones.values():
        for a in z.resources.values():
            a.available = max(a.available, 0)
    return Accounting([zones[i] for i in sorted(zones)], warnings)


def _listed_twice(pods: messages.ListPodResourcesResponse) -> set[int]:
    seen: set[int] = set()
    twice: set[int] = set()
    for pod in pods.pod_resources:
        for c in pod.containers:
            ids = set(c.cpu_ids)
            twice |= seen & ids
            seen |= ids
    return twice


def _ids(values: list[int]) -> str:
    shown = ",".join(str(v) for v in values[:8])
    return shown + (f" and {len(values) - 8} more" if len(values) > 8 else "")


def _known(nodes: list[int], zones: dict[int, Zone], what: str, warnings: list[str]) -> list[int]:
    unknown = [n for n in nodes if n not in zones]
    if unknown:
        warnings.append(
            f"{what}: NUMA node {_ids(unknown)} is not on this machine (nodes {_ids(sorted(zones))}); left out"
        )
    return [n for n in nodes if n in zones]


def _allocatable_memory(
    zones: dict[int, Zone], blocks: Iterable[messages.ContainerMemory], warnings: list[str]
) -> None:
    # kubelet answers per (type, NUMA node) only under the memory manager's static policy;
    # a type it does not mention keeps allocatable = capacity.
    seen: dict[tuple[str, int], int] = {}
    for mem in blocks:
        nodes = _known(list(mem.topology), zones, f"allocatable {mem.memory_type}", warnings)
        if len(nodes) != 1:
            if nodes:
                warnings.append(
                    f"allocatable {mem.memory_type} names several NUMA nodes {_ids(nodes)}; left out"
                )
            continue
        key = (mem.memory_type, nodes[0])
        seen[key] = seen.get(key, 0) + mem.size
    types = {t for t, _ in seen}
    for z in zones.values():
        for name, a in z.resources.items():
            if name == "cpu":
                continue
            a.allocatable = seen.get((name, z.id), 0) if name in types else a.capacity
    for (name, node), size in seen.items():
        if name not in zones[node].resources:
            zones[node].amount(name).allocatable = size


def _take_cpus(
    zones: dict[int, Zone], node_of_cpu: dict[int, int], cpus: Iterable[int], where: str, warnings: list[str]
) -> None:
    stray = sorted(c for c in cpus if c not in node_of_cpu)
    if stray:
        warnings.append(f"{where}: CPUs {_ids(stray)} are on no NUMA node of this machine; left out")
    for cpu in set(cpus):
        node = node_of_cpu.get(cpu)
        if node is not None:
            zones[node].amount("cpu").available -= MILLI


def _take(zones: dict[int, Zone], nodes: list[int], kind: str, size: int) -> None:
    """Takes ``size`` from the zones in ascending order, each as far as it has room, the
    last one the rest (clamped at 0 later)."""
    if not nodes:
        return
    for node in sorted(nodes):
        a = zones[node].amount(kind)
        taken = size if node == max(nodes) else min(size, max(a.available, 0))
        a.available -= taken
        size -= taken
        if size <= 0:
            return
