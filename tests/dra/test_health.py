"""One health source: a device turning unhealthy (seen by the health monitor) taints it
in its slice, reaches kubelet's health stream, posts a Node event and moves the
metrics; healthy again undoes each. And the driver's kubelet-facing metrics."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from deviceplugin.fixtures import FixtureHost
from dra.claims import DRIVER, NODE, allocate, create_claim, published
from dra.conftest import FPGA_CONFIG
from dra.kubelet_dra import DraKubelet, wait_for
from prometheus_client.parser import text_string_to_metric_families

from nfd.dra.driver import DraDriver
from tests.fakeapi import FakeApiServer

DEV = "fpga-0000-3b-00-0"
REPO = Path(__file__).resolve().parents[2]
NS = "node-feature-discovery"


def metric(driver: DraDriver, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(driver.registry.exposition().decode()):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    return None


def node_events(fake_api: FakeApiServer) -> list[dict[str, Any]]:
    return [
        e
        for e in fake_api.objects.list("events", "default")
        if e["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": NODE}
    ]


def test_one_health_event_reaches_slice_stream_node_events_and_metrics(
    start_driver: Callable[..., DraDriver], kubelet: DraKubelet, fx: FixtureHost, fake_api: FakeApiServer
) -> None:
    driver = start_driver()
    assert wait_for(lambda: DRIVER in kubelet.drivers and DEV in published(fake_api))
    watch = kubelet.watch_health(DRIVER)
    try:
        # On connect: every device, healthy.
        assert wait_for(lambda: watch.reports)
        assert watch.reports[0] == {name: ("HEALTHY", "") for name in driver.inventory.by_name}
        assert all(t > 0 for t in watch.times)
        assert metric(driver, "nfd_devices_unhealthy", resource="example.com/fpga") == 0
        assert metric(driver, "nfd_devices", resource="example.com/fpga") == 4

        fx.unbind("0000:3b:00.0")
        assert wait_for(lambda: published(fake_api)[DEV].get("taints"))
        [taint] = published(fake_api)[DEV]["taints"]
        assert (taint["key"], taint["value"], taint["effect"]) == (
            "nfd.node.kubernetes.io/unhealthy",
            "driver-vfio-pci-unbound",
            "NoSchedule",
        )
        assert wait_for(lambda: watch.reports[-1][DEV] == ("UNHEALTHY", "driver vfio-pci unbound"))
        assert {n: h for n, (h, _m) in watch.reports[-1].items() if n != DEV} == {
            n: "HEALTHY" for n in driver.inventory.by_name if n != DEV
        }
        assert wait_for(lambda: len(node_events(fake_api)) == 1)
        [event] = node_events(fake_api)
        assert (event["reason"], event["type"]) == ("DeviceUnhealthy", "Warning")
        assert "0000:3b:00.0" in event["message"] and "driver vfio-pci unbound" in event["message"]
        assert metric(driver, "nfd_devices_unhealthy", resource="example.com/fpga") == 1
        assert (
            metric(driver, "nfd_device_health_changes_total", resource="example.com/fpga", health="unhealthy")
            == 1
        )

        fx.bind("0000:3b:00.0", "vfio-pci")
        assert wait_for(lambda: "taints" not in published(fake_api)[DEV])
        assert wait_for(lambda: watch.reports[-1][DEV] == ("HEALTHY", ""))
        assert wait_for(lambda: len(node_events(fake_api)) == 2)
        assert sorted((e["reason"], e["type"]) for e in node_events(fake_api)) == [
            ("DeviceHealthy", "Normal"),
            ("DeviceUnhealthy", "Warning"),
        ]
        assert metric(driver, "nfd_devices_unhealthy", resource="example.com/fpga") == 0
    finally:
        watch.cancel()
    assert wait_for(lambda: driver.health_stream.streams == 0)


def test_no_execute_from_the_config(
    start_driver: Callable[..., DraDriver], fx: FixtureHost, fake_api: FakeApiServer
) -> None:
    start_driver({**FPGA_CONFIG, "dra": {"taintEffect": "NoExecute"}})
    assert wait_for(lambda: DEV in published(fake_api))
    fx.unbind("0000:3b:00.0")
    assert wait_for(lambda: published(fake_api)[DEV].get("taints"))
    assert published(fake_api)[DEV]["taints"][0]["effect"] == "NoExecute"


def test_without_device_taints_on_the_server_an_unhealthy_device_is_withdrawn(
    start_driver: Callable[..., DraDriver],
    fx: FixtureHost,
    fake_api: FakeApiServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_api.feature_gates["DRADeviceTaints"] = False
    driver = start_driver()
    assert wait_for(lambda: DEV in published(fake_api))
    assert driver.publisher.taints_served is None  # nothing tainted yet: not known
    with caplog.at_level(logging.WARNING, logger="nfd.dra"):
        fx.unbind("0000:3b:00.0")
        assert wait_for(lambda: DEV not in published(fake_api) and len(published(fake_api)) == 7)
    assert driver.publisher.taints_served is False
    assert "dropped the device taints" in caplog.text
    assert not any(d.get("taints") for d in published(fake_api).values())
    fx.bind("0000:3b:00.0", "vfio-pci")
    assert wait_for(lambda: DEV in published(fake_api))


def test_the_shipped_rbac_lets_the_driver_post_node_events(
    start_driver: Callable[..., DraDriver], fx: FixtureHost, fake_api: FakeApiServer
) -> None:
    rbac = [d for d in yaml.safe_load_all((REPO / "deploy/components/dra/dra-rbac.yaml").read_text()) if d]
    fake_api.authz.load_rbac(rbac, NS)
    fake_api.enforce_rbac = True
    token = fake_api.tokens.issue_service_account(NS, "nfd-dra", node_name=NODE)
    since = fake_api.log.mark()
    start_driver(token=token)
    assert wait_for(lambda: DEV in published(fake_api))
    fx.unbind("0000:3b:00.0")
    assert wait_for(lambda: len(node_events(fake_api)) == 1)
    assert fake_api.log.count(since=since, status=403) == 0


def test_events_forbidden_are_given_up_once(
    start_driver: Callable[..., DraDriver],
    fx: FixtureHost,
    fake_api: FakeApiServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_api.faults.fail(403, times=None, verb="create", resource="events")
    driver = start_driver()
    assert wait_for(lambda: DEV in published(fake_api))
    with caplog.at_level(logging.WARNING, logger="nfd.dra"):
        fx.unbind("0000:3b:00.0")
        assert wait_for(lambda: published(fake_api)[DEV].get("taints"))
        fx.bind("0000:3b:00.0", "vfio-pci")
        assert wait_for(lambda: "taints" not in published(fake_api)[DEV])
        assert driver.events is not None
        driver.events.stop()  # posts what is queued, then ends
    assert fake_api.log.count(verb="create", resource="events") == 1
    assert caplog.text.count("may not create Events") == 1


def test_kubelet_request_metrics(
    start_driver: Callable[..., DraDriver], kubelet: DraKubelet, fake_api: FakeApiServer, fake_api_client: Any
) -> None:
    driver = start_driver()
    assert wait_for(lambda: DRIVER in kubelet.drivers and DEV in published(fake_api))
    claim = create_claim(fake_api_client, "default", "c1", device_class="fpga.example.com")
    allocate(fake_api_client, claim, [(DRIVER, NODE, DEV)])
    bad = create_claim(fake_api_client, "default", "c2", device_class="fpga.example.com")  # not allocated
    uid, bad_uid = claim["metadata"]["uid"], bad["metadata"]["uid"]
    resp = kubelet.prepare(DRIVER, ("default", uid, "c1"), ("default", bad_uid, "c2"))
    assert resp.claims[uid].error == "" and "not allocated" in resp.claims[bad_uid].error
    assert metric(driver, "nfd_dra_requests_total", operation="prepare") == 2
    assert metric(driver, "nfd_dra_errors_total", operation="prepare") == 1
    assert metric(driver, "nfd_dra_request_duration_seconds_count", operation="prepare") == 2
    assert metric(driver, "nfd_dra_requests_in_flight", operation="prepare") == 0
    assert metric(driver, "nfd_dra_prepared_devices") == 1
    assert kubelet.unprepare(DRIVER, ("default", uid, "c1")).claims[uid].error == ""
    assert metric(driver, "nfd_dra_requests_total", operation="unprepare") == 1
    assert metric(driver, "nfd_dra_errors_total", operation="unprepare") == 0
    assert metric(driver, "nfd_dra_prepared_devices") == 0
