"""``nfd topology-updater --port``: upstream's two series, served by the real
process, and the scan errors counted when kubelet stops answering."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from podresources_standin import PodResourcesStandIn
from prometheus_client.parser import text_string_to_metric_families
from test_fixture_node import NODE

from nfd import __version__
from nfd.hostroot import HostRoot
from tests.worker.worker_helpers import env, free_port, wait_until


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def scan_errors(port: int) -> float:
    try:
        return scrape(port)["nfd_topology_updater_scan_errors_total"][0][1]
    except OSError:
        return -1.0


def test_metrics_port_serves_build_info_and_counts_scan_errors(
    host: HostRoot, kubelet: PodResourcesStandIn, kubelet_config: Path
) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "nfd", "topology-updater", "--node-name", NODE, "--no-publish",
            "--interval", "0.1", "--port", str(port),
            "--host-root", str(Path(host.sys).parent), "--podresources-socket", str(kubelet.socket),
            "--kubelet-config", str(kubelet_config),
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env(),
    )  # fmt: skip
    try:
        wait_until(lambda: scan_errors(port) == 0.0, what="metrics served")
        got = scrape(port)
        ((labels, started),) = got["nfd_topology_updater_build_info"]
        assert labels == {"version": __version__} and abs(started - time.time()) < 600
        kubelet.stop()  # kubelet gone: every pass from now on fails its scan
        wait_until(lambda: scan_errors(port) >= 2, what="scan errors counted")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_the_metrics_stay_off_prometheus_client() -> None:
    """The updater runs on every node: its metrics must not pull in prometheus-client."""
    code = (
        "import sys; from nfd.topology.metrics import TopologyMetrics; TopologyMetrics().exposition(); "
        "print('prometheus_client' in sys.modules)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), check=True)
    assert p.stdout.strip() == "False"


def test_a_port_in_use_is_one_line(host: HostRoot, kubelet: PodResourcesStandIn) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run(
            [
                sys.executable, "-m", "nfd", "topology-updater", "--node-name", NODE, "--no-publish",
                "--port", str(port), "--podresources-socket", str(kubelet.socket),
                "--kubelet-config", "", "--host-root", str(Path(host.sys).parent),
            ],
            capture_output=True, text=True, env=env(), timeout=60,
        )  # fmt: skip
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert f"cannot serve /metrics on port {port}" in p.stderr
