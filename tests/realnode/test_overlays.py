"""The nodefeature-api, topology-updater and prometheus overlays on the real node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from realnode.node import NAMESPACE, RealNode, memory_fits, pod_manifest, pod_output

# The ServiceMonitor kind, as the Prometheus operator's CRD defines it (schema left open):
# without the operator the prometheus overlay's ServiceMonitors have nowhere to go.
SERVICE_MONITOR_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""
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


def test_prometheus_overlay_serves_every_scrape_target(real_node: RealNode, tmp_path: Path) -> None:
    real_node.apply(SERVICE_MONITOR_CRD)
    real_node.wait_for(
        lambda: "servicemonitors" in real_node.kubectl("api-resources", "--api-group=monitoring.coreos.com"),
        timeout=30,
        what="the ServiceMonitor kind served",
    )
    overlay = real_node.overlay("prometheus", base="prometheus")
    try:
        real_node.figure("prometheus.apply_to_ready_s", real_node.install(overlay))
        monitors = real_node.get("servicemonitors", "-n", NAMESPACE)["items"]
        assert {m["metadata"]["name"] for m in monitors} >= {"nfd-master", "nfd-worker"}
        # Every endpoint a ServiceMonitor names answers with nfd's series.
        for m in monitors:
            svc = [
                s
                for s in real_node.get("services", "-n", NAMESPACE)["items"]
                if m["spec"]["selector"]["matchLabels"].items() <= s["metadata"].get("labels", {}).items()
            ]
            assert svc, f"ServiceMonitor {m['metadata']['name']} selects no Service"
            for ep in m["spec"]["endpoints"]:
                port = next(p["port"] for p in svc[0]["spec"]["ports"] if p["name"] == ep["port"])
                for ip in _addresses(real_node, svc[0]):
                    body = _scrape(real_node, ip, port, ep, tmp_path)
                    assert "nfd_" in body, f"{m['metadata']['name']}: no nfd series at {ip} {ep}"
    finally:
        real_node.uninstall(overlay)
        real_node.delete(SERVICE_MONITOR_CRD)


def _addresses(node: RealNode, svc: dict[str, Any]) -> list[str]:
    """The Service's ClusterIP, or each ready endpoint of a headless one (what Prometheus
    scrapes: every pod)."""
    if svc["spec"].get("clusterIP") not in (None, "None"):
        return [svc["spec"]["clusterIP"]]
    name = svc["metadata"]["name"]
    slices = node.get("endpointslices", "-n", NAMESPACE, "-l", f"kubernetes.io/service-name={name}")["items"]
    ips = [a for s in slices for e in s.get("endpoints", []) for a in e["addresses"]]
    assert ips, f"headless Service {name} has no endpoints"
    return ips


def _scrape(node: RealNode, ip: str, port: int, ep: dict[str, object], tmp_path: Path) -> str:
    path = str(ep.get("path", "/metrics"))
    if ep.get("scheme") != "https":
        out = node.netns("curl", "-sf", f"http://{ip}:{port}{path}")
        assert out.returncode == 0, f"http://{ip}:{port}{path}: {out.stderr}"
        return out.stdout
    # HTTPS: a reader's token (bound to the overlay's nfd-metrics-reader) and the CA.
    node.kubectl("create", "serviceaccount", "-n", "default", "metrics-reader", check=False)
    node.kubectl(
        "create", "clusterrolebinding", "realnode-metrics-reader", "--clusterrole=nfd-metrics-reader",
        "--serviceaccount=default:metrics-reader", check=False,
    )  # fmt: skip
    token = node.kubectl("create", "token", "-n", "default", "metrics-reader").strip()
    ca = tmp_path / "ca.crt"
    ca.write_text(node.get("configmap", "-n", NAMESPACE, "nfd-master-ca")["data"]["ca.crt"])
    tls = ep.get("tlsConfig") or {}
    assert isinstance(tls, dict)
    server = str(tls.get("serverName"))
    try:
        out = node.netns(
            "curl", "-sf", "--cacert", str(ca), "-H", f"Authorization: Bearer {token}",
            "--connect-to", f"{server}:{port}:{ip}:{port}", f"https://{server}:{port}{path}",
        )  # fmt: skip
        assert out.returncode == 0, f"https://{server}:{port}{path}: exit {out.returncode} {out.stderr}"
        return out.stdout
    finally:
        node.kubectl("delete", "clusterrolebinding", "realnode-metrics-reader", check=False)
        node.kubectl("delete", "serviceaccount", "-n", "default", "metrics-reader", check=False)


def _cpu(q: object) -> float:
    s = str(q)
    return int(s[:-1]) / 1000 if s.endswith("m") else float(s)


def _available_cpu(node: RealNode, name: str) -> float:
    nrt = node.get("noderesourcetopologies", name)
    return sum(
        _cpu(r["available"]) for z in nrt["zones"] for r in z.get("resources", []) if r["name"] == "cpu"
    )
