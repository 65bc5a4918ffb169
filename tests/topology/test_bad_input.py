"""Bad input costs that value only, with one clear log line: the kubelet socket missing,
an unknown Topology Manager policy, PodResources naming NUMA nodes the machine lacks, a
PodResources answer that is not a valid message."""

from __future__ import annotations

import logging
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from fixture_node import allocatable, pod_objects, pods, topo
from podresources_standin import PodResourcesStandIn
from test_fixture_node import by_hand, resources

from nfd.hostroot import HostRoot
from nfd.topology.api.v1 import api_pb2 as pb
from nfd.topology.podwatch import pinned_containers
from nfd.topology.updater import Settings, Updater

ANSWERED = ("List", "GetAllocatableResources")
PINNED = {
    (p["metadata"]["namespace"], p["metadata"]["name"]): pinned_containers(p)
    for p in pod_objects("numa-node")
}


def is_exclusive(ns: str, pod: str, container: str) -> bool | None:
    pinned = PINNED.get((ns, pod))
    return None if pinned is None else container in pinned


def updater(host: HostRoot, socket: Path, kubelet_config: Path | None, out: list[dict[str, Any]]) -> Updater:
    settings = Settings(
        node_name="numa-node",
        host=host,
        socket=str(socket),
        kubelet_config=str(kubelet_config) if kubelet_config else None,
    )

    def publish(obj: dict[str, Any]) -> bool:
        out.append(obj)
        return True

    return Updater(settings, publish=publish, is_exclusive=is_exclusive)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "nfd.topology" and r.levelno >= logging.WARNING
    ]


def test_missing_socket_waits_with_one_line_then_publishes(
    host: HostRoot, sock_dir: Path, kubelet_config: Path, caplog: pytest.LogCaptureFixture
) -> None:
    socket = sock_dir / "kubelet.sock"
    out: list[dict[str, Any]] = []
    u = updater(host, socket, kubelet_config, out)
    with caplog.at_level(logging.INFO, logger="nfd.topology"):
        assert [u.run_once() for _ in range(3)] == [False, False, False]
        (line,) = warnings(caplog)
        assert str(socket) in line and "no such socket" in line and "retrying" in line
        with PodResourcesStandIn(socket, allocatable=allocatable(), pods=pods()):
            assert u.run_once() is True
    assert len(out) == 1 and len(out[0]["zones"]) == 8
    assert any("answers again" in r.getMessage() for r in caplog.records)


def test_kubelet_going_away_mid_run_is_one_line_and_no_crash(
    host: HostRoot, kubelet: PodResourcesStandIn, kubelet_config: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out: list[dict[str, Any]] = []
    u = updater(host, kubelet.socket, kubelet_config, out)
    assert u.run_once()
    kubelet.stop()
    with caplog.at_level(logging.INFO, logger="nfd.topology"):
        assert [u.run_once() for _ in range(3)] == [False, False, False]
        assert len(warnings(caplog)) == 1
        kubelet.start()  # kubelet back, on a new socket at the same path
        assert u.run_once() is True
    assert any("answers again" in r.getMessage() for r in caplog.records)
    assert len(out) == 2


def test_a_malformed_answer_is_one_line_naming_why_and_no_traceback(
    host: HostRoot, sock_dir: Path, kubelet_config: Path, caplog: pytest.LogCaptureFixture
) -> None:
    truncated = b"\x0a\x05ab"  # a field of 5 bytes with 2 left
    answers = {m: grpc.unary_unary_rpc_method_handler(lambda _r, _c: truncated) for m in ANSWERED}
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("v1.PodResourcesLister", answers),))
    socket = sock_dir / "kubelet.sock"
    server.add_insecure_port(f"unix:{socket}")
    server.start()
    try:
        u = updater(host, socket, kubelet_config, [])
        with caplog.at_level(logging.INFO):
            assert [u.run_once() for _ in range(3)] == [False, False, False]
    finally:
        server.stop(grace=None)
    logged = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in logged] == ["nfd.topology"] and logged[0].exc_info is None
    assert "malformed" in logged[0].getMessage() and "past the end" in logged[0].getMessage()


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("topologyManagerPolicy: numa-magic\n", "topologyManagerPolicy", "numa-magic"),
        (
            "topologyManagerPolicy: restricted\ntopologyManagerScope: socket\n",
            "topologyManagerScope",
            "socket",
        ),
    ],
)
def test_unknown_policy_or_scope_publishes_without_the_attributes(
    host: HostRoot,
    kubelet: PodResourcesStandIn,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    text: str,
    key: str,
    value: str,
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    out: list[dict[str, Any]] = []
    u = updater(host, kubelet.socket, config, out)
    with caplog.at_level(logging.WARNING, logger="nfd.topology"):
        for _ in range(3):
            u.run_once()
    (line,) = warnings(caplog)  # once, not every pass
    assert str(config) in line and key in line and f'"{value}"' in line
    obj = out[-1]
    assert "attributes" not in obj and "topologyPolicies" not in obj
    assert {z["name"]: resources(z) for z in obj["zones"]} == by_hand()


def test_a_missing_kubelet_config_publishes_without_the_attributes(
    host: HostRoot, kubelet: PodResourcesStandIn, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A node that keeps its kubelet config elsewhere: the zones still go out, the policy
    # is left out rather than guessed, and the warning names the file once.
    config = tmp_path / "nowhere/config.yaml"
    out: list[dict[str, Any]] = []
    u = updater(host, kubelet.socket, config, out)
    with caplog.at_level(logging.WARNING, logger="nfd.topology"):
        for _ in range(3):
            u.run_once()
    (line,) = warnings(caplog)
    assert str(config) in line and "\n" not in line
    obj = out[-1]
    assert "attributes" not in obj and "topologyPolicies" not in obj
    assert {z["name"]: resources(z) for z in obj["zones"]} == by_hand()


def test_unknown_numa_nodes_in_podresources_cost_those_values_only(
    host: HostRoot, kubelet: PodResourcesStandIn, kubelet_config: Path, caplog: pytest.LogCaptureFixture
) -> None:
    alloc = allocatable()
    alloc.devices.append(
        pb.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=["GPU-11"], topology=topo(11))
    )
    alloc.cpu_ids.append(500)
    listed = pods()
    listed.pod_resources.append(
        pb.PodResources(
            namespace="bad",
            name="ghost",
            containers=[
                pb.ContainerResources(
                    name="x",
                    cpu_ids=[500],
                    devices=[
                        pb.ContainerDevices(
                            resource_name="example.com/nic", device_ids=["n0"], topology=topo(9)
                        )
                    ],
                    memory=[pb.ContainerMemory(memory_type="memory", size=1 << 30, topology=topo(12))],
                )
            ],
        )
    )
    kubelet.allocatable, kubelet.pods = alloc, listed
    out: list[dict[str, Any]] = []
    u = updater(host, kubelet.socket, kubelet_config, out)
    with caplog.at_level(logging.WARNING, logger="nfd.topology"):
        assert u.run_once() and u.run_once()
    lines = warnings(caplog)
    assert len(lines) == 5, lines  # each once, though two passes ran
    text = "\n".join(lines)
    assert "allocatable CPUs 500 are on no NUMA node" in text
    assert "allocatable nvidia.com/gpu: NUMA node 11 is not on this machine (nodes 0,1,2,3,4,5,6,7)" in text
    assert "pod bad/ghost container x: CPUs 500 are on no NUMA node" in text
    assert "pod bad/ghost container x: example.com/nic: NUMA node 9 is not on this machine" in text
    assert "pod bad/ghost container x: memory: NUMA node 12 is not on this machine" in text
    # Everything else is as kubelet counts it.
    assert {z["name"]: resources(z) for z in out[-1]["zones"]} == by_hand()
