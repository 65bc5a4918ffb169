"""``nfd topology-updater`` as a process, stopped by SIGTERM (how a Pod is stopped) in the
middle of its work: it ends at once and exits 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from podresources_standin import PodResourcesStandIn
from test_fixture_node import NODE

from nfd.hostroot import HostRoot
from nfd.topology.api.v1 import api_pb2 as pb
from nfd.topology.updater import Settings, Updater
from tests.fakeapi import FakeApiServer
from tests.worker.worker_helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _start(
    fake_api: FakeApiServer, host: HostRoot, kubelet: PodResourcesStandIn, tmp: Path
) -> subprocess.Popen[str]:
    kubeconfig = fake_api.write_kubeconfig(tmp / "kubeconfig")
    return subprocess.Popen(
        [sys.executable, "-m", "nfd", "topology-updater", "--node-name", NODE, "--kubeconfig", str(kubeconfig),
         "--host-root", str(Path(host.sys).parent), "--podresources-socket", str(kubelet.socket),
         "--kubelet-config", "", "--interval", "1"],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _stops_at_once(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        _out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
        raise AssertionError(f"the updater did not end:\n{err[-2000:]}") from None
    assert proc.returncode == 0, err[-2000:]


def test_sigterm_while_waiting_for_the_first_pod_listing(
    fake_api: FakeApiServer, host: HostRoot, kubelet: PodResourcesStandIn, tmp_path: Path
) -> None:
    fake_api.create_node(NODE)
    listing = fake_api.faults.delay(120, times=1, verb="list", resource="pods")
    proc = _start(fake_api, host, kubelet, tmp_path)
    try:
        fake_api.wait_for(lambda: listing.remaining == 0, what="the updater's LIST of pods")
        _stops_at_once(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_during_a_write_the_api_server_does_not_answer(
    fake_api: FakeApiServer, host: HostRoot, kubelet: PodResourcesStandIn, tmp_path: Path
) -> None:
    fake_api.create_node(NODE)
    proc = _start(fake_api, host, kubelet, tmp_path)
    try:
        fake_api.wait_for(
            lambda: fake_api.objects.exists("noderesourcetopologies", NODE), what="the first write"
        )
        put = fake_api.faults.delay(120, times=2, method="PUT", path="/noderesourcetopologies/")
        kubelet.allocatable = pb.AllocatableResourcesResponse()  # the next pass writes
        fake_api.wait_for(lambda: put.remaining < 2, what="the updater's PUT")
        _stops_at_once(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_stop_during_a_podresources_call_ends_the_pass_at_once(
    host: HostRoot, kubelet: PodResourcesStandIn
) -> None:
    # SIGTERM calls stop(); kubelet, stuck, answers nothing meanwhile.
    updater = Updater(Settings(NODE, host, str(kubelet.socket), None, interval=1), publish=lambda _obj: False)
    updater.podresources.timeout = 120
    kubelet.hold = threading.Event()
    loop = threading.Thread(target=updater.run, daemon=True)
    loop.start()
    try:
        wait_until(lambda: kubelet.calls["GetAllocatableResources"] == 1, what="a call to kubelet")
        updater.stop()
        loop.join(10)
        assert not loop.is_alive(), "the pass waits for kubelet's answer"
    finally:
        kubelet.hold.set()
    assert updater.last is None
