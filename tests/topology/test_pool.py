"""CPU manager ``none`` and memory manager ``None``: kubelet hands CPUs and memory out of
one node-wide pool, ``GetAllocatableResources`` lists no CPU IDs and no memory, and
``List`` no assignments. The zones then carry every CPU and all memory as allocatable,
and what the running pods request is taken from them, as the Node's allocatable less the
pods' requests says (and as the topology-aware scheduler's own reservations assume)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from fixture_node import GI, HP2M_PAGES, MEM_TOTAL, MI, ZONES, topo
from podresources_standin import PodResourcesStandIn
from test_fixture_node import resources

from nfd.hostroot import HostRoot
from nfd.topology import nrt
from nfd.topology.accounting import account
from nfd.topology.api.v1 import api_pb2 as pb
from nfd.topology.layout import read_layout
from nfd.topology.messages import decode_allocatable, decode_list
from nfd.topology.podwatch import pod_requests
from tests.fakeapi import FakeApiServer

NODE = "vm"
C = pb.ContainerResources


def one_node_vm(root: Path) -> HostRoot:
    """A 2-CPU VM with one NUMA node of 12 GiB and no huge pages."""
    d = root / "sys/devices/system/node/node0"
    d.mkdir(parents=True)
    (d / "cpulist").write_text("0-1\n")
    (d / "meminfo").write_text(f"Node 0 MemTotal:       {12 * GI // 1024} kB\n")
    (d / "distance").write_text("10\n")
    (root / "sys/devices/system/cpu").mkdir(parents=True)
    (root / "sys/devices/system/cpu/online").write_text("0-1\n")
    return HostRoot.under(root)


def zones(
    host: HostRoot,
    requested: dict[str, int] | None,
    *,
    allocatable: pb.AllocatableResourcesResponse | None = None,
    pods: pb.ListPodResourcesResponse | None = None,
) -> dict[str, dict[str, tuple[str, str, str]]]:
    layout = read_layout(host)
    answers = (
        decode_allocatable((allocatable or pb.AllocatableResourcesResponse()).SerializeToString()),
        decode_list((pods or pb.ListPodResourcesResponse()).SerializeToString()),
    )
    result = account(layout, *answers, requested=requested)
    assert result.warnings == []
    obj = nrt.build(NODE, zones=result.zones, layout=layout, policy=None, node_uid=None)
    return {z["name"]: resources(z) for z in obj["zones"]}


def test_every_cpu_is_allocatable_and_requests_are_taken(tmp_path: Path) -> None:
    # The node this came from: Node allocatable cpu 2; before, the zone said 0 and 0.
    host = one_node_vm(tmp_path)
    got = zones(host, {"cpu": 750, "memory": 1 * GI})
    assert got["node-0"]["cpu"] == ("2", "2", "1250m")
    assert got["node-0"]["memory"] == ("12Gi", "12Gi", "11Gi")


def test_without_the_pods_available_is_allocatable(tmp_path: Path) -> None:
    # --no-publish has no pod list: nothing is taken rather than a guess.
    got = zones(one_node_vm(tmp_path), None)
    assert got["node-0"]["cpu"] == ("2", "2", "2")
    assert got["node-0"]["memory"] == ("12Gi", "12Gi", "12Gi")


def test_more_requested_than_the_node_has_is_zero_not_negative(tmp_path: Path) -> None:
    got = zones(one_node_vm(tmp_path), {"cpu": 2500})
    assert got["node-0"]["cpu"] == ("2", "2", "0")


def test_an_older_kubelet_listing_the_pool_pins_nothing(tmp_path: Path) -> None:
    # Older kubelets list every CPU for every container; under "none" none is pinned,
    # whatever the container's QoS: only the request (here 1 CPU) counts.
    pods = pb.ListPodResourcesResponse(
        pod_resources=[pb.PodResources(namespace="a", name="g", containers=[C(name="c", cpu_ids=[0, 1])])]
    )
    got = zones(one_node_vm(tmp_path), {"cpu": 1000}, pods=pods)
    assert got["node-0"]["cpu"] == ("2", "2", "1")


def test_several_zones_are_filled_in_ascending_order(host: HostRoot) -> None:
    # The fixture node's 8 zones of 24 CPUs and 64 GiB, with both managers off; a GPU
    # per zone still counts per device.
    gpus = [
        pb.ContainerDevices(resource_name="example.com/gpu", device_ids=[f"gpu{z}"], topology=topo(z))
        for z in ZONES
    ]
    allocatable = pb.AllocatableResourcesResponse(devices=gpus)
    got = zones(
        host,
        {"cpu": 30_000, "memory": 70 * GI, "hugepages-2Mi": 512 * MI},
        allocatable=allocatable,
    )
    hp2m = HP2M_PAGES * 2 * MI
    assert got["node-0"]["cpu"] == ("24", "24", "0")
    assert got["node-1"]["cpu"] == ("24", "24", "18")
    assert got["node-0"]["memory"] == (nrt.quantity("memory", MEM_TOTAL),) * 2 + ("0",)
    assert got["node-1"]["memory"][2] == nrt.quantity("memory", MEM_TOTAL - 6 * GI)
    assert got["node-0"]["hugepages-2Mi"][2] == nrt.quantity("hugepages-2Mi", hp2m - 512 * MI)
    assert all(got[f"node-{z}"]["cpu"] == ("24", "24", "24") for z in ZONES if z > 1)
    assert all(got[f"node-{z}"]["example.com/gpu"] == ("1", "1", "1") for z in ZONES)


def test_pod_requests_count_as_the_scheduler_counts_them() -> None:
    def c(name: str, cpu: str, memory: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}, **extra}

    pod = {
        "spec": {
            "initContainers": [
                c("setup", "3", "1Gi"),
                c("proxy", "250m", "128Mi", restartPolicy="Always"),  # a sidecar
                c("migrate", "500m", "2Gi"),
            ],
            "containers": [
                c("app", "1", "512Mi"),
                {"name": "limits-only", "resources": {"limits": {"cpu": "100m", "hugepages-2Mi": "4Mi"}}},
                {"name": "best-effort"},
            ],
            "overhead": {"cpu": "50m", "memory": "16Mi"},
        }
    }
    # cpu: max(3 for setup, 1.35 for proxy + app + limits-only) + 50m overhead;
    # memory: max(128Mi + 2Gi while migrate runs beside proxy, 640Mi) + 16Mi.
    assert pod_requests(pod) == {"cpu": 3050, "memory": 2192 * MI, "hugepages-2Mi": 4 * MI}
    assert pod_requests({"spec": {"containers": [{"name": "x"}]}}) == {}


def _pod(ns: str, name: str, cpu: str, memory: str, phase: str = "Running") -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": ns, "name": name},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}]},
        "status": {"phase": phase, "qosClass": "Burstable"},
    }  # fmt: skip


def test_published_object_takes_the_running_pods_requests(
    fake_api: FakeApiServer, sock_dir: Path, tmp_path: Path
) -> None:
    one_node_vm(tmp_path / "host")
    fake_api.create_node(NODE)
    for pod in (_pod("a", "web", "500m", "1Gi"), _pod("a", "done", "1", "1Gi", phase="Succeeded")):
        fake_api.objects.create("pods", pod, namespace="a")
    config = tmp_path / "config.yaml"
    config.write_text("cpuManagerPolicy: none\n")
    kubeconfig = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    with PodResourcesStandIn(sock_dir / "kubelet.sock", allocatable=pb.AllocatableResourcesResponse(),
                             pods=pb.ListPodResourcesResponse()) as kubelet:  # fmt: skip
        p = subprocess.run(
            [sys.executable, "-m", "nfd", "topology-updater", "--node-name", NODE, "--oneshot",
             "--kubeconfig", str(kubeconfig), "--host-root", str(tmp_path / "host"),
             "--podresources-socket", str(kubelet.socket), "--kubelet-config", str(config)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert p.returncode == 0, p.stderr
    got = fake_api.objects.get("noderesourcetopologies", NODE)
    zone = resources(got["zones"][0])
    assert zone["cpu"] == ("2", "2", "1500m"), json.dumps(got["zones"])
    assert zone["memory"] == ("12Gi", "12Gi", "11Gi")


def test_quantities_are_read_in_integers_rounded_up() -> None:
    from nfd.policy import scaled_quantity

    assert [scaled_quantity(q, 1000) for q in ("250m", "1.5", "2", "2.5m", "1e3", "100n")] == [
        250, 1500, 2000, 3, 1_000_000, 1,
    ]  # fmt: skip
    assert [scaled_quantity(q) for q in ("1Gi", "1k", "0.1", "512Mi")] == [GI, 1000, 1, 512 * MI]
    for bad in ("abc", "", " 1", "1e999", "1Qi"):
        try:
            scaled_quantity(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was accepted")
