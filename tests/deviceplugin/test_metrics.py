"""The device plugin's series: kubelet's calls counted by operation, refusals by code,
devices handed out, devices advertised and unhealthy; in-process against the kubelet
stand-in, and served by ``nfd device-plugin --port``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import grpc
import pytest
import yaml
from kubelet_standin import KubeletStandIn, wait_for
from prometheus_client.parser import text_string_to_metric_families

from nfd import __version__
from nfd.deviceplugin.metrics import DevicePluginMetrics

ROOT = Path(__file__).resolve().parents[2]
FPGA = {
    "name": "example.com/fpga",
    "pci": {"vendor": "1172"},
    "deviceNodes": ["/dev/vfio/{iommu_group}"],
}
R = "example.com/fpga"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def req(op: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("nfd_deviceplugin_requests_total", (("operation", op), ("resource", R)))


def test_calls_errors_allocations_and_health_are_counted(start_plugin, kubelet: KubeletStandIn, fx) -> None:
    metrics = DevicePluginMetrics()
    manager = start_plugin({"resources": [FPGA]}, metrics=metrics)
    manager.health.subscribe(metrics.health.changed)  # as the command does
    endpoint = kubelet.registered().endpoint
    with kubelet.client(endpoint) as c:
        w = c.watch()
        w.until(lambda s: s.get("0000:3c:00.0") == "Healthy")
        assert c.preferred(["0000:3b:00.0", "0000:3c:00.0"], [], 1)
        c.allocate(["0000:3b:00.0"], ["0000:af:00.0", "0000:b0:00.0"])
        (fx.root / "dev/vfio/13").unlink()  # 0000:3c:00.0 loses its device node
        with pytest.raises(grpc.RpcError):
            c.allocate(["0000:3c:00.0"])
        w.until(lambda s: s.get("0000:3c:00.0") == "Unhealthy")
        w.cancel()
    got = samples(metrics.exposition().decode())
    assert got[req("list_and_watch")] == 1
    assert got[req("get_preferred_allocation")] == 1
    assert got[req("allocate")] == 2
    assert (
        got[
            (
                "nfd_deviceplugin_request_errors_total",
                (("code", "FAILED_PRECONDITION"), ("operation", "allocate"), ("resource", R)),
            )
        ]
        == 1
    )
    assert got[("nfd_deviceplugin_devices_allocated_total", (("resource", R),))] == 3
    # The health monitor's series, in the same registry.
    assert got[("nfd_devices", (("resource", R),))] == 4
    assert got[("nfd_devices_unhealthy", (("resource", R),))] == 1
    assert got[("nfd_deviceplugin_build_info", (("version", __version__),))] > 0


def test_port_serves_them_from_the_process(fx, plugin_dir: Path, tmp_path: Path) -> None:
    import socket

    feats = tmp_path / "features.json"
    feats.write_text(fx.features().to_json())
    cfg = tmp_path / "dp.yaml"
    cfg.write_text(yaml.safe_dump({"resources": [FPGA]}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    k = KubeletStandIn(plugin_dir)
    k.start()
    cmd = [
        sys.executable, "-m", "nfd", "device-plugin", "--config", str(cfg), "--plugin-dir", str(plugin_dir),
        "--features", str(feats), "--host-root", str(fx.root), "--port", str(port),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        endpoint = k.registered(timeout=20).endpoint
        with k.client(endpoint) as c:
            c.allocate(["0000:3b:00.0"])

        def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    return samples(r.read().decode())
            except OSError:
                return {}

        assert wait_for(lambda: scrape().get(req("allocate")) == 1)
        got = scrape()
        assert got[("nfd_deviceplugin_devices_allocated_total", (("resource", R),))] == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        k.stop()
