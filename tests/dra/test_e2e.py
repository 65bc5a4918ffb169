"""The DRA driver end to end on the fake API server, with a kubelet stand-in over real
unix sockets: slices published, a claim allocated (the test writes the allocation as the
scheduler would), prepared, the CDI spec on disk, unprepared; health and hot-plug changes
reach the slices."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deviceplugin.fixtures import FixtureHost
from dra.claims import DRIVER, NODE, allocate, create_claim, published
from dra.kubelet_dra import DraKubelet, wait_for

from nfd.dra.driver import DraDriver
from nfd.features import Features
from tests.fakeapi import FakeApiServer


def test_slices_claim_prepare_cdi_unprepare(
    start_driver: Callable[..., DraDriver],
    kubelet: DraKubelet,
    fake_api: FakeApiServer,
    fake_api_client: Any,
    dirs: dict[str, Path],
) -> None:
    driver = start_driver()
    assert wait_for(lambda: len(published(fake_api)) == 8)
    devices = published(fake_api)
    fpga = devices["fpga-0000-3b-00-0"]
    assert fpga["attributes"]["resource.kubernetes.io/pciBusID"] == {"string": "0000:3b:00.0"}
    assert fpga["attributes"]["numaNode"] == {"int": 0}
    assert fpga["attributes"]["resource"] == {"string": "example.com/fpga"}
    assert devices["tty-ttys0"]["attributes"]["devicePath"] == {"string": "/dev/ttyS0"}
    # The USB resource is the device plugin's: never published here.
    assert not any(n.startswith("serial") for n in devices)

    assert wait_for(lambda: DRIVER in kubelet.drivers)
    assert driver.plugin.registered.wait(5)
    assert kubelet.drivers[DRIVER] == str(dirs["plugin"] / "dra.sock")

    claim = create_claim(fake_api_client, "default", "fpga-claim", device_class="fpga.example.com")
    allocate(fake_api_client, claim, [(DRIVER, NODE, "fpga-0000-3b-00-0")])
    uid = claim["metadata"]["uid"]
    resp = kubelet.prepare(DRIVER, ("default", uid, "fpga-claim"))
    got = resp.claims[uid]
    assert got.error == ""
    [dev] = got.devices
    assert (list(dev.request_names), dev.pool_name, dev.device_name) == (["dev"], NODE, "fpga-0000-3b-00-0")
    assert list(dev.cdi_device_ids) == [f"{DRIVER}/claim={uid}-fpga-0000-3b-00-0"]

    [spec_file] = dirs["cdi"].glob("*.json")
    spec = json.loads(spec_file.read_text())
    assert spec["kind"] == f"{DRIVER}/claim"
    [cdi_dev] = spec["devices"]
    assert cdi_dev["name"] == f"{uid}-fpga-0000-3b-00-0"
    edits = cdi_dev["containerEdits"]
    assert [n["hostPath"] for n in edits["deviceNodes"]] == ["/dev/vfio/12", "/dev/vfio/vfio"]
    assert "PCIDEVICE_EXAMPLE_COM_FPGA=0000:3b:00.0" in edits["env"]

    # Idempotent: kubelet retries; the answer is the same and the API is not asked again.
    assert driver.preparer.flush_status(5)  # the status write reads the claim too
    reads = fake_api.log.count(verb="get", resource="resourceclaims.resource.k8s.io")
    again = kubelet.prepare(DRIVER, ("default", uid, "fpga-claim"))
    assert again.claims[uid] == got
    assert fake_api.log.count(verb="get", resource="resourceclaims.resource.k8s.io") == reads

    assert kubelet.unprepare(DRIVER, ("default", uid, "fpga-claim")).claims[uid].error == ""
    assert list(dirs["cdi"].glob("*.json")) == []
    # Unprepare of a claim never prepared (or already unprepared) succeeds.
    assert kubelet.unprepare(DRIVER, ("default", uid, "fpga-claim")).claims[uid].error == ""
    assert kubelet.unprepare(DRIVER, ("default", "no-such-uid", "x")).claims["no-such-uid"].error == ""


def test_health_and_hotplug_reach_the_slices_within_a_second(
    start_driver: Callable[..., DraDriver], fx: FixtureHost, fake_api: FakeApiServer
) -> None:
    start_driver()
    assert wait_for(lambda: "fpga-0000-3b-00-0" in published(fake_api))
    fx.unbind("0000:3b:00.0")  # turns unhealthy: stays, tainted
    assert wait_for(lambda: published(fake_api)["fpga-0000-3b-00-0"].get("taints"), timeout=1.0)
    [taint] = published(fake_api)["fpga-0000-3b-00-0"]["taints"]
    assert (taint["key"], taint["value"], taint["effect"]) == (
        f"{DRIVER}/unhealthy",
        "driver-vfio-pci-unbound",
        "NoSchedule",
    )
    fx.bind("0000:3b:00.0", "vfio-pci")
    assert wait_for(lambda: "taints" not in published(fake_api)["fpga-0000-3b-00-0"], timeout=1.0)
    # Hot-unplug: the device leaves sysfs and the slice; it comes back when plugged in again.
    gone = fx.root / "sys/bus/pci/devices/0000:af:00.0"
    gone.rename(gone.with_name("unplugged"))
    assert wait_for(lambda: "fpga-0000-af-00-0" not in published(fake_api), timeout=1.0)
    gone.with_name("unplugged").rename(gone)
    assert wait_for(lambda: "fpga-0000-af-00-0" in published(fake_api), timeout=1.0)
    assert "taints" not in published(fake_api)["fpga-0000-af-00-0"]


def test_no_write_when_nothing_changed_and_restart_replaces(
    start_driver: Callable[..., DraDriver], fake_api: FakeApiServer
) -> None:
    first = start_driver()
    assert first.slices.published.wait(5)
    writes = fake_api.log.writes(resource="resourceslices.resource.k8s.io")
    assert len(writes) == 1
    time.sleep(0.3)  # many loop rounds, health polls
    assert len(fake_api.log.writes(resource="resourceslices.resource.k8s.io")) == 1
    first.stop()
    # A stale slice of this node and driver, from an older run with other names.
    fake_api.objects.create(
        "resourceslices",
        {
            "metadata": {"name": "stale-slice"},
            "spec": {
                "driver": DRIVER,
                "nodeName": NODE,
                "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gone-device"}],
            },
        },
    )
    second = start_driver()
    assert second.slices.published.wait(5)
    slices = [s for s in fake_api.objects.list("resourceslices") if s["spec"]["nodeName"] == NODE]
    assert [s["metadata"]["name"] for s in slices] == [f"{NODE}-nfd-node-kubernetes-io-0"]
    assert slices[0]["spec"]["pool"]["generation"] == 2
    assert "gone-device" not in published(fake_api)


def test_a_device_plugged_in_later_is_published(
    start_driver: Callable[..., DraDriver], fx: FixtureHost, fake_api: FakeApiServer
) -> None:
    new = {"address": "0000:d8:00.0", "vendor": "1172", "device": "5052", "class": "1200", "driver": "vfio-pci",
           "numa_node": "1", "iommu_group": "77", "subsystem_vendor": "1172", "subsystem_device": "0001"}  # fmt: skip
    plugged = False

    def features() -> Features:
        f = fx.features()
        if plugged:
            f.set_instances("pci.device", [*f.instances["pci.device"], new])
        return f

    driver = start_driver(features=features, rediscover_interval=0.05)
    assert wait_for(lambda: "fpga-0000-3b-00-0" in published(fake_api))
    assert "fpga-0000-d8-00-0" not in published(fake_api)
    fx.add_pci("0000:d8:00.0", driver="vfio-pci", numa="1")
    fx.touch("dev/vfio/77")
    plugged = True
    assert wait_for(lambda: "fpga-0000-d8-00-0" in published(fake_api), timeout=2.0)
    assert published(fake_api)["fpga-0000-d8-00-0"]["attributes"]["numaNode"] == {"int": 1}
    assert "fpga-0000-d8-00-0" in driver.inventory.by_name
    # Health of the new device is watched like the others'.
    fx.unbind("0000:d8:00.0")
    assert wait_for(lambda: published(fake_api)["fpga-0000-d8-00-0"].get("taints"), timeout=1.0)


def test_a_device_back_after_a_pass_without_it_is_published_before_the_next_pass(
    start_driver: Callable[..., DraDriver], fx: FixtureHost, fake_api: FakeApiServer
) -> None:
    # Passes only when the test runs one: without the watch on departed devices, the
    # device would come back an hour later.
    driver = start_driver(rediscover_interval=3600)
    assert driver.rediscovery is not None
    assert wait_for(lambda: "tty-ttys1" in published(fake_api))
    node = fx.root / "dev/ttyS1"
    node.rename(node.with_name("away"))
    # One pass while the node is missing: still served, tainted by the health poll.
    assert not driver.rediscovery.once()
    assert "tty-ttys1" in driver.inventory.by_name
    assert wait_for(lambda: published(fake_api).get("tty-ttys1", {}).get("taints"))
    assert driver.rediscovery.once()  # a second pass without it: the device is gone
    assert "tty-ttys1" not in driver.inventory.by_name
    assert wait_for(lambda: "tty-ttys1" not in published(fake_api))
    node.with_name("away").rename(node)
    assert wait_for(lambda: "tty-ttys1" in published(fake_api), timeout=10.0)
    assert "tty-ttys1" in driver.inventory.by_name
    # Watched until found again, not after: a second departure is watched afresh.
    node.rename(node.with_name("away"))
    assert not driver.rediscovery.once()
    assert driver.rediscovery.once()
    node.with_name("away").rename(node)
    assert wait_for(lambda: "tty-ttys1" in published(fake_api), timeout=10.0)


def test_failed_writes_and_an_unreachable_api_server_are_retried(
    start_driver: Callable[..., DraDriver], fake_api: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_api.faults.down(mode="reset")
    with caplog.at_level(logging.ERROR, logger="nfd.dra"):
        driver = start_driver()
        assert wait_for(lambda: any("unreachable" in r.getMessage() for r in caplog.records))
        fake_api.faults.up()
        fake_api.faults.fail(500, times=2, method="POST")
        assert driver.slices.published.wait(10)
    assert len(published(fake_api)) == 8
    messages = [r.getMessage() for r in caplog.records if r.name == "nfd.dra"]
    assert all("\n" not in m for m in messages)
    assert messages[0].startswith(f"ResourceSlices for node {NODE}: API server unreachable: ")
    assert any(m.startswith(f"ResourceSlices for node {NODE}: HTTP 500: ") for m in messages)


def test_a_claim_whose_cdi_spec_is_gone_is_prepared_again(
    start_driver: Callable[..., DraDriver],
    kubelet: DraKubelet,
    fake_api: FakeApiServer,
    fake_api_client: Any,
    dirs: dict[str, Path],
) -> None:
    """The checkpoint is not flushed to the disk, and the CDI directory is often a
    tmpfs: after a node's crash the checkpoint may name a claim whose spec is gone. Such
    a claim is prepared again, not answered with a CDI device the runtime cannot find."""
    driver = start_driver()
    assert wait_for(lambda: DRIVER in kubelet.drivers)
    claim = create_claim(fake_api_client, "default", "c", device_class="fpga.example.com")
    allocate(fake_api_client, claim, [(DRIVER, NODE, "fpga-0000-3b-00-0")])
    uid = claim["metadata"]["uid"]

    def reads() -> int:
        assert driver.preparer.flush_status(5)
        return fake_api.log.count(verb="get", resource="resourceclaims.resource.k8s.io")

    before = reads()
    assert kubelet.prepare(DRIVER, ("default", uid, "c")).claims[uid].error == ""
    first = reads() - before
    [spec] = dirs["cdi"].glob("nfd-dra-*.json")
    spec.unlink()
    before = reads()
    assert kubelet.prepare(DRIVER, ("default", uid, "c")).claims[uid].error == ""
    assert spec.exists()
    assert reads() - before == first > 0  # the API asked as the first time: prepared again
