"""Device names, attributes and the pool's slices, and the publisher against the fake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deviceplugin.fixtures import FixtureHost
from dra.claims import DRIVER, NODE

from nfd.deviceplugin.view import served_resources
from nfd.devices.config import DEVICE_PLUGIN, DRA, parse_config
from nfd.devices.kinds.model import FoundDevice
from nfd.dra.attributes import AttributeSource, binary_quantity, pcie_root
from nfd.dra.classes import device_classes
from nfd.dra.publisher import PublishError, SlicePublisher
from nfd.dra.slices import device_name, pool_slices, slice_name
from nfd.features import Features
from nfd.hostroot import HostRoot
from tests.fakeapi import FakeApiServer


def devices(n: int) -> list[dict[str, Any]]:
    return [{"name": f"dev-{i:03d}", "attributes": {"index": {"int": i}}} for i in range(n)]


def test_device_names_are_stable_dns_labels() -> None:
    assert device_name("example.com/fpga", "0000:3b:00.0") == "fpga-0000-3b-00-0"
    assert device_name("nvidia.com/gpu", "GPU-8f0e2a1c") == "gpu-gpu-8f0e2a1c"
    long = device_name("example.com/x", "y" * 100)
    assert len(long) <= 63 and long == device_name("example.com/x", "y" * 100)
    assert long != device_name("example.com/x", "y" * 101)


def test_pool_splits_at_128_devices_per_slice() -> None:
    slices = pool_slices(devices(300), driver=DRIVER, node=NODE, generation=4)
    assert [len(s["spec"]["devices"]) for s in slices] == [128, 128, 44]
    assert {(s["spec"]["pool"]["generation"], s["spec"]["pool"]["resourceSliceCount"]) for s in slices} == {
        (4, 3)
    }
    assert [s["metadata"]["name"] for s in slices] == [slice_name(NODE, DRIVER, i) for i in range(3)]
    [empty] = pool_slices([], driver=DRIVER, node=NODE, generation=1)
    assert empty["spec"]["devices"] == [] and empty["spec"]["pool"]["resourceSliceCount"] == 1
    assert len(slice_name("n" * 253, DRIVER, 7)) <= 253


def test_publisher_writes_only_changes_and_shrinks_the_pool(
    fake_api: FakeApiServer, fake_transport: Any
) -> None:
    pub = SlicePublisher(fake_transport, driver=DRIVER, node=NODE)
    assert pub.sync(devices(300)) == 3
    assert pub.sync(devices(300)) == 0 and pub.sync(devices(300), force=True) == 0
    # Another publisher (a restart) finds the same pool and writes nothing.
    assert SlicePublisher(fake_transport, driver=DRIVER, node=NODE).sync(devices(300)) == 0
    assert pub.sync(devices(100)) == 3  # one slice rewritten, two deleted
    stored = fake_api.objects.list("resourceslices")
    assert [(s["spec"]["pool"]["generation"], len(s["spec"]["devices"])) for s in stored] == [(2, 100)]
    # Someone deleted our slice: a forced sync (the periodic resync) puts it back.
    fake_api.objects.delete("resourceslices", stored[0]["metadata"]["name"])
    assert pub.sync(devices(100)) == 0
    assert pub.sync(devices(100), force=True) == 1
    assert len(fake_api.objects.list("resourceslices")) == 1


def test_attributes_from_sysfs_and_features(tmp_path: Path) -> None:
    root = tmp_path / "host"
    real = root / "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"
    (real / "net/eth1").mkdir(parents=True)
    (real / "net/eth1/speed").write_text("25000\n")
    (real / "sriov_totalvfs").write_text("8\n")
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    (root / "sys/bus/pci/devices/0000:3b:00.0").symlink_to(real)
    host = HostRoot.under(root)
    assert pcie_root(host, "0000:3b:00.0") == "pci0000:3a"
    feats = Features()
    feats.set_instances(
        "pci.device",
        [
            {
                "address": "0000:3b:00.0",
                "vendor": "15B3",
                "device": "101d",
                "class": "0200",
                "driver": "mlx5_core",
            }
        ],
    )
    dev = FoundDevice(id="0000:3b:00.0", numa_node=1, attributes={"address": "0000:3b:00.0", "long": "x"})
    attrs, cap = AttributeSource(feats, host).build(resource="example.com/nic", kind="pci", device=dev)
    assert attrs == {
        "resource": {"string": "example.com/nic"},
        "kind": {"string": "pci"},
        "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.0"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:3a"},
        "vendor": {"string": "15b3"},
        "device": {"string": "101d"},
        "class": {"string": "0200"},
        "driver": {"string": "mlx5_core"},
        "sriov": {"string": "pf"},
        "interface": {"string": "eth1"},
        "linkSpeedMbps": {"int": 25000},
        "numaNode": {"int": 1},
    }
    assert cap == {}


def test_gpu_attributes_and_memory_capacity(tmp_path: Path) -> None:
    feats = Features()
    feats.set_instances(
        "gpu.nvidia",
        [{"uuid": "GPU-1", "name": "NVIDIA H100 80GB HBM3", "memory": "81559", "compute_major": "9",
          "compute_minor": "0", "mig_enabled": "false"}],
    )  # fmt: skip
    feats.set_attributes("gpu.nvidia_driver", {"driver_version": "535.104.05", "cuda_driver_version": "12.2"})
    dev = FoundDevice(
        id="GPU-1", attributes={"uuid": "GPU-1", "pci_address": "0000:18:00.0", "name": "x" * 70}
    )
    attrs, cap = AttributeSource(feats, HostRoot.under(tmp_path)).build(
        resource="nvidia.com/gpu", kind="gpu", device=dev
    )
    assert attrs["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert attrs["cudaComputeCapability"] == {"version": "9.0.0"}
    assert attrs["driverVersion"] == {"string": "535.104.05"}  # not a semantic version
    assert attrs["cudaDriverVersion"] == {"version": "12.2.0"}
    assert attrs["migEnabled"] == {"bool": False}
    assert attrs["resource.kubernetes.io/pciBusID"] == {"string": "0000:18:00.0"}
    assert cap == {"memory": {"value": "81559Mi"}}


def test_one_view_dra_resources_are_not_the_device_plugins(fx: FixtureHost) -> None:
    cfg = parse_config(
        {
            "resources": [
                {"name": "example.com/fpga", "pci": {"vendor": "1172"}, "servedBy": "dra"},
                {
                    "name": "example.com/tty",
                    "devnode": "/dev/ttyS*",
                    "servedBy": "dra",
                    "extendedResourceName": "example.com/serial-port",
                },
                {"name": "example.com/usb", "usb": {"vendor": "0403"}},
                {"name": "example.com/none", "usb": {"vendor": "dead"}},
            ]
        }
    )
    assert [r.name for r in cfg.served_by(DEVICE_PLUGIN)] == ["example.com/usb", "example.com/none"]
    assert [r.name for r in cfg.served_by(DRA)] == ["example.com/fpga", "example.com/tty"]
    # The worker reports these, and the master never patches them as extended resources.
    assert served_resources(cfg, features=fx.features(), host=fx.host) == [
        "example.com/fpga", "example.com/serial-port", "example.com/tty", "example.com/usb",
    ]  # fmt: skip
    classes = {c["metadata"]["name"]: c["spec"] for c in device_classes(cfg)}
    assert classes["fpga.example.com"]["extendedResourceName"] == "example.com/fpga"
    assert classes["tty.example.com"]["extendedResourceName"] == "example.com/serial-port"
    assert classes["fpga.example.com"]["selectors"] == [
        {
            "cel": {
                "expression": f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].resource == "example.com/fpga"'
            }
        }
    ]


def test_capacity_is_written_as_the_api_server_stores_it() -> None:
    assert binary_quantity(81559 * 2**20) == "81559Mi"
    assert binary_quantity(80 * 2**30) == "80Gi"
    assert binary_quantity(2048 * 2**20) == "2Gi"
    assert binary_quantity(1536) == "1536"
    assert binary_quantity(0) == "0"


def test_a_change_is_written_without_listing_and_a_conflict_reads_again(
    fake_api: FakeApiServer, fake_transport: Any
) -> None:
    pub = SlicePublisher(fake_transport, driver=DRIVER, node=NODE)
    pub.sync(devices(10))
    lists = fake_api.log.count(verb="list", resource="resourceslices.resource.k8s.io")
    assert pub.sync(devices(9)) == 1
    assert fake_api.log.count(verb="list", resource="resourceslices.resource.k8s.io") == lists
    # Someone else edits our slice: our next write conflicts, and the retry reads first.
    name = slice_name(NODE, DRIVER, 0)
    fake_api.objects.modify(
        "resourceslices", name, lambda o: o["metadata"].setdefault("labels", {}).update(x="y")
    )
    with pytest.raises(PublishError, match="HTTP 409"):
        pub.sync(devices(8))
    assert pub.sync(devices(8)) == 1
    [stored] = fake_api.objects.list("resourceslices")
    assert len(stored["spec"]["devices"]) == 8 and stored["spec"]["pool"]["generation"] == 3


def test_an_api_server_that_does_not_answer_costs_one_timeout_not_a_thread(
    fake_api: FakeApiServer, fake_api_client: Any, fake_transport: Any
) -> None:
    # A claim read in NodePrepareResources, or a slice write, that never gets an answer
    # fails after the request timeout (kubelet retries the one, the next sync the other).
    from dra.claims import create_claim

    from nfd.dra.prepare import ClaimError
    from nfd.dra.publisher import ClaimReaderApi

    claim = create_claim(fake_api_client, "default", "slow", device_class="fpga.example.com")
    fake_api.faults.delay(60, method="GET", path=r"/resourceclaims/slow$")
    with pytest.raises(ClaimError, match="claim default/slow: API server unreachable"):
        ClaimReaderApi(fake_transport, timeout=0.5)("default", "slow")
    fake_api.faults.clear()
    assert (
        ClaimReaderApi(fake_transport, timeout=0.5)("default", "slow")["metadata"]["uid"]
        == claim["metadata"]["uid"]
    )

    fake_api.faults.delay(60, method="GET", path=r"/resourceslices$")
    with pytest.raises(PublishError, match="API server unreachable"):
        SlicePublisher(fake_transport, driver=DRIVER, node=NODE, timeout=0.5).sync(devices(2))
