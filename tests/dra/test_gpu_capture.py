"""The DRA driver on real GPU nodes (one H100, one H200), replayed: over the host files
and the NVML snapshot captured there (``tests/fixtures/capture_gpu.py``), the pool is the one
``nfd dra --check`` printed on the node, and a claim's prepare gives the CDI edits and
``status.devices`` the real node gave, naming device nodes that existed there."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dra.kubelet_dra import DraKubelet, wait_for

from nfd.config import SourcesConfig
from nfd.devices.config import DRA, parse_config
from nfd.devices.inventory import build_served_states
from nfd.devices.kinds import KindRegistry
from nfd.devices.kinds.gpu import GpuKind
from nfd.discovery import discover
from nfd.dra.driver import DraDriver
from nfd.dra.slices import DraInventory, pool_now
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.hw.nvml_fake import FakeNvml, snapshot_from_dict
from nfd.sources.gpu import GpuSource
from nfd.sources.pci import PciSource
from nfd.sources.usb import UsbSource
from tests.fakeapi import FakeApiServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NODES = ["h100-vm", "h200-vm"]  # tests/fixtures/gpu-capture/<node>, hosts/gpu-<node>
NODE = "gpu-node"  # as the capture named it
CONFIG = {"resources": [{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia"}, "servedBy": "dra"}]}


def capture(node: str) -> Path:
    return FIXTURES / "gpu-capture" / node


def host(node: str) -> HostRoot:
    return HostRoot.under(FIXTURES / "hosts" / f"gpu-{node}")


def nvml(node: str) -> Callable[[], FakeNvml]:
    snapshot = snapshot_from_dict(json.loads((capture(node) / "nvml.json").read_text())["snapshot"])
    return lambda: FakeNvml(snapshot)


def node_features(node: str) -> Features:
    """What ``nfd dra`` discovers before it builds the pool: pci, usb and gpu."""
    sources = [PciSource(), UsbSource(), GpuSource(nvml=nvml(node))]
    return discover(sources, host(node), SourcesConfig()).features


def printed_pool(node: str) -> dict[str, Any]:
    """The List ``nfd dra --check`` printed on the node."""
    text = (capture(node) / "checks.txt").read_text()
    section = text[text.index("$ nfd dra --check") :]
    body = section[section.index("rc=0\n") + len("rc=0\n") :]
    out: dict[str, Any] = json.JSONDecoder().raw_decode(body)[0]
    return out


def inventory(node: str) -> tuple[Any, list[Any], DraInventory]:
    config = parse_config(CONFIG, KindRegistry((GpuKind(nvml=nvml(node), event_wait=0.02),)))
    feats = node_features(node)
    states, warnings = build_served_states(config.resources, DRA, features=feats, host=host(node))
    assert warnings == []
    return config, states, DraInventory(states, features=feats, host=host(node))


@pytest.mark.parametrize(
    ("node", "product", "memory"),
    [("h100-vm", "NVIDIA H100 80GB HBM3", "81559Mi"), ("h200-vm", "NVIDIA H200", "143771Mi")],
)
def test_the_pool_is_the_one_the_node_printed(node: str, product: str, memory: str) -> None:
    config, _states, inv = inventory(node)
    slices = pool_now(inv, driver=config.driver_name, node=NODE, taint_effect=config.dra.taint_effect)
    assert slices == printed_pool(node)["items"]
    [device] = slices[0]["spec"]["devices"]
    assert device["attributes"]["productName"] == {"string": product}
    assert device["capacity"] == {"memory": {"value": memory}}


@pytest.fixture
def base() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="nfdgpu-", dir="/tmp"))  # short: unix socket paths
    (d / "registry").mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("node", NODES)
def test_a_claim_is_prepared_as_on_the_node(node: str, fake_api: FakeApiServer, base: Path) -> None:
    real = json.loads((capture(node) / "dra.json").read_text())
    config, states, inv = inventory(node)
    kubelet = DraKubelet(base / "registry").start()
    client = fake_api.transport()
    driver = DraDriver(
        states, inv, api=client, driver=config.driver_name, node=NODE, plugin_dir=str(base / "plugin"),
        registry_dir=str(base / "registry"), cdi_dir=str(base / "cdi"), use_udev=False,
        taint_effect=config.dra.taint_effect,
    )  # fmt: skip
    driver.start()
    try:
        [device] = real["claim_status"]["allocation"]["devices"]["results"]
        created = fake_api.objects.create(
            "resourceclaims",
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "gpu-claim", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
        )  # fmt: skip
        uid = created["metadata"]["uid"]
        fake_api.objects.modify(
            "resourceclaims", "gpu-claim", lambda o: o.update(status={"allocation": real["claim_status"]["allocation"]}),
            "default", subresource="status",
        )  # fmt: skip
        assert wait_for(lambda: config.driver_name in kubelet.drivers, timeout=10)
        resp = kubelet.prepare(config.driver_name, ("default", uid, "gpu-claim"))
        [(real_uid, real_prepared)] = real["prepare"]["claims"].items()
        assert resp.claims[uid].error == ""
        assert (
            resp.claims[uid].devices[0].device_name
            == device["device"]
            == real_prepared["devices"][0]["deviceName"]
        )
        [spec] = [json.loads(p.read_text()) for p in (base / "cdi").glob("*.json")]
        [real_spec] = real["cdi_specs"].values()
        assert spec["devices"][0]["containerEdits"] == real_spec["devices"][0]["containerEdits"]
        assert spec["devices"][0]["name"] == real_spec["devices"][0]["name"].replace(real_uid, uid)
        assert all(real["cdi_paths_exist"].values())

        def status() -> list[dict[str, Any]]:
            claim = fake_api.objects.get("resourceclaims", "gpu-claim", "default")
            return list((claim.get("status") or {}).get("devices") or [])

        assert wait_for(status, timeout=10)
        [mine] = status()
        [theirs] = real["claim_status"]["devices"]
        assert mine["data"] == theirs["data"]
        assert [c["reason"] for c in mine["conditions"]] == [c["reason"] for c in theirs["conditions"]]
    finally:
        driver.stop()
        kubelet.stop()
        client.close()
