"""Pod layouts that pass server-side validation but that a node refuses to run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deploy.conftest import KUSTOMIZATIONS
from deploy.manifests import containers, find, flag, pod_spec, workloads
from deploy.mounts import mount_conflicts

from nfd.hostroot import HostRoot


@pytest.mark.parametrize("overlay", KUSTOMIZATIONS)
def test_no_container_mounts_what_runc_refuses(built: dict[str, list[dict[str, Any]]], overlay: str) -> None:
    problems = [
        f"{w['kind']}/{w['metadata']['name']}: {p}"
        for w in workloads(built[overlay])
        for c in containers(w)
        for p in mount_conflicts(pod_spec(w), c)
    ]
    assert problems == []


@pytest.mark.parametrize("overlay", KUSTOMIZATIONS)
def test_cluster_dns_on_the_host_network_only_with_the_host_network(
    built: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    # ClusterFirstWithHostNet on a pod network is ClusterFirst under a misleading name.
    for w in workloads(built[overlay]):
        spec = pod_spec(w)
        if spec.get("dnsPolicy") == "ClusterFirstWithHostNet":
            assert spec.get("hostNetwork") is True, f"{w['kind']}/{w['metadata']['name']}"


def test_device_plugin_worker_sees_the_device_nodes_and_its_config(
    built: dict[str, list[dict[str, Any]]],
) -> None:
    docs = built["device-plugins"]
    spec = pod_spec(find(docs, "DaemonSet", "nfd-worker"))
    volumes = {v["name"]: v for v in spec["volumes"]}
    worker = next(c for c in spec["containers"] if c["name"] == "nfd-worker")
    mounts = {m["mountPath"]: m for m in worker["volumeMounts"]}
    # Device-node globs are matched under HostRoot's dev, as the worker's env places it.
    host = HostRoot.from_env({e["name"]: e["value"] for e in worker["env"] if "value" in e})
    dev = mounts[str(host.dev)]
    assert dev.get("readOnly") is True
    assert volumes[dev["name"]]["hostPath"]["path"] == "/dev"
    # The worker reads the same plugin config as the plugin container.
    plugin = next(c for c in spec["containers"] if c["name"] == "nfd-device-plugin")
    config = flag(worker["args"], "--device-plugin-config")
    assert config and config == flag(plugin["args"], "--config")
    config_mount = mounts[str(Path(config).parent)]
    assert volumes[config_mount["name"]]["configMap"]["name"] == "nfd-device-plugin-conf"
    # The base's arguments are kept, not restated: one more flag, nothing lost.
    base = next(c for c in pod_spec(find(built["default"], "DaemonSet", "nfd-worker"))["containers"])
    assert worker["args"] == [*base["args"], f"--device-plugin-config={config}"]


def pod(mounts: list[dict[str, Any]], volumes: list[dict[str, Any]]) -> list[str]:
    return mount_conflicts({"volumes": volumes}, {"name": "c", "volumeMounts": mounts})


CM = {"name": "cm", "configMap": {"name": "x"}}
HOST = {"name": "host", "hostPath": {"path": "/etc"}}
SCRATCH = {"name": "scratch", "emptyDir": {}}
OS_RELEASE = {"name": "osr", "hostPath": {"path": "/etc/os-release", "type": "File"}}


def test_checker_refuses_a_mount_inside_a_read_only_one() -> None:
    assert pod(
        [{"name": "host", "mountPath": "/a", "readOnly": True}, {"name": "scratch", "mountPath": "/a/b"}],
        [HOST, SCRATCH],
    ) == ["c: '/a/b' is inside read-only mount '/a'"]
    # Listed child first: the order of the list does not hide it.
    assert pod(
        [{"name": "scratch", "mountPath": "/a/b/c"}, {"name": "host", "mountPath": "/a", "readOnly": True}],
        [HOST, SCRATCH],
    ) == ["c: '/a/b/c' is inside read-only mount '/a'"]


def test_checker_knows_config_maps_are_read_only_without_the_flag() -> None:
    assert pod([{"name": "cm", "mountPath": "/etc/x"}, {"name": "host", "mountPath": "/etc/x/y"}], [CM, HOST])


def test_checker_refuses_duplicates_proc_and_mounts_below_a_file() -> None:
    assert pod([{"name": "host", "mountPath": "/a"}, {"name": "scratch", "mountPath": "/a"}], [HOST, SCRATCH])
    assert pod([{"name": "host", "mountPath": "/proc/sys"}], [HOST])
    assert pod(
        [{"name": "osr", "mountPath": "/o"}, {"name": "scratch", "mountPath": "/o/x"}], [OS_RELEASE, SCRATCH]
    )
    assert pod([{"name": "host", "mountPath": "rel"}], [HOST])
    assert pod([{"name": "nope", "mountPath": "/a"}], [HOST])


def test_checker_allows_siblings_prefixes_and_writable_parents() -> None:
    assert (
        pod(
            [
                {"name": "host", "mountPath": "/etc/kubernetes/a", "readOnly": True},
                {"name": "cm", "mountPath": "/etc/kubernetes/ab"},
                {"name": "scratch", "mountPath": "/w"},
                {"name": "osr", "mountPath": "/w/os-release", "readOnly": True},
                {"name": "proc", "mountPath": "/proc/cpuinfo"},
            ],
            [HOST, CM, SCRATCH, OS_RELEASE, {"name": "proc", "hostPath": {"path": "/x"}}],
        )
        == []
    )
