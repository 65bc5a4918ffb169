"""``nfd master`` as a process, stopped by SIGTERM (how a Pod is stopped) while its calls
to the API server get no answer: it ends, and exits 0, without waiting for them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.fakeapi import FakeApiServer
from tests.master.test_tls import MasterProc

LEASE, NS = "nfd-master.nfd.kubernetes.io", "node-feature-discovery"


def _stops_at_once(m: MasterProc) -> None:
    m.proc.terminate()
    try:
        m.proc.wait(20)
    except subprocess.TimeoutExpired:
        m.proc.kill()
        m.proc.wait()
        raise AssertionError("the master did not end:\n" + "".join(m.log[-20:])) from None
    assert m.proc.returncode == 0, "".join(m.log[-20:])


def test_sigterm_during_the_node_list_ends_the_master(fake_api: FakeApiServer, tmp_path: Path) -> None:
    fake_api.create_node("n1")
    kc = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    listing = fake_api.faults.delay(120, times=1, verb="list", resource="nodes")
    m = MasterProc("--kubeconfig", str(kc), "--no-auth", "--no-tls")
    try:
        m.wait_serving()
        fake_api.wait_for(lambda: listing.remaining == 0, what="the master's LIST of Nodes")
        _stops_at_once(m)
    finally:
        if m.proc.poll() is None:
            m.proc.kill()
            m.proc.wait()


def test_sigterm_while_the_api_server_holds_the_lease_calls(fake_api: FakeApiServer, tmp_path: Path) -> None:
    # The leader steps down on SIGTERM: it releases the Lease, unless the API server
    # does not answer; the Lease then expires as a crashed leader's does.
    kc = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    env = {
        "POD_NAME": "m0",
        "NFD_MASTER_LEADER__RETRY_PERIOD_S": "0.5",
        "NFD_MASTER_KUBE__REQUEST_TIMEOUT_S": "120",
    }
    m = MasterProc(
        "--kubeconfig", str(kc), "--no-auth", "--no-tls", "--enable-leader-election", extra_env=env
    )
    try:
        m.wait_serving()
        fake_api.wait_for(
            lambda: (
                fake_api.objects.exists("leases", LEASE, NS)
                and fake_api.lease(LEASE, NS)["spec"]["holderIdentity"] == "m0"
            ),
            what="m0 leading",
        )
        stuck = fake_api.faults.delay(120, times=5, resource="leases.coordination.k8s.io")
        fake_api.wait_for(lambda: stuck.remaining < 5, what="a renewal under way")
        _stops_at_once(m)
    finally:
        if m.proc.poll() is None:
            m.proc.kill()
            m.proc.wait()
