"""The nodefeature-api and topology-updater overlays on the real node (the prometheus
component: test_prometheus)."""

from __future__ import annotations

from realnode.node import NAMESPACE, RealNode, memory_fits, pod_manifest, pod_output

MISSING_KUBELET_CONFIG = """
patches:
  - target: {kind: DaemonSet, name: nfd-topology-updater}
    patch: |
      - op: replace
        path: /spec/template/spec/volumes/1/hostPath/path
        value: /var/lib/kubelet-elsewhere/config.yaml
"""


def test_nodefeature_api_overlay_applied_from_default_writes_the_nodefeature(real_node: RealNode) -> None:
    overlay = real_node.overlay("nodefeature-api", base="nodefeature-api")
    real_node.figure("nodefeature-api.apply_to_ready_s", real_node.install(overlay))
    try:
        node = real_node.node_name
        objs = real_node.wait_for(
            lambda: real_node.get("nodefeatures", "-n", NAMESPACE)["items"],
            timeout=60,
            what="the worker's NodeFeature object",
            on_timeout=lambda: real_node.logs("app.kubernetes.io/name=nfd-worker")[-3000:],
        )
        mine = [
            o for o in objs if o["metadata"].get("labels", {}).get("nfd.node.kubernetes.io/node-name") == node
        ]
        assert mine, f"no NodeFeature for {node}: {[o['metadata']['name'] for o in objs]}"
        assert mine[0]["spec"]["features"]["attributes"]["kernel.version"]["elements"]["major"]
        assert "403" not in real_node.logs("app.kubernetes.io/name=nfd-worker")
        assert len(real_node.nfd_labels()) > 10
    finally:
        real_node.uninstall(overlay)


def test_topology_updater_overlay_publishes_a_topology_the_node_agrees_with(real_node: RealNode) -> None:
    overlay = real_node.overlay("topology-updater", base="topology-updater")
    real_node.figure("topology-updater.apply_to_ready_s", real_node.install(overlay))
    try:
        node = real_node.node()
        name = node["metadata"]["name"]
        nrt = real_node.wait_for(
            lambda: (
                real_node.get("noderesourcetopologies", name)
                if real_node.exists("noderesourcetopologies", name)
                else None
            ),
            timeout=60,
            what="the NodeResourceTopology object",
        )
        cpu = {
            k: sum(_cpu(r[k]) for z in nrt["zones"] for r in z.get("resources", []) if r["name"] == "cpu")
            for k in ("capacity", "allocatable", "available")
        }
        assert cpu["capacity"] == _cpu(node["status"]["capacity"]["cpu"])
        assert cpu["allocatable"] == _cpu(node["status"]["allocatable"]["cpu"])
        # A pod's request comes off what is available.
        pod = pod_manifest("nrt-request", image=real_node.image)
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "250m"}}
        real_node.apply_obj(pod)
        pod_output(real_node, "nrt-request")
        before = cpu["available"]
        real_node.wait_for(
            lambda: _available_cpu(real_node, name) <= before - 0.25,
            timeout=60,
            what="the pod's request in available",
        )
        real_node.figure("topology-updater.cpu", cpu)
        memory_fits(real_node, "topology-updater.memory")
    finally:
        real_node.kubectl(
            "delete", "pod", "-n", "default", "nrt-request", "--ignore-not-found", "--wait=true"
        )
        real_node.uninstall(overlay)


def test_a_node_without_the_kubelet_config_file_is_still_labelled(real_node: RealNode) -> None:
    """The updater alone waits for the file; the worker labels the node as ever."""
    overlay = real_node.overlay("topology-no-config", base="topology-updater", extra=MISSING_KUBELET_CONFIG)
    real_node.kubectl("apply", "-k", str(overlay), timeout=180)
    try:
        real_node.wait_for(
            lambda: any(
                c["type"] == "Ready" and c["status"] == "True"
                for p in real_node.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=nfd-worker")[
                    "items"
                ]
                for c in p.get("status", {}).get("conditions", [])
            ),
            timeout=120,
            what="the worker Ready",
            on_timeout=real_node.pod_report,
        )
        real_node.wait_for(lambda: len(real_node.nfd_labels()) > 10, timeout=60, what="labels")
    finally:
        real_node.uninstall(overlay)


def _cpu(q: object) -> float:
    s = str(q)
    return int(s[:-1]) / 1000 if s.endswith("m") else float(s)


def _available_cpu(node: RealNode, name: str) -> float:
    nrt = node.get("noderesourcetopologies", name)
    return sum(
        _cpu(r["available"]) for z in nrt["zones"] for r in z.get("resources", []) if r["name"] == "cpu"
    )
