"""A real Prometheus (Debian's) scraping every nfd component on the real node: nfd
installed once with the device-plugins, dra, topology-updater and prometheus components
(as docs/deploy.md tells an operator to combine them), Prometheus configured from the
prometheus component's ServiceMonitor and PodMonitors the way the Prometheus operator
reads them: the endpoints behind a Service or the pods a selector picks, on the named
port, with the scheme, the CA and server name, and a token allowed to get /metrics.

Debian's Prometheus (2.42.0+ds in bookworm) is built without Kubernetes service
discovery: ``promtool check config`` refuses ``kubernetes_sd_configs`` ("field
kubernetes_sd_configs not found in type config.ScrapeConfig"), and the first test
below checks that this is still so. The test therefore does the discovery itself, from
the objects the component declares (EndpointSlices of the selected Services, pods of
the selected labels), and hands Prometheus the targets in files (``file_sd_configs``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from realnode.node import NAMESPACE, RealNode, config_map_patch, pod_manifest, pod_output
from realnode.rules import rule_manifest
from realnode.test_device_plugins import LOOP as PLUGIN_LOOP
from realnode.test_dra import DRIVER, TEMPLATE
from realnode.test_dra import LOOP as DRA_LOOP

# The Prometheus operator's two kinds (schemas left open): without the operator the
# component's monitors have nowhere to go.
MONITOR_CRDS = "\n---\n".join(
    f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {kind.lower()}s.monitoring.coreos.com}}
spec:
  group: monitoring.coreos.com
  names: {{kind: {kind}, listKind: {kind}List, plural: {kind.lower()}s, singular: {kind.lower()}}}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
"""
    for kind in ("ServiceMonitor", "PodMonitor")
)
COMPONENTS = ("device-plugins", "dra", "topology-updater", "prometheus")
JOBS = {"nfd-master", "nfd-worker", "nfd-device-plugin", "nfd-dra", "nfd-topology-updater"}
# One device config for both ConfigMaps (the worker reads one of them, and must know
# both resources): half the loop devices for the plugin, half for DRA. The resource
# names are the device-plugins and dra modules' own, which kubelet already knows.
DEVICES = f"""
dra:
  driverName: {DRIVER}
resources:
  - name: {PLUGIN_LOOP}
    devnode: ["/dev/loop[0-3]"]
  - name: {DRA_LOOP}
    devnode: ["/dev/loop[4-7]"]
    servedBy: dra
"""
DEVICE_PODS = ("prom-plugin-loop", "prom-dra-loop")
LISTEN = "127.0.0.1:9090"
READER_RBAC = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "prometheus", "namespace": "default"},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "realnode-prometheus"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["services", "endpoints", "pods"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["get", "list", "watch"],
                },
            ],
        },
        *(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"realnode-prometheus-{role}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "default"}],
            }
            for role in ("nfd-metrics-reader",)
        ),
    ],
}


def scrape_config(node: RealNode, monitor: dict[str, Any], files: Path) -> dict[str, Any]:
    """One scrape job from a ServiceMonitor or PodMonitor with one endpoint, and its
    targets' file."""
    name = monitor["metadata"]["name"]
    if monitor["kind"] == "ServiceMonitor":
        (ep,) = monitor["spec"]["endpoints"]
        targets = _service_targets(node, monitor["spec"]["selector"]["matchLabels"], ep["port"])
    else:
        (ep,) = monitor["spec"]["podMetricsEndpoints"]
        targets = _pod_targets(node, monitor["spec"]["selector"]["matchLabels"], ep["port"])
    found, text = files / f"{name}.json", json.dumps(targets)
    if not found.exists() or found.read_text() != text:
        # Whole or not at all: Prometheus may read the file at any moment.
        (files / f"{name}.json.new").write_text(text)
        (files / f"{name}.json.new").replace(found)
    job: dict[str, Any] = {
        "job_name": name,
        "scrape_interval": "2s",
        "metrics_path": ep.get("path", "/metrics"),
        "scheme": ep.get("scheme", "http"),
        "file_sd_configs": [{"files": [str(files / f"{name}.json")]}],
    }
    if "bearerTokenFile" in ep:
        job["authorization"] = {"credentials_file": str(files / "token")}
    tls = ep.get("tlsConfig")
    if tls:
        job["tls_config"] = {"ca_file": str(files / "nfd-ca.crt"), "server_name": tls["serverName"]}
    return job


def discover(node: RealNode, files: Path) -> list[dict[str, Any]]:
    """Every monitor's scrape job, its targets' file written afresh. Prometheus re-reads
    a changed targets file, so calling this again follows pods and endpoints the way the
    operator's watch does (an EndpointSlice may list a Ready pod a moment later)."""
    monitors = [
        *node.get("servicemonitors", "-n", NAMESPACE)["items"],
        *node.get("podmonitors", "-n", NAMESPACE)["items"],
    ]
    return [scrape_config(node, m, files) for m in monitors]


def _service_targets(node: RealNode, selector: dict[str, str], port_name: str) -> list[dict[str, Any]]:
    """The ready endpoints of the selected Services on the named port (the operator's
    ``role: endpoints``)."""
    targets = []
    for svc in node.get("services", "-n", NAMESPACE)["items"]:
        if not selector.items() <= svc["metadata"].get("labels", {}).items():
            continue
        selected = f"kubernetes.io/service-name={svc['metadata']['name']}"
        for es in node.get("endpointslices", "-n", NAMESPACE, "-l", selected)["items"]:
            ports = [p["port"] for p in es.get("ports") or [] if p.get("name") == port_name]
            for e in es.get("endpoints", []):
                if e.get("conditions", {}).get("ready") is False:
                    continue
                pod = e.get("targetRef", {}).get("name", "")
                targets += [
                    {"targets": [f"{a}:{port}"], "labels": {"pod": pod}}
                    for a in e["addresses"]
                    for port in ports
                ]
    return targets


def _pod_targets(node: RealNode, selector: dict[str, str], port_name: str) -> list[dict[str, Any]]:
    """The selected running pods' container port of that name (the operator's
    ``role: pod``)."""
    labels = ",".join(f"{k}={v}" for k, v in selector.items())
    targets = []
    for pod in node.get("pods", "-n", NAMESPACE, "-l", labels)["items"]:
        ip = pod.get("status", {}).get("podIP")
        if not ip or pod["metadata"].get("deletionTimestamp"):
            continue
        targets += [
            {"targets": [f"{ip}:{p['containerPort']}"], "labels": {"pod": pod["metadata"]["name"]}}
            for c in pod["spec"]["containers"]
            for p in c.get("ports", [])
            if p.get("name") == port_name
        ]
    return targets


@pytest.fixture(scope="module")
def prometheus(real_node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("prometheus") is None:
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", "prometheus"],
            check=True,
            capture_output=True,
            env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            timeout=300,
        )
    real_node.apply(MONITOR_CRDS)
    patches = config_map_patch("nfd-device-plugin-conf", "device-plugin.yaml", DEVICES)
    patches += config_map_patch("nfd-dra-conf", "devices.yaml", DEVICES).replace("\npatches:\n", "\n", 1)
    overlay = real_node.overlay("prometheus-all", base="default", components=COMPONENTS, extra=patches)
    files = tmp_path_factory.mktemp("prometheus")
    files.chmod(0o755)
    proc = None
    try:
        real_node.wait_for(
            lambda: (
                {"servicemonitors.monitoring.coreos.com", "podmonitors.monitoring.coreos.com"}
                <= set(
                    real_node.kubectl(
                        "api-resources", "--api-group=monitoring.coreos.com", "-o", "name"
                    ).split()
                )
            ),
            timeout=30,
            what="the ServiceMonitor and PodMonitor kinds served",
        )
        real_node.figure("prometheus.apply_to_ready_s", real_node.install(overlay))
        real_node.apply(json.dumps(READER_RBAC))
        (files / "token").write_text(
            real_node.kubectl("create", "token", "-n", "default", "prometheus", "--duration=1h").strip()
        )
        (files / "nfd-ca.crt").write_text(
            real_node.get("configmap", "-n", NAMESPACE, "nfd-master-ca")["data"]["ca.crt"]
        )
        config = {"global": {"scrape_interval": "2s"}, "scrape_configs": discover(real_node, files)}
        (files / "prometheus.yml").write_text(yaml.safe_dump(config))
        proc = subprocess.Popen(
            [
                "nsenter", "--net=/run/netns/realcluster", "--", "prometheus",
                f"--config.file={files / 'prometheus.yml'}", f"--storage.tsdb.path={files / 'data'}",
                f"--web.listen-address={LISTEN}", "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(files / "prometheus.log", "w"),  # noqa: SIM115 (closed with the process)
        )  # fmt: skip
        yield str(files)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        real_node.kubectl("delete", "pod", "-n", "default", *DEVICE_PODS, "--ignore-not-found", check=False)
        real_node.kubectl("delete", "resourceclaimtemplate", "-n", "default", "--all", check=False)
        real_node.delete(json.dumps(READER_RBAC))
        real_node.uninstall(overlay)
        real_node.prune()
        real_node.delete(MONITOR_CRDS)


def query(node: RealNode, promql: str) -> list[dict[str, Any]]:
    url = f"http://{LISTEN}/api/v1/query?query={urllib.parse.quote(promql)}"
    out = node.netns("curl", "-sf", url)
    if out.returncode != 0:
        return []
    result: list[dict[str, Any]] = json.loads(out.stdout)["data"]["result"]
    return result


def test_debians_prometheus_still_lacks_kubernetes_service_discovery(prometheus: str) -> None:
    """The reason for file_sd above: when this fails, Debian's Prometheus has
    ``kubernetes_sd_configs`` and the test should use it instead."""
    config = Path(prometheus, "kubernetes-sd.yml")
    config.write_text(
        yaml.safe_dump({"scrape_configs": [{"job_name": "k", "kubernetes_sd_configs": [{"role": "pod"}]}]})
    )
    out = subprocess.run(
        ["promtool", "check", "config", str(config)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode != 0 and "field kubernetes_sd_configs not found" in out.stderr + out.stdout, (
        f"promtool accepts kubernetes_sd_configs now (exit {out.returncode}): {out.stdout} {out.stderr}"
    )


# Both master replicas behind the Service, one pod of each node daemon.
EXPECTED_TARGETS = {j: 2 if j == "nfd-master" else 1 for j in JOBS}


def _every_target_up(node: RealNode, files: Path) -> list[dict[str, Any]] | None:
    discover(node, files)
    up = query(node, "up")
    per_job = {j: sum(1 for s in up if s["metric"]["job"] == j) for j in JOBS}
    return up if per_job == EXPECTED_TARGETS and all(s["value"][1] == "1" for s in up) else None


def test_prometheus_scrapes_every_component(real_node: RealNode, prometheus: str) -> None:
    up = real_node.wait_for(
        lambda: _every_target_up(real_node, Path(prometheus)),
        timeout=90,
        what=f"every target up, so many to a job: {EXPECTED_TARGETS}",
        on_timeout=lambda: (
            json.dumps(query(real_node, "up"))[:2000] + Path(prometheus, "prometheus.log").read_text()[-2000:]
        ),
    )
    assert all(s["metric"].get("pod") for s in up), up
    for job, series in (
        ("nfd-master", "nfd_master_build_info"),
        ("nfd-worker", "nfd_worker_build_info"),
        ("nfd-device-plugin", "nfd_deviceplugin_build_info"),
        ("nfd-topology-updater", "nfd_topology_updater_build_info"),
    ):
        found = query(real_node, f'{series}{{job="{job}"}}')
        assert found and all(s["metric"].get("version") for s in found), f"{job}: {series}: {found}"
    # Discovery has run, and the updater has published without a failed scan.
    assert query(real_node, 'nfd_worker_feature_discovery_duration_seconds_count{job="nfd-worker"} > 0')
    assert query(real_node, 'sum(nfd_topology_updater_scan_errors_total{job="nfd-topology-updater"}) == 0')


def test_device_series_count_the_nodes_devices_and_kubelets_requests(
    real_node: RealNode, prometheus: str
) -> None:
    """Four loop devices each to the plugin and to DRA; one pod through each: kubelet's
    Allocate and NodePrepareResources show in the components' request series."""
    for job, resource in (("nfd-device-plugin", PLUGIN_LOOP), ("nfd-dra", DRA_LOOP)):
        real_node.wait_for(
            lambda j=job, r=resource: query(real_node, f'nfd_devices{{job="{j}",resource="{r}"}} == 4'),
            timeout=60,
            what=f"{job}: nfd_devices of {resource} == 4",
            on_timeout=lambda: json.dumps(query(real_node, "nfd_devices"))[:2000],
        )
    plugin_pod, dra_pod = DEVICE_PODS
    real_node.apply_obj(pod_manifest(plugin_pod, limits={PLUGIN_LOOP: "1"}, image=real_node.image))
    real_node.apply_obj(TEMPLATE)
    real_node.apply_obj(
        pod_manifest(dra_pod, claim_template=TEMPLATE["metadata"]["name"], image=real_node.image)
    )
    pod_output(real_node, plugin_pod)
    pod_output(real_node, dra_pod)
    for what in (
        f'sum(nfd_deviceplugin_devices_allocated_total{{job="nfd-device-plugin",resource="{PLUGIN_LOOP}"}}) >= 1',
        f'nfd_deviceplugin_requests_total{{job="nfd-device-plugin",resource="{PLUGIN_LOOP}",operation="allocate"}} >= 1',
        'nfd_dra_requests_total{job="nfd-dra",operation="prepare"} >= 1',
        'nfd_dra_prepared_devices{job="nfd-dra"} == 1',
        'sum(nfd_dra_errors_total{job="nfd-dra"}) == 0',
    ):
        real_node.wait_for(
            lambda w=what: query(real_node, w),
            timeout=30,
            what=what,
            on_timeout=lambda: json.dumps(query(real_node, '{__name__=~"nfd_(deviceplugin|dra)_.*"}'))[:3000],
        )


def test_upstreams_series_after_a_rule_is_applied(real_node: RealNode, prometheus: str) -> None:
    rule = rule_manifest("realnode-prometheus", label="realnode-prometheus")
    started = time.monotonic()
    real_node.apply(rule)
    try:
        real_node.wait_for(
            lambda: "feature.node.kubernetes.io/realnode-prometheus" in real_node.nfd_labels(),
            timeout=30,
            what="the rule's label",
        )
        updates = real_node.wait_for(
            lambda: query(real_node, "sum(nfd_master_node_updates_total) > 0"),
            timeout=60,
            what="nfd_master_node_updates_total > 0",
        )
        real_node.figure("prometheus.rule_to_series_s", time.monotonic() - started)
        assert float(updates[0]["value"][1]) > 0
        for series in (
            "nfd_master_build_info",
            "nfd_master_node_update_requests_total",
            "nfd_master_nodefeaturerule_processing_duration_seconds_count",
            "nfd_worker_build_info",
            "nfd_worker_feature_discovery_duration_seconds_count",
        ):
            assert query(real_node, series), f"Prometheus has no {series}"
    finally:
        real_node.delete(rule)
