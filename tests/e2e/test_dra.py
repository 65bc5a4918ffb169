"""``nfd dra`` as a process against the ``e2e`` cluster (the fake API server, or a real
cluster with NFD_E2E_REAL_CLUSTER=1; see tests/e2e/conftest.py), with a kubelet stand-in
over real unix sockets: slices published for the node, a claim allocated (the test
writes the allocation as the scheduler would), prepared, its CDI spec on disk,
unprepared. On a real cluster the test removes its slices and claim afterwards."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from deviceplugin.fixtures import FixtureHost
from dra.claims import DRIVER, allocate, create_claim
from dra.kubelet_dra import DraKubelet, wait_for


def slices_of(e2e: Any, node: str) -> list[dict[str, Any]]:
    from kubernetes import client

    api: Any = client.ResourceV1Api(e2e.api_client)
    resp = api.list_resource_slice(field_selector=f"spec.nodeName={node}", _preload_content=False)
    items: list[dict[str, Any]] = json.loads(resp.data)["items"]
    return items


@pytest.fixture
def short_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="nfde2e-", dir="/tmp"))  # unix socket paths <= 107 bytes
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_dra_driver_publishes_and_prepares(e2e: Any, tmp_path: Path, short_dir: Path) -> None:
    from kubernetes import client

    node = e2e.make_node("dra")
    fx = FixtureHost(tmp_path / "host")
    (tmp_path / "features.json").write_text(fx.features().to_json())
    (tmp_path / "dra.yaml").write_text(
        yaml.safe_dump({"resources": [{"name": "example.com/fpga", "pci": {"vendor": "1172"}, "servedBy": "dra",
                                       "deviceNodes": ["/dev/vfio/{iommu_group}"]}]})
    )  # fmt: skip
    registry, plugin, cdi = short_dir / "reg", short_dir / "plugin", short_dir / "cdi"
    registry.mkdir()
    kubelet = DraKubelet(registry).start()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nfd", "dra", "--config", str(tmp_path / "dra.yaml"), "--node-name", node,
         "--kubeconfig", str(e2e.kubeconfig), "--host-root", str(fx.root), "--features", str(tmp_path / "features.json"),
         "--plugin-dir", str(plugin), "--registry-dir", str(registry), "--cdi-dir", str(cdi)],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    api: Any = client.ResourceV1Api(e2e.api_client)
    claim: dict[str, Any] | None = None
    try:
        devices = e2e.wait_for(
            lambda: [d["name"] for s in slices_of(e2e, node) for d in s["spec"]["devices"]],
            what="slices published",
        )
        assert sorted(devices) == [
            "fpga-0000-3b-00-0",
            "fpga-0000-3c-00-0",
            "fpga-0000-af-00-0",
            "fpga-0000-b0-00-0",
        ]
        assert wait_for(lambda: DRIVER in kubelet.drivers, timeout=30)

        claim = create_claim(e2e.api_client, "default", f"{node}-claim", device_class="fpga.example.com")
        allocate(e2e.api_client, claim, [(DRIVER, node, "fpga-0000-af-00-0")])
        uid = claim["metadata"]["uid"]
        resp = kubelet.prepare(DRIVER, ("default", uid, claim["metadata"]["name"])).claims[uid]
        assert resp.error == ""
        assert [d.device_name for d in resp.devices] == ["fpga-0000-af-00-0"]
        spec = json.loads((cdi / f"nfd-dra-{uid}.json").read_text())
        assert spec["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"] == "/dev/vfio/40"
        assert kubelet.unprepare(DRIVER, ("default", uid, claim["metadata"]["name"])).claims[uid].error == ""
        assert not (cdi / f"nfd-dra-{uid}.json").exists()
    finally:
        kubelet.stop()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=15)
        if claim is not None:
            api.delete_namespaced_resource_claim(claim["metadata"]["name"], "default", _preload_content=False)
        for s in slices_of(e2e, node):
            api.delete_resource_slice(s["metadata"]["name"], _preload_content=False)
    assert proc.returncode == 0, err
