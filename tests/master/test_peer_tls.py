"""Replicas reach each other over real TLS: a follower dials the leader's pod IP, which
the shared serving certificate does not name (it names the Service, as cert-manager
issues one), and verifies it by the Service's name against the replicas' CA. Real
processes on pod-IP-like loopback addresses, the fake API server over real HTTP."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import httpx

from nfd.features import Features
from nfd.master.security import certs
from tests.master.replicas import Pod, dns_only_certificate


def _body(node: str) -> dict[str, object]:
    f = Features()
    f.set_attributes("attr.peer", {"node": node})
    return {"nfdVersion": "peer-tls", "digest": f.digest(), "features": f.to_dict()}


def _wait(cond, what: str, pods: list[Pod], timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {p.name}\n{p.log.read_text()[-2000:]}" for p in pods)
            raise AssertionError(f"timed out: {what}\n{logs}")
        time.sleep(0.1)


def _holds(pod: Pod, node: str, digest: str) -> bool:
    try:
        r = pod.request("GET", f"/api/v1/nodes/{node}")
    except httpx.HTTPError:
        return False
    return r.status_code == 200 and r.json()["digest"] == digest


def test_follower_forwards_and_copies_by_pod_ip_verifying_the_services_name(fake_api, tmp_path: Path):
    # Fails on main: the follower matched its certificate against the pod IP
    # ("hostname '127.0.0.2' doesn't match 'nfd-master.node-feature-discovery.svc'").
    for n in ("n1", "n2", "n3"):
        fake_api.create_node(n)
    kubeconfig = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    tls = dns_only_certificate(tmp_path / "tls")
    ca = str(tls / "ca.crt")
    serving = ("--tls-cert-file", str(tls / "tls.crt"), "--tls-key-file", str(tls / "tls.key"))
    pods: list[Pod] = []

    def pod(name: str, ip: str, peer_ca: str) -> Pod:
        p = Pod(name, ip, kubeconfig, tmp_path, lambda: ca, *serving,
                env={"NFD_MASTER_LEADER__PEER_CA_FILE": peer_ca})  # fmt: skip
        pods.append(p)
        return p

    try:
        leader = pod("nfd-master-a", "127.0.0.2", ca)
        leader.wait_ready()
        _wait(lambda: (leader.readyz() or {}).get("detail") == "leader", "a leads", pods)
        n1 = _body("n1")
        assert leader.request("PUT", "/api/v1/nodes/n1/features", json=n1).status_code == 200

        follower = pod("nfd-master-b", "127.0.0.3", ca)
        follower.wait_ready()
        # The copy: the follower pulled n1, which only the leader was sent.
        _wait(lambda: _holds(follower, "n1", str(n1["digest"])), "b copies n1 from a", pods)
        # The forward: the leader answers a worker's PUT sent to the follower.
        n2 = _body("n2")
        r = follower.request("PUT", "/api/v1/nodes/n2/features", json=n2)
        assert r.status_code == 200 and r.headers["x-nfd-outcome"] == "forwarded", follower.log.read_text()
        assert _holds(leader, "n2", str(n2["digest"]))
        assert "cannot reach the leader" not in follower.log.read_text()

        # A replica that trusts another CA refuses the leader's certificate: it holds.
        other_ca = tmp_path / "other-ca.crt"
        other_ca.write_bytes(certs.new_ca(days=1, now=dt.datetime.now(dt.UTC))[0])
        stranger = pod("nfd-master-c", "127.0.0.4", str(other_ca))
        stranger.wait_ready()  # after three rounds that could not reach the leader
        r = stranger.request("PUT", "/api/v1/nodes/n3/features", json=_body("n3"))
        assert r.status_code == 200 and r.headers["x-nfd-outcome"] == "held"
        log = stranger.log.read_text()
        assert "CERTIFICATE_VERIFY_FAILED" in log and "doesn't match" not in log
        # Four failed tries at least (three rounds, one forward), one line.
        assert log.count("cannot reach the leader") == 1, log
    finally:
        for p in pods:
            p.kill()
