"""``nfd master`` as a process, stopped by SIGTERM (how a Pod is stopped) while its calls
to the API server get no answer: it ends, and exits 0, without waiting for them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.fakeapi import FakeApiServer
from tests.master.test_tls import MasterProc


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
