"""The manifests, the CLI and the services cannot drift apart without a test failing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from deploy.conftest import COMBINED, DEPLOY, KUSTOMIZATIONS, OVERLAYS, PRUNE, REPO
from deploy.manifests import containers, find, flag, pod_spec, rbac_rules, workloads

from nfd.cli import CliError, build_parser

NFD_IMAGE = "nfd"


def nfd_containers(docs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        (w, c) for w in workloads(docs) for c in containers(w) if c["image"].split(":")[0].endswith(NFD_IMAGE)
    ]


def test_every_overlay_builds() -> None:
    assert set(OVERLAYS) >= {"default", "device-plugins", "prometheus"}


@pytest.mark.parametrize("overlay", [*OVERLAYS, COMBINED])
def test_overlay_validates_strictly_offline(built: dict[str, list[dict[str, Any]]], overlay: str) -> None:
    version = kubernetes_validate.latest_version()
    crd_kinds = {"ServiceMonitor", "PodMonitor"}
    checked = 0
    for doc in built[overlay]:
        if doc["kind"] in crd_kinds:
            continue
        kubernetes_validate.validate(doc, version, strict=True)
        checked += 1
    assert checked >= 10


def test_examples_validate_strictly() -> None:
    version = kubernetes_validate.latest_version()
    docs = [
        d for p in sorted((DEPLOY / "examples").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())
    ]
    assert len(docs) >= 2
    for d in docs:
        kubernetes_validate.validate(d, version, strict=True)


SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {"type": "object", "required": ["matchLabels"]},
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["port"],
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                            "scheme": {"enum": ["http", "https"]},
                            "bearerTokenFile": {"type": "string"},
                            "tlsConfig": {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "serverName": {"type": "string"},
                                    "ca": {
                                        "type": "object",
                                        "additionalProperties": False,
                                        "properties": {
                                            "configMap": {
                                                "type": "object",
                                                "required": ["name", "key"],
                                                "additionalProperties": False,
                                                "properties": {
                                                    "name": {"type": "string"},
                                                    "key": {"type": "string"},
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


ENDPOINT_SCHEMA = SERVICE_MONITOR_SCHEMA["properties"]["spec"]["properties"]["endpoints"]["items"]  # type: ignore[index]
POD_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "spec": {
            "type": "object",
            "required": ["selector", "podMetricsEndpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {"type": "object", "required": ["matchLabels"]},
                "podMetricsEndpoints": {"type": "array", "minItems": 1, "items": ENDPOINT_SCHEMA},
            },
        },
    },
}


def _selected(docs: list[dict[str, Any]], sel: dict[str, str]) -> list[dict[str, Any]]:
    return [w for w in workloads(docs) if sel.items() <= w["spec"]["template"]["metadata"]["labels"].items()]


def test_monitors_point_at_every_components_served_metrics_port(
    built: dict[str, list[dict[str, Any]]],
) -> None:
    """Every component installed at once: each monitor reaches one named port that the
    container serves /metrics on (its --port), and every such port has its monitor."""
    docs = built[COMBINED]
    scraped: set[tuple[str, str]] = set()  # (workload, port name)
    for m in [d for d in docs if d["kind"] == "ServiceMonitor"]:
        jsonschema.validate(m, SERVICE_MONITOR_SCHEMA)
        sel = m["spec"]["selector"]["matchLabels"]
        services = [
            s
            for s in docs
            if s["kind"] == "Service" and sel.items() <= s["metadata"].get("labels", {}).items()
        ]
        assert services, f"ServiceMonitor {m['metadata']['name']} selects no Service"
        for ep in m["spec"]["endpoints"]:
            assert ep["path"] == "/metrics"
            for s in services:
                (port,) = [p for p in s["spec"]["ports"] if p["name"] == ep["port"]]
                for w in _selected(docs, s["spec"]["selector"]):
                    scraped.add((w["metadata"]["name"], port["targetPort"]))
    for m in [d for d in docs if d["kind"] == "PodMonitor"]:
        jsonschema.validate(m, POD_MONITOR_SCHEMA)
        pods = _selected(docs, m["spec"]["selector"]["matchLabels"])
        assert pods, f"PodMonitor {m['metadata']['name']} selects no pods"
        for ep in m["spec"]["podMetricsEndpoints"]:
            assert ep["path"] == "/metrics"
            for w in pods:
                named = [c for c in containers(w) for p in c.get("ports", []) if p["name"] == ep["port"]]
                assert len(named) == 1, (
                    f"{m['metadata']['name']}: port {ep['port']} in {w['metadata']['name']}"
                )
                scraped.add((w["metadata"]["name"], ep["port"]))
    served = {
        (w["metadata"]["name"], p["name"])
        for w in workloads(docs)
        for c in containers(w)
        for p in c.get("ports", [])
        if int(flag(c.get("args", []), "--port") or 0) == p["containerPort"]
    }
    assert served == scraped
    names = {d["metadata"]["name"] for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor")}
    assert names == {"nfd-master", "nfd-worker", "nfd-device-plugin", "nfd-dra", "nfd-topology-updater"}


def test_scrape_annotations_name_the_port_metrics_are_served_on(
    built: dict[str, list[dict[str, Any]]],
) -> None:
    """For a Prometheus that scrapes pods by annotation: one port per pod, the first
    container's (in the worker's pod, the worker's; the device plugin's is the PodMonitor's)."""
    docs = built[COMBINED]
    for w in workloads(docs):
        name = w["metadata"]["name"]
        ann = w["spec"]["template"]["metadata"].get("annotations", {})
        assert ann.get("prometheus.io/scrape") == "true", name
        assert ann["prometheus.io/path"] == "/metrics"
        first = containers(w)[0]
        port = int(ann["prometheus.io/port"])
        assert port == int(flag(first["args"], "--port") or 0), name
        assert port in {p["containerPort"] for p in first["ports"]}, name
        # Only the master serves TLS (the API and /metrics on one port).
        assert ann.get("prometheus.io/scheme", "http") == ("https" if name == "nfd-master" else "http")


@pytest.mark.parametrize("overlay", KUSTOMIZATIONS)
def test_port_names_and_numbers_are_unique_in_each_pod(
    built: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    """The containers of a pod share its network and its port names (a Service's or a
    monitor's port by name would pick one of two)."""
    for w in workloads(built[overlay]):
        ports = [p for c in containers(w) for p in c.get("ports", [])]
        assert len({p["name"] for p in ports}) == len(ports), w["metadata"]["name"]
        assert len({p["containerPort"] for p in ports}) == len(ports), w["metadata"]["name"]


def test_combined_worker_reads_the_dra_components_device_config(
    built: dict[str, list[dict[str, Any]]],
) -> None:
    """With both device components, the worker gets both flags and argparse keeps the
    last: docs/deploy.md tells the operator to give both ConfigMaps one device config."""
    worker = containers(find(built[COMBINED], "DaemonSet", "nfd-worker"))[0]
    given = [a.split("=", 1)[1] for a in worker["args"] if a.startswith("--device-plugin-config=")]
    assert len(given) == 2
    dra = containers(find(built[COMBINED], "DaemonSet", "nfd-dra"))[0]
    assert build_parser().parse_args(worker["args"]).device_plugin_config == given[-1]
    assert given[-1] == flag(dra["args"], "--config")


@pytest.mark.parametrize("overlay", KUSTOMIZATIONS)
def test_container_args_are_flags_the_cli_accepts(
    built: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    found = nfd_containers(built[overlay])
    assert found
    for _w, c in found:
        args = list(c.get("command", [])[1:]) + list(c.get("args", []))
        try:
            build_parser().parse_args(args)
        except CliError as e:
            pytest.fail(f"{overlay}: container {c['name']} args {args} rejected: {e}")


@pytest.mark.parametrize("overlay", KUSTOMIZATIONS)
def test_every_container_is_locked_down(built: dict[str, list[dict[str, Any]]], overlay: str) -> None:
    for w in workloads(built[overlay]):
        spec = pod_spec(w)
        pod_sc = spec.get("securityContext", {})
        assert pod_sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", w["metadata"]["name"]
        for c in containers(w):
            sc = c["securityContext"]
            where = f"{overlay}: {w['metadata']['name']}/{c['name']}"
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["capabilities"]["drop"] == ["ALL"], where
            assert "add" not in sc["capabilities"], where
            assert "privileged" not in sc or sc["privileged"] is False, where
            # The exceptions need uid 0 for kubelet's sockets, explained in their overlays.
            if c["name"] not in ("nfd-device-plugin", "nfd-dra", "nfd-topology-updater"):
                non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
                assert non_root is True, where
                assert sc.get("runAsUser", pod_sc.get("runAsUser", 0)) != 0, where
            assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"], where
            assert c["resources"]["limits"]["memory"], where


def test_worker_host_mounts_are_read_only_and_where_the_code_looks(
    built: dict[str, list[dict[str, Any]]],
) -> None:
    from nfd.hostroot import HostRoot

    ds = find(built["default"], "DaemonSet", "nfd-worker")
    spec = pod_spec(ds)
    host_volumes = {v["name"] for v in spec["volumes"] if "hostPath" in v}
    (worker,) = [c for c in spec["containers"] if c["name"] == "nfd-worker"]
    env = {e["name"]: e.get("value") for e in worker["env"]}
    host = HostRoot.from_env({k: v for k, v in env.items() if v is not None})
    mounts = {m["mountPath"]: m for m in worker["volumeMounts"]}
    for m in worker["volumeMounts"]:
        if m["name"] in host_volumes:
            assert m.get("readOnly") is True, m
    # Each host part the sources read is mounted where HostRoot says it is.
    for part in ("sys", "boot", "usr_lib", "lib"):
        assert str(getattr(host, part)) in mounts, part
    assert str(host.etc / "os-release") in mounts
    assert str(host.etc / "kubernetes/node-feature-discovery/features.d") in mounts


def test_worker_token_is_projected_for_the_masters_audience(built: dict[str, list[dict[str, Any]]]) -> None:
    docs = built["default"]
    ds = find(docs, "DaemonSet", "nfd-worker")
    spec = pod_spec(ds)
    (worker,) = [c for c in spec["containers"] if c["name"] == "nfd-worker"]
    token_file = Path(flag(worker["args"], "--token-file") or "")
    mount = next(m for m in worker["volumeMounts"] if Path(m["mountPath"]) == token_file.parent)
    vol = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    sat = vol["projected"]["sources"][0]["serviceAccountToken"]
    assert sat["path"] == token_file.name
    master = find(docs, "Deployment", "nfd-master")
    (mc,) = containers(master)
    assert sat["audience"] == flag(mc["args"], "--auth-audience")
    ns, name = (flag(mc["args"], "--worker-service-account") or ":").split(":")
    assert (ns, name) == (ds["metadata"]["namespace"], spec["serviceAccountName"])
    # The worker itself gets no API token at all.
    assert spec["automountServiceAccountToken"] is False


def test_worker_reaches_the_master_service(built: dict[str, list[dict[str, Any]]]) -> None:
    docs = built["default"]
    svc = find(docs, "Service", "nfd-master")
    (worker,) = [c for c in pod_spec(find(docs, "DaemonSet", "nfd-worker"))["containers"]]
    url = flag(worker["args"], "--master") or ""
    m = re.match(r"^https://([^.]+)\.([^.]+)\.svc:(\d+)$", url)
    assert m, url
    assert (m.group(1), m.group(2)) == (svc["metadata"]["name"], svc["metadata"]["namespace"])
    assert int(m.group(3)) in {p["port"] for p in svc["spec"]["ports"]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_worker_verifies_the_master_against_the_ca_it_publishes(
    built: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    from nfd.master.core.settings import TLSSettings
    from nfd.master.security.tls import CA_KEY, dns_names

    docs = built[overlay]
    spec = pod_spec(find(docs, "DaemonSet", "nfd-worker"))
    worker = next(c for c in spec["containers"] if c["name"] == "nfd-worker")
    master = find(docs, "Deployment", "nfd-master")
    (mc,) = containers(master)
    assert "--no-tls" not in mc["args"] and not flag(mc["args"], "--tls-cert-file")
    # The certificate the master makes names the host the worker dials.
    tls = TLSSettings(namespace=master["metadata"]["namespace"])
    scheme, _, rest = (flag(worker["args"], "--master") or "").partition("://")
    assert scheme == "https" and rest.rsplit(":", 1)[0] in dns_names(tls)
    assert "--plain-http" not in worker["args"]
    # The CA file is projected from the ConfigMap the master publishes.
    ca_file = Path(flag(worker["args"], "--ca-file") or "")
    mount = next(m for m in worker["volumeMounts"] if Path(m["mountPath"]) == ca_file.parent)
    vol = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    cm = next(s["configMap"] for s in vol["projected"]["sources"] if "configMap" in s)
    assert cm["name"] == tls.ca_configmap and not cm.get("optional")
    assert cm["items"] == [{"key": CA_KEY, "path": ca_file.name}]
    # Nothing in the manifests holds the Secret or the ConfigMap: the master makes them,
    # and a re-apply never overwrites them.
    assert not [d for d in docs if d["metadata"]["name"] in (tls.secret_name, tls.ca_configmap)]


def test_master_probes_and_ports_match_its_flags(built: dict[str, list[dict[str, Any]]]) -> None:
    master = find(built["default"], "Deployment", "nfd-master")
    (c,) = containers(master)
    port = int(flag(c["args"], "--port") or 0)
    named = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe in ("readinessProbe", "livenessProbe"):
        get = c[probe]["httpGet"]
        assert named[get["port"]] == port
        assert get["scheme"] == "HTTPS"  # the master serves TLS by default
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert "--enable-leader-election" in c["args"]
    assert master["spec"]["replicas"] == 2
    pdb = find(built["default"], "PodDisruptionBudget", "nfd-master")
    assert pdb["spec"]["selector"]["matchLabels"] == master["spec"]["selector"]["matchLabels"]
    # Every replica is Ready (followers forward): a drain may evict one of two, and a
    # rollout surges one pod before it removes one.
    assert pdb["spec"]["minAvailable"] == 1 < master["spec"]["replicas"]
    assert master["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in c["env"]}
    assert env["POD_IP"] == "status.podIP"  # the address the leader advertises


# Set for the C library's allocator (docs/perf.md), which reads them itself.
READ_BY_GLIBC = {"MALLOC_ARENA_MAX", "GLIBC_TUNABLES"}


def test_env_vars_set_in_manifests_are_read_by_the_code(built: dict[str, list[dict[str, Any]]]) -> None:
    code = "\n".join(p.read_text() for p in (REPO / "nfd").rglob("*.py"))
    names = {e["name"] for o in OVERLAYS for _w, c in nfd_containers(built[o]) for e in c.get("env", [])}
    assert names
    for name in names - READ_BY_GLIBC:
        # HostRoot builds NFD_HOST_<PART> names from its fields.
        if name.startswith("NFD_HOST_") and name not in code:
            from nfd.hostroot import HostRoot

            assert name[len("NFD_HOST_") :].lower() in HostRoot.__dataclass_fields__, name
            continue
        assert name in code, f"{name} is set in the manifests but nothing in nfd/ reads it"


def test_master_rbac_is_exactly_what_it_needs(built: dict[str, list[dict[str, Any]]]) -> None:
    docs = built["default"]
    assert rbac_rules(docs, "ClusterRole", "nfd-master") == {
        ("", "nodes", ("get", "list", "patch", "watch")),
        ("", "nodes/status", ("patch",)),
        ("authentication.k8s.io", "tokenreviews", ("create",)),
        ("authorization.k8s.io", "subjectaccessreviews", ("create",)),
        ("nfd.k8s-sigs.io", "nodefeaturerules", ("get", "list", "watch")),
        ("nfd.k8s-sigs.io", "nodefeatures", ("delete", "get", "list", "watch")),
        ("nfd.k8s-sigs.io", "nodefeaturegroups", ("get", "list", "watch")),
        ("nfd.k8s-sigs.io", "nodefeaturegroups/status", ("patch",)),
    }
    role = find(docs, "Role", "nfd-master")
    named = {
        "leases": "nfd-master.nfd.kubernetes.io",
        "secrets": "nfd-master-tls",
        "configmaps": "nfd-master-ca",
    }
    for rule in role["rules"]:
        assert "*" not in rule["verbs"]
        if rule["resources"] == ["pods"]:  # the workers' pods, watched
            assert sorted(rule["verbs"]) == ["get", "list", "watch"]
            continue
        # Create cannot be limited to a name; everything else names the one object.
        if set(rule["verbs"]) - {"create"}:
            assert [named[r] for r in rule["resources"]] == rule["resourceNames"], rule
            assert "delete" not in rule["verbs"] and "list" not in rule["verbs"]
    for d in docs:
        if d["kind"] in ("ClusterRole", "Role"):
            for rule in d["rules"]:
                assert "*" not in rule["verbs"] and "*" not in rule["resources"]
    # The worker has no role at all.
    bound = {s["name"] for d in docs if d["kind"].endswith("Binding") for s in d["subjects"]}
    assert bound == {"nfd-master"}


def crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load((DEPLOY / "base/crd/nodefeaturerule-crd.yaml").read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def rule_files() -> list[Path]:
    return sorted((REPO / "tests/fixtures/rules").glob("*/*.yaml"))


# Two documentation snippets use the shorthand of the worker config's custom rules
# (`vendor: ["0fff"]`, `- pci.device: {...}`), which the API server's schema for
# NodeFeatureRule objects does not accept upstream either.
WORKER_CONFIG_SHORTHAND = {"docs-wrapped-cg-b29.yaml", "docs-wrapped-cg-b37.yaml"}


def prune_nulls(value: Any) -> Any:
    """The API server drops null fields of non-nullable schema properties before it
    validates a custom object; do the same."""
    if isinstance(value, dict):
        return {k: prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [prune_nulls(v) for v in value]
    return value


def test_published_rules_fit_the_crd_schema() -> None:
    schema = crd_schema()
    checked = 0
    for p in rule_files():
        for d in yaml.safe_load_all(p.read_text()):
            if not (isinstance(d, dict) and d.get("kind") == "NodeFeatureRule"):
                continue
            if p.name in WORKER_CONFIG_SHORTHAND:
                with pytest.raises(jsonschema.ValidationError):
                    jsonschema.validate(prune_nulls(d), schema)
                continue
            jsonschema.validate(prune_nulls(d), schema)
            checked += 1
    assert checked >= 20


def test_crd_schema_rejects_an_unknown_operator() -> None:
    bad = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": "x"},
        "spec": {
            "rules": [
                {
                    "name": "r",
                    "matchFeatures": [{"feature": "cpu.cpuid", "matchExpressions": {"AVX": {"op": "Maybe"}}}],
                }
            ]
        },
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, crd_schema())


def test_example_pod_selects_a_label_nfd_produces(fixtures: Path) -> None:
    pod = yaml.safe_load((DEPLOY / "examples/pod-nodeselector.yaml").read_text())
    baseline = (fixtures / "upstream-baseline/labels.txt").read_text().splitlines()
    for key, value in pod["spec"]["nodeSelector"].items():
        assert f"{key}={value}" in baseline


def test_device_plugin_config_map_is_a_valid_plugin_config(built: dict[str, list[dict[str, Any]]]) -> None:
    from nfd.devices.config import parse_config

    docs = built["device-plugins"]
    cm = find(docs, "ConfigMap", "nfd-device-plugin-conf")
    ds = find(docs, "DaemonSet", "nfd-worker")
    spec = pod_spec(ds)
    plugin = next(c for c in spec["containers"] if c["name"] == "nfd-device-plugin")
    config_path = Path(flag(plugin["args"], "--config") or "")
    mount = next(m for m in plugin["volumeMounts"] if Path(m["mountPath"]) == config_path.parent)
    vol = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    assert vol["configMap"]["name"] == cm["metadata"]["name"]
    parsed = parse_config(yaml.safe_load(cm["data"][config_path.name]))
    assert parsed is not None
    # kubelet's socket directory: the directory is mounted, never the socket file.
    plugin_dir = flag(plugin["args"], "--plugin-dir")
    dp_mount = next(m for m in plugin["volumeMounts"] if m["mountPath"] == plugin_dir)
    dp_vol = next(v for v in spec["volumes"] if v["name"] == dp_mount["name"])
    assert dp_vol["hostPath"]["type"] == "Directory"


CLUSTER_SCOPED = {
    "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "DeviceClass",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
}  # fmt: skip


@pytest.mark.parametrize("overlay", KUSTOMIZATIONS)
def test_every_namespaced_object_names_its_namespace(
    built: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    """An object without a namespace lands in whatever namespace `kubectl apply -k` runs
    from: a Role there binds nothing the pods use (a worker got 403 on its NodeFeature)."""
    want = "nfd-prune" if overlay == PRUNE else "node-feature-discovery"
    wrong = [
        f"{d['kind']}/{d['metadata']['name']}: {d['metadata'].get('namespace')}"
        for d in built[overlay]
        if d["kind"] not in CLUSTER_SCOPED and d["metadata"].get("namespace") != want
    ]
    assert not wrong, f"{overlay}: namespaced objects outside {want}: {wrong}"
    for d in built[overlay]:
        for s in d.get("subjects", []):
            if s["kind"] == "ServiceAccount":
                assert s["namespace"] == want, f"{overlay}: {d['kind']}/{d['metadata']['name']} binds {s}"
