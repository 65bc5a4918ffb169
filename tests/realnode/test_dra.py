"""The dra overlay on the real node: the node's loop devices published as ResourceSlices
and prepared for pods by the real kubelet through CDI, a claim-template pod and an
extended-resource pod, and a device node moved away and back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from realnode.node import (
    NAMESPACE,
    RealNode,
    config_map_patch,
    container_memory,
    memory_fits,
    pod_manifest,
    pod_output,
)

from nfd.dra import checkpoint

DRIVER = "nfd.node.kubernetes.io"
# Not the device-plugins module's name: the kubelet keeps a device plugin's resource names in
# its checkpoint, and would take this one for a plugin's whose endpoint is gone.
LOOP = "example.com/dra-loop"
CONFIG = f"""
dra:
  driverName: {DRIVER}
resources:
  - name: {LOOP}
    devnode: ["/dev/loop[0-7]"]
    servedBy: dra
"""
# What an operator adds for the extended-resource bridge, and a claim template.
BRIDGE_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "loop.example.com"},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].resource == "{LOOP}"'
                }
            }
        ],
        "extendedResourceName": LOOP,
    },
}
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-loop", "namespace": "default"},
    "spec": {
        "spec": {
            "devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": f"devnode.{DRIVER}"}}]}
        }
    },
}
AWAY = Path("/dev/loop7")
# A device is named after its resource's short name and its ID (the node below /dev).
AWAY_DEVICE = "dra-loop-loop7"


@pytest.fixture(scope="module")
def installed(real_node: RealNode) -> Iterator[Path]:
    overlay = real_node.overlay(
        "dra", base="dra", extra=config_map_patch("nfd-dra-conf", "devices.yaml", CONFIG)
    )
    real_node.figure("dra.apply_to_ready_s", real_node.install(overlay))
    try:
        yield overlay
    finally:
        real_node.clean_default(AWAY)
        real_node.kubectl("delete", "resourceclaimtemplate", "-n", "default", "--all", check=False)
        real_node.kubectl("delete", "deviceclass", "loop.example.com", "--ignore-not-found", check=False)
        real_node.uninstall(overlay)
        real_node.prune()
        left = slices(real_node)
        assert not left, f"ResourceSlices left after uninstall: {[s['metadata']['name'] for s in left]}"


def slices(node: RealNode) -> list[dict[str, Any]]:
    return [s for s in node.get("resourceslices")["items"] if s["spec"]["driver"] == DRIVER]


def published(node: RealNode) -> dict[str, bool]:
    """Every published device of the node: name -> usable (False: tainted)."""
    out: dict[str, bool] = {}
    for s in slices(node):
        if s["spec"].get("nodeName") != node.node_name:
            continue
        for d in s["spec"].get("devices", []):
            out[d["name"]] = not d.get("taints")
    return out


def loops(out: dict[str, Any]) -> list[str]:
    return [d for d in out["dev"] if d.startswith("loop") and d[4:].isdigit()]


def test_the_nodes_devices_are_published(real_node: RealNode, installed: Path) -> None:
    want = len(list(Path("/dev").glob("loop[0-7]")))
    got = real_node.wait_for(
        lambda: (lambda p: p if sum(p.values()) == want else None)(published(real_node)),
        timeout=30,
        what=f"{want} usable devices in the slices",
    )
    assert AWAY_DEVICE in got


def test_a_claim_template_pod_runs_with_its_device(real_node: RealNode, installed: Path) -> None:
    real_node.apply_obj(TEMPLATE)
    started = time.monotonic()
    real_node.apply_obj(pod_manifest("dra-claim", claim_template="one-loop", image=real_node.image))
    out = pod_output(real_node, "dra-claim")
    real_node.figure("dra.claim_pod_to_running_s", time.monotonic() - started)
    assert len(loops(out)) == 1, f"the pod's /dev: {loops(out)}"
    claims = real_node.get("resourceclaims", "-n", "default")["items"]
    allocated = [
        r["device"]
        for c in claims
        for r in c.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
    ]
    assert [f"dra-loop-{d}" for d in loops(out)] == allocated, (
        f"the pod got {loops(out)}, the claim was allocated {allocated}"
    )


def pod_device_health(node: RealNode, pod: str, device: str) -> str | None:
    """What the kubelet shows of a device's health in the pod's status (its DRA health
    stream), from status.containerStatuses[].allocatedResourcesStatus."""
    status = node.get("pod", "-n", "default", pod).get("status", {})
    for c in status.get("containerStatuses", []):
        for a in c.get("allocatedResourcesStatus") or []:
            for r in a.get("resources", []):
                if r["resourceID"].endswith(device):  # it ends with the device's name
                    return str(r.get("health", ""))
    return None


def test_the_kubelet_shows_a_claimed_devices_health_in_the_pod(real_node: RealNode, installed: Path) -> None:
    """The claim pod's device node moved away: its slice entry is tainted and the kubelet
    (told through the health stream) shows it Unhealthy in the pod's status; moved
    back: healthy, untainted."""
    (dev,) = loops(pod_output(real_node, "dra-claim"))
    name = f"dra-loop-{dev}"
    real_node.wait_for(
        lambda: pod_device_health(real_node, "dra-claim", name) == "Healthy",
        timeout=60,
        what="the kubelet's Healthy for the pod's device",
    )
    path = Path("/dev") / dev
    path.rename(path.with_suffix(".away"))
    started = time.monotonic()
    try:
        real_node.wait_for(
            lambda: published(real_node).get(name) is False,
            timeout=30,
            what=f"{name} tainted",
            every=0.05,
            on_timeout=lambda: driver_log(real_node),
        )
        real_node.figure("dra.health_to_taint_s", time.monotonic() - started)
        real_node.wait_for(
            lambda: pod_device_health(real_node, "dra-claim", name) == "Unhealthy",
            timeout=60,
            what="the kubelet's Unhealthy in the pod's status",
            every=0.1,
        )
        real_node.figure("dra.health_to_pod_status_s", time.monotonic() - started)
    finally:
        path.with_suffix(".away").rename(path)
    real_node.wait_for(lambda: published(real_node).get(name) is True, timeout=30, what=f"{name} untainted")
    real_node.wait_for(
        lambda: pod_device_health(real_node, "dra-claim", name) == "Healthy",
        timeout=60,
        what="the kubelet's Healthy again",
    )


def driver_log(node: RealNode) -> str:
    return f"published: {published(node)}\n" + node.logs("app.kubernetes.io/name=nfd-dra")[-3000:]


def test_an_extended_resource_pod_is_served_through_dra(real_node: RealNode, installed: Path) -> None:
    real_node.apply_obj(BRIDGE_CLASS)
    time.sleep(2)  # the scheduler's informer sees the class
    started = time.monotonic()
    real_node.apply_obj(pod_manifest("dra-extended", limits={LOOP: "1"}, image=real_node.image))
    out = pod_output(real_node, "dra-extended")
    real_node.figure("dra.extended_resource_pod_to_running_s", time.monotonic() - started)
    assert len(loops(out)) == 1, f"the pod's /dev: {loops(out)}"
    memory_fits(real_node, "dra.memory")


def test_the_dra_agents_memory_after_serving_claims(real_node: RealNode, installed: Path) -> None:
    """``nfd dra``'s VmRSS (its container's main process, read on the host) once it has
    published the pool and prepared claims: the figure bench/dra_memory_bench.py gives
    against the fake API server, here with the real API server and kubelet."""
    mem = container_memory(real_node)
    agent = [v for k, v in mem.items() if k.startswith("nfd-dra-") and k.endswith("/nfd-dra")]
    assert len(agent) == 1, f"one nfd-dra container expected among {sorted(mem)}"
    real_node.figure("dra.agent_vmrss_mib", agent[0]["rss_mib"])


@pytest.mark.parametrize("attempt", range(3))
def test_a_device_node_moved_away_and_back_is_published_within_a_second(
    real_node: RealNode, installed: Path, attempt: int
) -> None:
    real_node.wait_for(lambda: published(real_node).get(AWAY_DEVICE) is True, timeout=30, what="loop7 usable")
    AWAY.rename(AWAY.with_suffix(".away"))
    started = time.monotonic()
    try:
        real_node.wait_for(
            lambda: not published(real_node).get(AWAY_DEVICE),
            timeout=30,
            what="loop7 tainted or withdrawn",
            every=0.05,
            on_timeout=lambda: driver_log(real_node),
        )
        gone = time.monotonic() - started
        real_node.figure(f"dra.device_gone_to_slice_s.{attempt}", gone)
        # Away through no pass, maybe one (still served, tainted), or two (withdrawn, then
        # watched): rediscovery runs every 10 s.
        time.sleep((0, 4, 21)[attempt])
    finally:
        AWAY.with_suffix(".away").rename(AWAY)
    started = time.monotonic()
    real_node.wait_for(
        lambda: published(real_node).get(AWAY_DEVICE) is True, timeout=30, what="loop7 back", every=0.05
    )
    back = time.monotonic() - started
    real_node.figure(f"dra.device_back_to_slice_s.{attempt}", back)
    assert gone <= 1.0 and back <= 1.0, (
        f"slice updated {gone:.2f} s after the device went, {back:.2f} s after it came back"
    )


def test_a_rolling_update_of_the_driver_fails_no_claim(real_node: RealNode, installed: Path) -> None:
    """``kubectl rollout restart`` of the driver's DaemonSet (maxSurge 1: the new pod
    beside the old one) with a claim pod running and another created during the rollout:
    both run, kubelet reports no failed prepare, and the shared checkpoint holds both
    claims after."""
    real_node.apply_obj(TEMPLATE)
    real_node.apply_obj(pod_manifest("dra-roll-before", claim_template="one-loop", image=real_node.image))
    pod_output(real_node, "dra-roll-before")
    old = driver_pods(real_node)
    real_node.kubectl("rollout", "restart", "-n", NAMESPACE, "daemonset/nfd-dra")
    real_node.wait_for(
        lambda: driver_pods(real_node) - old, timeout=60, what="the new driver pod beside the old"
    )
    real_node.apply_obj(pod_manifest("dra-roll-during", claim_template="one-loop", image=real_node.image))
    started = time.monotonic()
    real_node.kubectl(
        "rollout", "status", "-n", NAMESPACE, "daemonset/nfd-dra", "--timeout=120s", timeout=130
    )
    real_node.figure("dra.rollout_restart_s", time.monotonic() - started)
    for pod in ("dra-roll-before", "dra-roll-during"):
        assert len(loops(pod_output(real_node, pod))) == 1
    assert not driver_pods(real_node) & old, "an old driver pod is left"
    failed = [
        f"{e['involvedObject'].get('name')}: {e.get('reason')}: {e.get('message')}"
        for e in real_node.get("events", "-n", "default")["items"]
        if e["involvedObject"].get("name") in ("dra-roll-before", "dra-roll-during")
        and ("Prepare" in str(e.get("reason")) or "NodePrepareResources" in str(e.get("message")))
    ]
    assert not failed, failed
    uids = {claim_uid(real_node, pod) for pod in ("dra-roll-before", "dra-roll-during")}
    held = set(checkpoint.listing(Path("/var/lib/kubelet/plugins") / DRIVER / "claims"))
    assert uids <= held, f"checkpoint holds {sorted(held)}, the pods' claims are {sorted(uids)}"


def driver_pods(node: RealNode) -> set[str]:
    """The UIDs of the driver's pods not being deleted."""
    pods = node.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=nfd-dra")["items"]
    return {p["metadata"]["uid"] for p in pods if not p["metadata"].get("deletionTimestamp")}


def claim_uid(node: RealNode, pod: str) -> str:
    [status] = node.get("pod", "-n", "default", pod)["status"]["resourceClaimStatuses"]
    return str(node.get("resourceclaim", "-n", "default", status["resourceClaimName"])["metadata"]["uid"])
