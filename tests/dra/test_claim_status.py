"""A prepared claim's status.devices (KEP-4817), written by the driver through the fake
API server (which checks the entries as the real one does), removed at unprepare; a
failed write fails no prepare and is tried again at the next."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deviceplugin.fixtures import FixtureHost
from dra.claims import DRIVER, NODE, allocate, create_claim
from dra.kubelet_dra import DraKubelet, wait_for

from nfd.dra.driver import DraDriver
from nfd.features import Features
from tests.fakeapi import FakeApiServer

NIC = "0000:5e:00.0"
NIC_CONFIG: dict[str, Any] = {
    "resources": [
        {"name": "example.com/fpga", "pci": {"vendor": "1172"}, "servedBy": "dra",
         "deviceNodes": ["/dev/vfio/{iommu_group}", "/dev/vfio/vfio"]},
        {"name": "example.com/nic", "pci": {"vendor": "15b3"}, "servedBy": "dra"},
    ]
}  # fmt: skip


def _with_nic(fx: FixtureHost) -> Callable[[], Features]:
    fx.add_pci(NIC, driver="mlx5_core", numa="1")
    net = fx.root / "sys/bus/pci/devices" / NIC / "net/ens1f0"
    net.mkdir(parents=True)
    (net / "address").write_text("0c:42:a1:00:00:01\n")

    def features() -> Features:
        f = fx.features()
        f.instances["pci.device"].append(
            {"address": NIC, "vendor": "15b3", "device": "101d", "class": "0200", "driver": "mlx5_core",
             "numa_node": "1", "iommu_group": "50"}
        )  # fmt: skip
        return f

    return features


def _status(fake_api: FakeApiServer, name: str) -> list[dict[str, Any]]:
    claim = fake_api.objects.get("resourceclaims", name, namespace="default")
    return list((claim.get("status") or {}).get("devices") or [])


def test_prepare_writes_status_devices_and_unprepare_removes_ours(
    start_driver: Callable[..., DraDriver],
    kubelet: DraKubelet,
    fake_api: FakeApiServer,
    fake_api_client: Any,
    fx: FixtureHost,
) -> None:
    driver = start_driver(NIC_CONFIG, features=_with_nic(fx))
    assert wait_for(lambda: DRIVER in kubelet.drivers)
    claim = create_claim(fake_api_client, "default", "two", device_class="x.example.com", count=2)
    nic = "nic-0000-5e-00-0"
    allocate(
        fake_api_client,
        claim,
        [(DRIVER, NODE, "fpga-0000-3b-00-0"), (DRIVER, NODE, nic), ("other.example.com", "pool-b", "gpu-0")],
    )
    # Another driver's entry is there first; ours must not replace it.
    fake_api.objects.modify(
        "resourceclaims", "two", lambda o: o["status"].update(
            devices=[{"driver": "other.example.com", "pool": "pool-b", "device": "gpu-0"}]
        ), namespace="default", subresource="status",
    )  # fmt: skip
    uid = claim["metadata"]["uid"]
    assert kubelet.prepare(DRIVER, ("default", uid, "two")).claims[uid].error == ""
    assert driver.preparer.flush_status(5)  # status writes are off the call's path

    by_device = {d["device"]: d for d in _status(fake_api, "two")}
    assert set(by_device) == {"gpu-0", "fpga-0000-3b-00-0", nic}
    fpga = by_device["fpga-0000-3b-00-0"]
    assert (fpga["driver"], fpga["pool"]) == (DRIVER, NODE)
    [ready] = fpga["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Prepared")
    assert fpga["data"] == {
        "deviceNodes": ["/dev/vfio/12", "/dev/vfio/vfio"],
        "pciAddress": "0000:3b:00.0",
        "numaNode": 0,
    }
    assert "networkData" not in fpga
    assert by_device[nic]["networkData"] == {
        "interfaceName": "ens1f0",
        "hardwareAddress": "0c:42:a1:00:00:01",
    }
    assert by_device[nic]["data"]["numaNode"] == 1

    # A prepare answered from the checkpoint writes nothing again.
    patches = fake_api.log.count(verb="patch", resource="resourceclaims.resource.k8s.io")
    assert kubelet.prepare(DRIVER, ("default", uid, "two")).claims[uid].error == ""
    assert driver.preparer.flush_status(5)  # status writes are off the call's path
    assert fake_api.log.count(verb="patch", resource="resourceclaims.resource.k8s.io") == patches

    assert kubelet.unprepare(DRIVER, ("default", uid, "two")).claims[uid].error == ""
    assert driver.preparer.flush_status(5)  # status writes are off the call's path
    assert [d["device"] for d in _status(fake_api, "two")] == ["gpu-0"]


def test_a_failed_status_write_fails_no_prepare_and_is_tried_again(
    start_driver: Callable[..., DraDriver],
    kubelet: DraKubelet,
    fake_api: FakeApiServer,
    fake_api_client: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver = start_driver()
    assert wait_for(lambda: DRIVER in kubelet.drivers)
    claim = create_claim(fake_api_client, "default", "c", device_class="fpga.example.com")
    allocate(fake_api_client, claim, [(DRIVER, NODE, "fpga-0000-3b-00-0")])
    uid = claim["metadata"]["uid"]
    fake_api.faults.fail(403, times=2, method="PATCH", path=r"/resourceclaims/c/status$")
    with caplog.at_level(logging.WARNING, logger="nfd.dra"):
        for _ in range(2):
            assert kubelet.prepare(DRIVER, ("default", uid, "c")).claims[uid].error == ""
            assert driver.preparer.flush_status(5)  # status writes are off the call's path
    assert _status(fake_api, "c") == []
    warnings = [r.getMessage() for r in caplog.records if "status.devices" in r.getMessage()]
    assert len(warnings) == 1 and "HTTP 403" in warnings[0] and "\n" not in warnings[0]
    # The next prepare (kubelet calls again for another pod of the claim) writes it.
    assert kubelet.prepare(DRIVER, ("default", uid, "c")).claims[uid].error == ""
    assert driver.preparer.flush_status(5)  # status writes are off the call's path
    assert [d["device"] for d in _status(fake_api, "c")] == ["fpga-0000-3b-00-0"]


def test_a_claim_changed_between_read_and_write_is_read_again(
    start_driver: Callable[..., DraDriver],
    kubelet: DraKubelet,
    fake_api: FakeApiServer,
    fake_api_client: Any,
) -> None:
    driver = start_driver()
    assert wait_for(lambda: DRIVER in kubelet.drivers)
    claim = create_claim(fake_api_client, "default", "c", device_class="fpga.example.com")
    allocate(fake_api_client, claim, [(DRIVER, NODE, "fpga-0000-3b-00-0")])
    uid = claim["metadata"]["uid"]
    # The first patch's resourceVersion test fails as if someone wrote in between.
    fake_api.faults.fail(
        422, times=1, method="PATCH", path=r"/resourceclaims/c/status$",
        message="the server rejected our request due to an error in our request",
    )  # fmt: skip
    assert kubelet.prepare(DRIVER, ("default", uid, "c")).claims[uid].error == ""
    assert driver.preparer.flush_status(5)  # status writes are off the call's path
    assert [d["device"] for d in _status(fake_api, "c")] == ["fpga-0000-3b-00-0"]


def test_the_shipped_rbac_lets_the_driver_write_claim_status(
    start_driver: Callable[..., DraDriver],
    kubelet: DraKubelet,
    fake_api: FakeApiServer,
    fake_api_client: Any,
) -> None:
    import yaml

    repo = Path(__file__).resolve().parents[2]
    rbac = [d for d in yaml.safe_load_all((repo / "deploy/components/dra/dra-rbac.yaml").read_text()) if d]
    fake_api.authz.load_rbac(rbac, "node-feature-discovery")
    fake_api.enforce_rbac = True
    token = fake_api.tokens.issue_service_account("node-feature-discovery", "nfd-dra", node_name=NODE)
    since = fake_api.log.mark()
    driver = start_driver(token=token)
    assert wait_for(lambda: DRIVER in kubelet.drivers)
    claim = create_claim(fake_api_client, "default", "c", device_class="fpga.example.com")
    allocate(fake_api_client, claim, [(DRIVER, NODE, "fpga-0000-3b-00-0")])
    uid = claim["metadata"]["uid"]
    assert kubelet.prepare(DRIVER, ("default", uid, "c")).claims[uid].error == ""
    assert driver.preparer.flush_status(5)  # status writes are off the call's path
    assert [d["device"] for d in _status(fake_api, "c")] == ["fpga-0000-3b-00-0"]
    assert kubelet.unprepare(DRIVER, ("default", uid, "c")).claims[uid].error == ""
    assert driver.preparer.flush_status(5)  # status writes are off the call's path
    assert _status(fake_api, "c") == []
    assert fake_api.log.count(since=since, status=403) == 0


def test_the_status_write_patches_the_claim_the_prepare_read_and_reads_it_again_if_changed(
    start_driver: Callable[..., DraDriver],
    kubelet: DraKubelet,
    fake_api: FakeApiServer,
    fake_api_client: Any,
) -> None:
    driver = start_driver(NIC_CONFIG)
    assert wait_for(lambda: DRIVER in kubelet.drivers)
    claims = "resourceclaims.resource.k8s.io"
    for name, changed in (("kept", False), ("changed", True)):
        claim = create_claim(fake_api_client, "default", name, device_class="x.example.com")
        allocate(fake_api_client, claim, [(DRIVER, NODE, "fpga-0000-3b-00-0")])
        uid = claim["metadata"]["uid"]
        if changed:  # someone writes the claim between the prepare's read and the status write
            read = driver.preparer.read_claim

            def read_then_change(namespace: str, n: str, read: Any = read) -> dict[str, Any]:
                got = read(namespace, n)
                fake_api.objects.modify(
                    "resourceclaims", n, lambda o: o["metadata"].setdefault("labels", {}).update(x="y"),
                    namespace=namespace,
                )  # fmt: skip
                return dict(got)

            driver.preparer.read_claim = read_then_change
        since = fake_api.log.mark()
        assert kubelet.prepare(DRIVER, ("default", uid, name)).claims[uid].error == ""
        assert driver.preparer.flush_status(5)
        assert [d["device"] for d in _status(fake_api, name)] == ["fpga-0000-3b-00-0"]
        gets = fake_api.log.count(since=since, verb="get", resource=claims)
        patches = fake_api.log.count(since=since, verb="patch", resource=claims)
        # One read for the prepare; a changed claim fails the first patch's test and is
        # read once more.
        assert (gets, patches) == ((2, 2) if changed else (1, 1)), (name, gets, patches)
        unprepared = kubelet.unprepare(DRIVER, ("default", uid, name))
        assert unprepared.claims[uid].error == ""
        # Its status write (entries removed) waits for a quiet moment: done before the
        # next claim's requests are counted.
        assert driver.preparer.flush_status(5)


def test_status_writes_wait_for_a_quiet_moment_and_no_longer_than_the_most_delay() -> None:
    import threading
    import time

    from nfd.dra.claimstatus import StatusQueue

    q = StatusQueue(quiet=0.05, max_delay=5.0)
    done = threading.Event()
    with q.call():
        q.put(done.set)
        assert not done.wait(0.2)  # a call under way
    t = time.monotonic()
    assert done.wait(5)
    assert time.monotonic() - t >= 0.04  # the quiet moment after the call

    q = StatusQueue(quiet=0.05, max_delay=0.2)
    done.clear()
    with q.call():  # a call that never ends (kubelet's calls back to back)
        t = time.monotonic()
        q.put(done.set)
        assert done.wait(5) and time.monotonic() - t >= 0.15

    q = StatusQueue(quiet=0.05, max_delay=60.0)
    done.clear()
    with q.call():
        q.put(done.set)
        assert not done.wait(0.1)
        q.close()  # stopping: the writes queued are made at once
        assert done.wait(5)
