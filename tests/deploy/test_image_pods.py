"""scripts/image_pods.py turns a rendered worker container into podman's mounts as the
pod declares them (the image test runs them; this checks the translation offline)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from deploy.conftest import REPO


@pytest.fixture
def pods(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # A script, not a package: loaded from its file (dataclasses look it up in sys.modules).
    spec = importlib.util.spec_from_file_location("image_pods", REPO / "scripts/image_pods.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "image_pods", module)
    spec.loader.exec_module(module)
    return module


def pairs(podman: list[str]) -> list[tuple[str, str]]:
    return list(zip(podman[::2], podman[1::2], strict=True))


def test_device_plugin_worker_mounts_in_the_pods_order(
    pods: ModuleType, built: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    c = pods.container(
        built["device-plugins"], kind="DaemonSet", name="nfd-worker", container_name="nfd-worker",
        node="n1", scratch=tmp_path,
    )  # fmt: skip
    mounts = pairs(c.podman)
    dests = [v.split(":")[1] if flag == "--volume" else v for flag, v in mounts]
    worker = next(
        ct for d in built["device-plugins"] if d["kind"] == "DaemonSet"
        for ct in d["spec"]["template"]["spec"]["containers"] if ct["name"] == "nfd-worker"
    )  # fmt: skip
    assert dests == [m["mountPath"] for m in worker["volumeMounts"]]
    assert ("--volume", f"{tmp_path}/device-plugin-config:/etc/kubernetes/nfd-device-plugin:ro") in mounts
    assert ("--volume", "/dev:/host-dev:ro") in mounts
    assert ("--tmpfs", "/tmp") in mounts
    # The ConfigMap is written out, readable where the worker's flag points.
    config = next(a for a in c.args if a.startswith("--device-plugin-config=")).split("=", 1)[1]
    assert "gpu.intel.com/i915" in Path(c.outside(config)).read_text()
    token = next(a for a in c.args if a.startswith("--token-file=")).split("=", 1)[1]
    assert Path(c.outside(token)).read_text()
    assert c.env["NODE_NAME"] == "n1" and c.env["NFD_HOST_PREFIX"] == "/host-"
    # Every read-only mount in the pod is read-only here.
    for m in worker["volumeMounts"]:
        if m.get("readOnly"):
            assert any(v.endswith(f":{m['mountPath']}:ro") for _, v in mounts), m


def test_unknown_volume_types_are_refused(pods: ModuleType, tmp_path: Path) -> None:
    docs = [
        {
            "kind": "DaemonSet",
            "metadata": {"name": "w"},
            "spec": {"template": {"spec": {
                "containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/x"}]}],
                "volumes": [{"name": "v", "nfs": {"server": "s", "path": "/"}}],
            }}},
        }
    ]  # fmt: skip
    with pytest.raises(pods.PodError, match="nfs"):
        pods.container(docs, kind="DaemonSet", name="w", container_name="c", node="n", scratch=tmp_path)
