"""The dra overlay: its config, DeviceClasses, rights and mounts agree with the code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from deploy.manifests import find, flag, pod_spec

from nfd.devices.config import parse_config
from nfd.dra.classes import device_classes


def _config(docs: list[dict[str, Any]]) -> Any:
    cm = find(docs, "ConfigMap", "nfd-dra-conf")
    return parse_config(yaml.safe_load(cm["data"]["devices.yaml"]))


def test_every_dra_resource_has_its_device_class(built: dict[str, list[dict[str, Any]]]) -> None:
    docs = built["dra"]
    config = _config(docs)
    assert config.served_by("dra")
    shipped = {d["metadata"]["name"]: d for d in docs if d["kind"] == "DeviceClass"}
    for want in device_classes(config):
        got = shipped[want["metadata"]["name"]]
        expr = " ".join(got["spec"]["selectors"][0]["cel"]["expression"].split())
        assert expr == want["spec"]["selectors"][0]["cel"]["expression"]
        assert got["spec"].get("extendedResourceName") == want["spec"].get("extendedResourceName")
    kinds = {n.split(".")[0] for n in shipped if n.endswith(".nfd.node.kubernetes.io")}
    assert kinds == {"gpu", "fpga", "pci", "usb", "devnode"}


def test_rights_are_slices_reading_claims_and_posting_events(built: dict[str, list[dict[str, Any]]]) -> None:
    docs = built["dra"]
    role = find(docs, "ClusterRole", "nfd-dra")
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in role["rules"]}
    assert rules == {
        (("resource.k8s.io",), ("resourceslices",)): {"get", "list", "watch", "create", "update", "delete"},
        (("resource.k8s.io",), ("resourceclaims",)): {"get"},
        # nfd.dra.claimstatus writes status.devices with a JSON Patch
        (("resource.k8s.io",), ("resourceclaims/status",)): {"patch"},
        # nfd.dra.events posts with the core API's create_namespaced_event
        (("",), ("events",)): {"create"},
    }
    policy = find(docs, "ValidatingAdmissionPolicy", "nfd-dra-own-node-slices")
    assert "spec.nodeName == variables.node" in policy["spec"]["validations"][0]["expression"]
    assert find(docs, "ValidatingAdmissionPolicyBinding", "nfd-dra-own-node-slices")["spec"][
        "validationActions"
    ] == ["Deny"]


def test_driver_and_worker_read_one_config_and_kubelet_dirs_are_mounted(
    built: dict[str, list[dict[str, Any]]],
) -> None:
    docs = built["dra"]
    config = _config(docs)
    spec = pod_spec(find(docs, "DaemonSet", "nfd-dra"))
    [c] = spec["containers"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    plugin_dir = flag(c["args"], "--plugin-dir")
    assert plugin_dir == f"/var/lib/kubelet/plugins/{config.driver_name}"
    for d in (plugin_dir, flag(c["args"], "--registry-dir"), flag(c["args"], "--cdi-dir")):
        assert d in mounts and not mounts[d].get("readOnly")
    assert any(
        e["name"] == "NODE_NAME" and e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
        for e in c["env"]
    )
    worker = pod_spec(find(docs, "DaemonSet", "nfd-worker"))
    w = next(x for x in worker["containers"] if x["name"] == "nfd-worker")
    assert Path(flag(w["args"], "--device-plugin-config") or "") == Path(flag(c["args"], "--config") or "")


def test_the_driver_updates_side_by_side_and_is_ready_once_registered(
    built: dict[str, list[dict[str, Any]]],
) -> None:
    """A rolling update starts the new pod beside the old one (sockets named with the
    pod's UID, which the downward API hands over) and stops the old one only once the
    new one is ready, which it is once kubelet registered it."""
    ds = find(built["dra"], "DaemonSet", "nfd-dra")
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    [c] = pod_spec(ds)["containers"]
    assert any(
        e["name"] == "POD_UID" and e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid" for e in c["env"]
    )
    assert c["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["port"] == int(flag(c["args"], "--port") or 0)
