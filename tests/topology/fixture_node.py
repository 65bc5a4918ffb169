"""The fixture node: 2 sockets, 8 NUMA zones (4 per socket), 192 CPUs (24 per zone, two
hyperthreads per core), 64 GiB per zone, 2 MiB huge pages everywhere and 1 GiB pages on
the first zone of each socket, one GPU per zone, SR-IOV VFs on zones 1 and 5, and an FPGA
kubelet reports with no NUMA affinity.

kubelet's configuration on it: static CPU manager with ``reservedSystemCPUs: 0,96``,
static memory manager with 1 GiB reserved on zones 0 and 4, Topology Manager
``single-numa-node`` at ``pod`` scope. So ``GetAllocatableResources`` answers every CPU
but 0 and 96, and per zone the memory left after huge pages and the reservation.

Pods (what ``List`` answers, and the Pod objects the API server holds):
- prod/db (Guaranteed): ``main`` 16 CPUs, 1 GPU, 32 GiB, 1 GiB of 2 MiB pages, zone 1;
- ml/train (Guaranteed, pod scope): ``trainer`` 36 CPUs (all of zone 4, 12 of zone 5),
  GPUs of zones 4 and 5, 100 GiB across zones 4-5, 4 GiB of 1 GiB pages on zone 4;
  ``logger`` asks 500m: shared pool (an older kubelet lists the pool for it);
- net/sriov (Guaranteed): ``app`` 4 CPUs, 2 VFs, 4 GiB and 512 MiB of 2 MiB pages, zone 5;
- default/web (Burstable): ``nginx`` in the shared pool (listed as for ``logger``);
- default/idle (BestEffort): nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nfd.topology.api.v1 import api_pb2 as pb

GI = 1024**3
MI = 1024**2
ZONES = range(8)
SOCKET_OF = {z: z // 4 for z in ZONES}
RESERVED_CPUS = {0, 96}
MEM_TOTAL = 64 * GI
HP2M_PAGES = 2048  # per zone: 4 GiB
HP1G_PAGES = {0: 8, 4: 8}  # 8 GiB on the first zone of each socket
RESERVED_MEMORY = {0: 1 * GI, 4: 1 * GI}


def zone_cpus(z: int) -> list[int]:
    return [*range(z * 12, z * 12 + 12), *range(96 + z * 12, 96 + z * 12 + 12)]


def distance(a: int, b: int) -> int:
    return 10 if a == b else 12 if SOCKET_OF[a] == SOCKET_OF[b] else 32


def _ranges(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5", as sysfs writes cpulist."""
    cpus = sorted(cpus)
    runs = [[cpus[0], cpus[0]]]
    for c in cpus[1:]:
        if c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)


def write_sysfs(root: Path) -> Path:
    """The host tree (``<root>/sys/...``); returns root."""
    base = root / "sys/devices/system/node"
    for z in ZONES:
        d = base / f"node{z}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(_ranges(zone_cpus(z)) + "\n")
        (d / "meminfo").write_text(
            f"Node {z} MemTotal:       {MEM_TOTAL // 1024} kB\nNode {z} MemFree:        {MEM_TOTAL // 2048} kB\n"
        )
        (d / "distance").write_text(" ".join(str(distance(z, o)) for o in ZONES) + "\n")
        for size_kb, pages in ((2048, HP2M_PAGES), (1048576, HP1G_PAGES.get(z, 0))):
            hp = d / f"hugepages/hugepages-{size_kb}kB"
            hp.mkdir(parents=True)
            (hp / "nr_hugepages").write_text(f"{pages}\n")
            (hp / "free_hugepages").write_text(f"{pages}\n")
    (root / "sys/devices/system/cpu").mkdir(parents=True)
    (root / "sys/devices/system/cpu/online").write_text("0-191\n")
    return root


def topo(*nodes: int) -> pb.TopologyInfo:
    return pb.TopologyInfo(nodes=[pb.NUMANode(ID=n) for n in nodes])


def hugepages_bytes(z: int) -> dict[str, int]:
    return {"hugepages-2Mi": HP2M_PAGES * 2 * MI, "hugepages-1Gi": HP1G_PAGES.get(z, 0) * GI}


def allocatable() -> pb.AllocatableResourcesResponse:
    cpus = [c for z in ZONES for c in zone_cpus(z) if c not in RESERVED_CPUS]
    devices = [
        pb.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=[f"GPU-{z}"], topology=topo(z))
        for z in ZONES
    ]
    for z in (1, 5):
        devices.append(
            pb.ContainerDevices(
                resource_name="example.com/sriov-vf",
                device_ids=[f"VF-{z}-{i}" for i in range(4)],
                topology=topo(z),
            )
        )
    devices.append(pb.ContainerDevices(resource_name="example.com/fpga", device_ids=["fpga-0"]))
    memory = []
    for z in ZONES:
        hp = hugepages_bytes(z)
        memory.append(
            pb.ContainerMemory(
                memory_type="memory",
                size=MEM_TOTAL - sum(hp.values()) - RESERVED_MEMORY.get(z, 0),
                topology=topo(z),
            )
        )
        for name, size in hp.items():
            if size:
                memory.append(pb.ContainerMemory(memory_type=name, size=size, topology=topo(z)))
    return pb.AllocatableResourcesResponse(cpu_ids=cpus, devices=devices, memory=memory)


EXCLUSIVE = {
    ("prod", "db", "main"): [*range(12, 20), *range(108, 116)],
    ("ml", "train", "trainer"): [*zone_cpus(4), *range(60, 66), *range(156, 162)],
    ("net", "sriov", "app"): [66, 67, 162, 163],
}


def shared_pool() -> list[int]:
    taken = {c for cpus in EXCLUSIVE.values() for c in cpus} | RESERVED_CPUS
    return [c for c in range(192) if c not in taken]


def pods() -> pb.ListPodResourcesResponse:
    def mem(kind: str, size: int, *nodes: int) -> pb.ContainerMemory:
        return pb.ContainerMemory(memory_type=kind, size=size, topology=topo(*nodes))

    def dev(name: str, ids: list[str], *nodes: int) -> pb.ContainerDevices:
        return pb.ContainerDevices(resource_name=name, device_ids=ids, topology=topo(*nodes))

    C = pb.ContainerResources
    return pb.ListPodResourcesResponse(
        pod_resources=[
            pb.PodResources(
                namespace="prod", name="db",
                containers=[C(name="main", cpu_ids=EXCLUSIVE[("prod", "db", "main")],
                              devices=[dev("nvidia.com/gpu", ["GPU-1"], 1)],
                              memory=[mem("memory", 32 * GI, 1), mem("hugepages-2Mi", 1 * GI, 1)])],
            ),
            pb.PodResources(
                namespace="ml", name="train",
                containers=[
                    C(name="trainer", cpu_ids=EXCLUSIVE[("ml", "train", "trainer")],
                      devices=[dev("nvidia.com/gpu", ["GPU-4"], 4), dev("nvidia.com/gpu", ["GPU-5"], 5)],
                      memory=[mem("memory", 100 * GI, 4, 5), mem("hugepages-1Gi", 4 * GI, 4)]),
                    C(name="logger", cpu_ids=shared_pool()),
                ],
            ),
            pb.PodResources(
                namespace="net", name="sriov",
                containers=[C(name="app", cpu_ids=EXCLUSIVE[("net", "sriov", "app")],
                              devices=[dev("example.com/sriov-vf", ["VF-5-0", "VF-5-1"], 5)],
                              memory=[mem("memory", 4 * GI, 5), mem("hugepages-2Mi", 512 * MI, 5)])],
            ),
            pb.PodResources(namespace="default", name="web", containers=[C(name="nginx", cpu_ids=shared_pool())]),
            pb.PodResources(namespace="default", name="idle", containers=[C(name="sleep")]),
        ]
    )  # fmt: skip


def _container(name: str, cpu: str | None, memory: str | None, *, guaranteed: bool) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if cpu or memory:
        amounts = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
        res = {"requests": amounts, "limits": amounts} if guaranteed else {"requests": amounts}
    return {"name": name, "image": "example/app:1", "resources": res}


def pod_objects(node: str) -> list[dict[str, Any]]:
    """The Pod objects as the API server holds them (qosClass set, as it sets it)."""

    def pod(ns: str, name: str, qos: str, containers: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": ns, "name": name},
            "spec": {"nodeName": node, "containers": containers},
            "status": {"phase": "Running", "qosClass": qos},
        }  # fmt: skip

    return [
        pod("prod", "db", "Guaranteed", [_container("main", "16", "33Gi", guaranteed=True)]),
        pod(
            "ml",
            "train",
            "Guaranteed",
            [
                _container("trainer", "36000m", "104Gi", guaranteed=True),
                _container("logger", "500m", "64Mi", guaranteed=True),
            ],
        ),
        pod("net", "sriov", "Guaranteed", [_container("app", "4", "4608Mi", guaranteed=True)]),
        pod("default", "web", "Burstable", [_container("nginx", "2", "1Gi", guaranteed=False)]),
        pod("default", "idle", "BestEffort", [_container("sleep", None, None, guaranteed=False)]),
    ]
