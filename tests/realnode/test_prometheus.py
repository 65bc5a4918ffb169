"""A real Prometheus (Debian's) scraping nfd on the real node, configured from the
prometheus overlay's ServiceMonitors the way the Prometheus operator reads them: the
endpoints behind each selected Service on the named port, the scheme, the CA and server
name, and a token allowed to get /metrics.

Debian builds Prometheus without Kubernetes service discovery, so the test does the
discovery itself: it reads the EndpointSlices of each Service a ServiceMonitor selects,
as the operator's ``role: endpoints`` does, and hands Prometheus the targets in a file
(``file_sd_configs``)."""

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
from realnode.node import NAMESPACE, RealNode
from realnode.rules import rule_manifest
from realnode.test_overlays import SERVICE_MONITOR_CRD

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
    """One scrape job from a ServiceMonitor with one endpoint, and its targets' file."""
    (ep,) = monitor["spec"]["endpoints"]
    name = monitor["metadata"]["name"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    targets = []
    for svc in node.get("services", "-n", NAMESPACE)["items"]:
        if not selector.items() <= svc["metadata"].get("labels", {}).items():
            continue
        selected = f"kubernetes.io/service-name={svc['metadata']['name']}"
        for es in node.get("endpointslices", "-n", NAMESPACE, "-l", selected)["items"]:
            ports = [p["port"] for p in es.get("ports") or [] if p.get("name") == ep["port"]]
            for e in es.get("endpoints", []):
                if e.get("conditions", {}).get("ready") is False:
                    continue
                pod = e.get("targetRef", {}).get("name", "")
                targets += [
                    {"targets": [f"{a}:{port}"], "labels": {"pod": pod}}
                    for a in e["addresses"]
                    for port in ports
                ]
    (files / f"{name}.json").write_text(json.dumps(targets))
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
    real_node.apply(SERVICE_MONITOR_CRD)
    real_node.wait_for(
        lambda: "servicemonitors" in real_node.kubectl("api-resources", "--api-group=monitoring.coreos.com"),
        timeout=30,
        what="the ServiceMonitor kind served",
    )
    overlay = real_node.overlay("prometheus-real", base="prometheus")
    real_node.install(overlay)
    real_node.apply(json.dumps(READER_RBAC))
    files = tmp_path_factory.mktemp("prometheus")
    files.chmod(0o755)
    (files / "token").write_text(
        real_node.kubectl("create", "token", "-n", "default", "prometheus", "--duration=1h").strip()
    )
    (files / "nfd-ca.crt").write_text(
        real_node.get("configmap", "-n", NAMESPACE, "nfd-master-ca")["data"]["ca.crt"]
    )
    monitors = real_node.get("servicemonitors", "-n", NAMESPACE)["items"]
    config = {
        "global": {"scrape_interval": "2s"},
        "scrape_configs": [scrape_config(real_node, m, files) for m in monitors],
    }
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
    try:
        yield str(files)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        real_node.delete(json.dumps(READER_RBAC))
        real_node.uninstall(overlay)
        real_node.delete(SERVICE_MONITOR_CRD)


def query(node: RealNode, promql: str) -> list[dict[str, Any]]:
    url = f"http://{LISTEN}/api/v1/query?query={urllib.parse.quote(promql)}"
    out = node.netns("curl", "-sf", url)
    if out.returncode != 0:
        return []
    result: list[dict[str, Any]] = json.loads(out.stdout)["data"]["result"]
    return result


def test_prometheus_scrapes_every_target_the_overlay_declares(real_node: RealNode, prometheus: str) -> None:
    up = real_node.wait_for(
        lambda: (lambda r: r if len(r) >= 3 and all(s["value"][1] == "1" for s in r) else None)(
            query(real_node, "up")
        ),
        timeout=90,
        what="every target up (two masters, one worker)",
        on_timeout=lambda: (
            json.dumps(query(real_node, "up"))[:2000] + Path(prometheus, "prometheus.log").read_text()[-2000:]
        ),
    )
    assert {s["metric"]["job"] for s in up} == {"nfd-master", "nfd-worker"}


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
