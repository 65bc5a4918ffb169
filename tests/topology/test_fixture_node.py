"""The fixture node end to end: PodResources over a real unix socket, the pods from a
node-scoped watch of the fake API server, the object written through real HTTP. The
expected numbers are kubelet's own accounting of the fixture, worked out by hand below."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fixture_node import GI, MI, distance
from podresources_standin import PodResourcesStandIn

from nfd.hostroot import HostRoot
from nfd.kube.config import from_kubeconfig
from nfd.kube.light import LightTransport
from nfd.topology.podwatch import PodWatch
from nfd.topology.updater import Settings, Updater
from nfd.topology.writer import NrtWriter
from tests.fakeapi import FakeApiServer

NODE = "numa-node"


def q(n: int) -> str:
    """Bytes as the object writes them."""
    if n == 0:
        return "0"
    for unit, size in (("Gi", GI), ("Mi", MI)):
        if n % size == 0:
            return f"{n // size}{unit}"
    raise AssertionError(n)


def by_hand() -> dict[str, dict[str, tuple[str, str, str]]]:
    """zone -> resource -> (capacity, allocatable, available), from the fixture's facts
    (fixture_node.py's docstring)."""
    zones: dict[str, dict[str, tuple[str, str, str]]] = {}
    for z in range(8):
        # cpu: 24 per zone; 0 and 96 (zone 0) reserved; exclusive: db 16 on zone 1,
        # trainer 24 on zone 4 and 12 on zone 5, sriov 4 on zone 5. logger and nginx
        # share the pool: nothing.
        alloc_cpu = 24 - (2 if z == 0 else 0)
        used_cpu = {1: 16, 4: 24, 5: 12 + 4}.get(z, 0)
        # memory: 64Gi; allocatable = 64Gi - 4Gi of 2Mi pages - 8Gi of 1Gi pages (zones
        # 0, 4) - 1Gi reserved (zones 0, 4). db takes 32Gi of zone 1; trainer's 100Gi on
        # zones 4-5 fills zone 4 (51Gi) and takes the other 49Gi from zone 5; sriov 4Gi.
        alloc_mem = {0: 64 - 4 - 8 - 1, 4: 64 - 4 - 8 - 1}.get(z, 64 - 4)
        used_mem = {1: 32, 4: 51, 5: 49 + 4}.get(z, 0)
        hp2m_used = {1: 1 * GI, 5: 512 * MI}.get(z, 0)
        hp1g = 8 if z in (0, 4) else 0
        hp1g_used = 4 if z == 4 else 0
        gpu_used = 1 if z in (1, 4, 5) else 0
        zone = {
            "cpu": ("24", str(alloc_cpu), str(alloc_cpu - used_cpu)),
            "memory": ("64Gi", q(alloc_mem * GI), q((alloc_mem - used_mem) * GI)),
            "hugepages-2Mi": ("4Gi", "4Gi", q(4 * GI - hp2m_used)),
            "hugepages-1Gi": (q(hp1g * GI), q(hp1g * GI), q((hp1g - hp1g_used) * GI)),
            "nvidia.com/gpu": ("1", "1", str(1 - gpu_used)),
        }
        if z in (1, 5):
            zone["example.com/sriov-vf"] = ("4", "4", "2" if z == 5 else "4")
        zones[f"node-{z}"] = zone
    return zones


def resources(zone: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {r["name"]: (r["capacity"], r["allocatable"], r["available"]) for r in zone["resources"]}


def kube(fake_api: FakeApiServer, where: Path) -> LightTransport:
    """A client for the fake, configured as users configure it: by a kubeconfig."""
    return LightTransport(from_kubeconfig(str(fake_api.write_kubeconfig(where / "kubeconfig"))))


def start(
    fake_api: FakeApiServer, host: HostRoot, kubelet: PodResourcesStandIn, kubelet_config: Path
) -> tuple[Updater, NrtWriter, PodWatch, Any]:
    from fixture_node import pod_objects

    if not fake_api.objects.exists("nodes", NODE):
        fake_api.create_node(NODE)
        for p in pod_objects(NODE):
            fake_api.objects.create("pods", p, namespace=p["metadata"]["namespace"])
    node = fake_api.objects.get("nodes", NODE)
    client = kube(fake_api, kubelet_config.parent)
    writer = NrtWriter(client)
    settings = Settings(
        node_name=NODE, host=host, socket=str(kubelet.socket), kubelet_config=str(kubelet_config)
    )
    updater = Updater(settings, publish=writer.write, node_uid=lambda: writer.node_uid(NODE))
    watch = PodWatch(client, NODE, on_change=updater.nudge)
    updater.is_exclusive = watch.is_exclusive
    watch.start()
    assert watch.wait_synced(10)
    return updater, writer, watch, node


def test_fixture_node_object_is_kubelets_accounting_zone_by_zone(
    fake_api: FakeApiServer, host: HostRoot, kubelet: PodResourcesStandIn, kubelet_config: Path
) -> None:
    updater, _writer, watch, node = start(fake_api, host, kubelet, kubelet_config)
    try:
        assert updater.run_once() is True
    finally:
        watch.stop()
    got = fake_api.objects.get("noderesourcetopologies", NODE)
    expected = by_hand()
    assert [z["name"] for z in got["zones"]] == list(expected)
    for zone in got["zones"]:
        assert zone["type"] == "Node"
        assert resources(zone) == expected[zone["name"]], zone["name"]
        z = int(zone["name"].removeprefix("node-"))
        assert zone["costs"] == [{"name": f"node-{o}", "value": distance(z, o)} for o in range(8)]
    # The FPGA has no NUMA affinity: in no zone.
    assert not any("example.com/fpga" in resources(z) for z in got["zones"])
    assert got["attributes"] == [
        {"name": "topologyManagerPolicy", "value": "single-numa-node"},
        {"name": "topologyManagerScope", "value": "pod"},
    ]
    assert got["topologyPolicies"] == ["SingleNUMANodePodLevel"]
    # Owned by the Node, so the garbage collector removes it with the Node.
    assert got["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node["metadata"]["uid"]}
    ]


def test_unchanged_passes_write_nothing_and_nothing_is_read_per_pod(
    fake_api: FakeApiServer, host: HostRoot, kubelet: PodResourcesStandIn, kubelet_config: Path
) -> None:
    mark = fake_api.log.mark()
    updater, writer, watch, _ = start(fake_api, host, kubelet, kubelet_config)
    try:
        wrote = [updater.run_once() for _ in range(5)]
    finally:
        watch.stop()
    assert wrote == [True, False, False, False, False]
    assert writer.writes == 1
    assert kubelet.calls == {"List": 5, "GetAllocatableResources": 5}
    reqs = [
        r
        for r in fake_api.log.records(since=mark)
        if r.resource in ("pods", "nodes", "noderesourcetopologies.topology.node.k8s.io")
    ]
    by_verb = sorted((r.resource, r.verb) for r in reqs if r.verb != "create" or r.resource != "pods")
    # One node GET (owner uid), one NRT GET (is it there already?), one create; the pods
    # come from one list and one watch, never a GET each.
    assert ("pods", "get") not in by_verb
    assert by_verb.count(("noderesourcetopologies.topology.node.k8s.io", "create")) == 1
    assert by_verb.count(("noderesourcetopologies.topology.node.k8s.io", "update")) == 0
    assert by_verb.count(("nodes", "get")) == 1


def test_a_change_is_written_once_as_an_update(
    fake_api: FakeApiServer, host: HostRoot, kubelet: PodResourcesStandIn, kubelet_config: Path
) -> None:
    from fixture_node import pods

    updater, writer, watch, _ = start(fake_api, host, kubelet, kubelet_config)
    try:
        assert updater.run_once()
        # prod/db ends: its CPUs, GPU and memory on zone 1 come back.
        left = pods()
        del left.pod_resources[0]
        kubelet.pods = left
        assert updater.run_once() is True
        assert updater.run_once() is False
    finally:
        watch.stop()
    zone1 = resources(fake_api.objects.get("noderesourcetopologies", NODE)["zones"][1])
    assert zone1["cpu"] == ("24", "24", "24")
    assert zone1["memory"] == ("64Gi", "60Gi", "60Gi")
    assert zone1["nvidia.com/gpu"] == ("1", "1", "1")
    assert writer.writes == 2
