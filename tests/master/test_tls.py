"""TLS: with a cluster the master makes its CA and serving certificate, keeps them in a
Secret and publishes the CA in a ConfigMap; workers verify the master against it.
Real processes, real TLS, the fake API server over real HTTP."""

from __future__ import annotations

import base64
import datetime as dt
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from nfd.master.security import certs
from tests.worker.worker_helpers import HostTree, run_cli

REPO = Path(__file__).resolve().parents[2]
NS = "node-feature-discovery"


class MasterProc:
    def __init__(self, *args: str, extra_env: dict[str, str] | None = None) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.update(extra_env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nfd", "--log-level", "info", "master", "--host", "127.0.0.1",
             "--port", "0", "--no-rule-watch", *args],
            env=env, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.log: list[str] = []
        self.url = ""

    def wait_serving(self, timeout: float = 60) -> str:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"running on (https?://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
                # keep draining stderr so the master never blocks on a full pipe
                threading.Thread(target=self._drain, daemon=True).start()
                return self.url
        raise AssertionError("master did not start:\n" + "".join(self.log))

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def served_cert(self) -> str:
        return ssl.get_server_certificate(("127.0.0.1", self.port))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            assert self.proc.wait(15) == 0


def cluster_master(fake_api, tmp_path: Path, *extra: str) -> MasterProc:
    kc = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    return MasterProc("--kubeconfig", str(kc), "--no-auth", *extra,
                      extra_env={"POD_NAMESPACE": NS, "TMPDIR": str(tmpdir)})  # fmt: skip


def published_ca(fake_api, tmp_path: Path) -> Path:
    ca = tmp_path / "ca.crt"
    ca.write_text(fake_api.objects.get("configmaps", "nfd-master-ca", NS)["data"]["ca.crt"])
    return ca


def test_worker_verifies_the_certificate_the_master_made(fake_api, tmp_path):
    host = HostTree(tmp_path / "host")
    host.write("f", "tls=yes\n")
    m = cluster_master(fake_api, tmp_path)
    try:
        url = m.wait_serving()
        assert url.startswith("https://")
        secret = fake_api.objects.get("secrets", "nfd-master-tls", NS)
        assert secret["type"] == "kubernetes.io/tls"
        assert {"tls.crt", "tls.key", "ca.crt", "ca.key"} <= set(secret["data"])
        ca = published_ca(fake_api, tmp_path)
        base = [
            "worker",
            "--oneshot",
            "--node-name",
            "n-tls",
            "--sources",
            "local",
            "--host-root",
            str(host.root),
        ]
        for target in (f"https://localhost:{m.port}", url):  # the names and addresses it carries
            r = run_cli(*base, "--master", target, "--ca-file", str(ca))
            assert r.returncode == 0, r.stderr
        wrong = tmp_path / "wrong-ca.crt"
        wrong.write_bytes(certs.new_ca(days=1, now=dt.datetime.now(dt.UTC))[0])
        r = run_cli(*base, "--master", url, "--ca-file", str(wrong))
        assert r.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in r.stderr
        r = run_cli(*base, "--master", url)  # the system's CAs do not know it either
        assert r.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in r.stderr
        # A name the certificate does not carry is refused too, as the worker's client checks.
        ctx = ssl.create_default_context(cafile=str(ca))
        with (
            socket.create_connection(("127.0.0.1", m.port)) as sock,
            pytest.raises(ssl.SSLCertVerificationError),
        ):
            ctx.wrap_socket(sock, server_hostname="nfd-master.elsewhere.svc")
        first = m.served_cert()
        assert [p.name.startswith("nfd-master-tls-") for p in (tmp_path / "tmp").iterdir()] == [True]
    finally:
        m.stop()
    assert list((tmp_path / "tmp").iterdir()) == []  # its private copy of the key is gone
    # A restart (or another replica) serves the stored certificate, not a new one.
    again = cluster_master(fake_api, tmp_path)
    try:
        again.wait_serving()
        assert again.served_cert() == first
    finally:
        again.stop()
    creates = fake_api.log.records(verb="create", resource="secrets")
    assert [r.status for r in creates] == [201]


def test_two_replicas_starting_together_serve_one_certificate(fake_api, tmp_path):
    # Both read "no Secret" before either's create lands (creates are held 3 s): one
    # create wins, the other gets 409 (AlreadyExists) and serves the winner's certificate.
    fake_api.faults.delay(3.0, verb="create", resource="secrets", times=2)
    a, b = cluster_master(fake_api, tmp_path), cluster_master(fake_api, tmp_path)
    try:
        a.wait_serving()
        b.wait_serving()
        assert a.served_cert() == b.served_cert()
        statuses = sorted(r.status for r in fake_api.log.records(verb="create", resource="secrets"))
        assert statuses == [201, 409]
        stored = fake_api.objects.get("secrets", "nfd-master-tls", NS)
        ca = published_ca(fake_api, tmp_path)
        assert base64.b64decode(stored["data"]["ca.crt"]).decode() == ca.read_text()
        for m in (a, b):
            r = httpx.get(
                f"https://localhost:{m.port}/healthz", verify=ssl.create_default_context(cafile=str(ca))
            )
            assert r.status_code == 200
    finally:
        a.stop()
        b.stop()


def test_no_tls_and_no_cluster_serve_plain_http(tmp_path, fake_api):
    m = cluster_master(fake_api, tmp_path, "--no-tls")
    try:
        assert m.wait_serving().startswith("http://")
        assert not fake_api.objects.exists("secrets", "nfd-master-tls", NS)
    finally:
        m.stop()
    local = MasterProc("--no-publish", "--no-auth", extra_env={"KUBECONFIG": str(tmp_path / "none")})
    try:
        assert local.wait_serving().startswith("http://")
        assert any("serving plain HTTP" in line for line in local.log)
    finally:
        local.stop()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_own_certificate_files(tmp_path):
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    m = MasterProc("--no-publish", "--no-auth", "--tls-cert-file", str(cert), "--tls-key-file", str(key))
    try:
        url = m.wait_serving()
        r = httpx.get(f"{url}/healthz", verify=ssl.create_default_context(cafile=str(cert)))
        assert r.status_code == 200 and r.json() == {"status": "ok"}
    finally:
        m.stop()


def test_worker_sends_no_token_in_cleartext_unless_told(tmp_path):
    token = tmp_path / "token"
    token.write_text("t")
    base = ["worker", "--oneshot", "--master", "http://127.0.0.1:9", "--node-name", "n", "--sources", "local",
            "--host-root", str(tmp_path), "--token-file", str(token)]  # fmt: skip
    r = run_cli(*base)
    assert r.returncode == 2 and "cleartext" in r.stderr and "--plain-http" in r.stderr
    assert "Traceback" not in r.stderr
    r = run_cli(*base, "--plain-http")  # allowed: then it only finds nobody listening
    assert r.returncode == 1 and "cleartext" not in r.stderr
