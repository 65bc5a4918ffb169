"""Master replicas as the Deployment runs them: real `nfd master` processes against the
fake API server, each on its own pod-IP-like loopback address (Linux routes all of
127/8 to lo), serving HTTPS with a certificate that names the Service, not the pods.
Clients reach them as workers do, by the Service's name (sent as SNI and verified)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from nfd.master.security import certs

REPO = Path(__file__).resolve().parents[2]
NS = "node-feature-discovery"
SERVICE = f"nfd-master.{NS}.svc"  # the name workers dial; every replica's certificate has it
BY_SERVICE = {"sni_hostname": SERVICE}  # httpx: dial the pod, verify (and send SNI) by this name


def free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


def dns_only_certificate(into: Path, *, names: tuple[str, ...] = (SERVICE, f"nfd-master.{NS}")) -> Path:
    """A CA and a serving certificate whose names are DNS names only (as cert-manager
    issues one for the Service): ``into``/ca.crt, tls.crt, tls.key. Returns ``into``."""
    now = dt.datetime.now(dt.UTC)
    ca_cert, ca_key = certs.new_ca(days=1, now=now)
    cert, key = certs.issue(ca_cert, ca_key, dns_names=list(names), ips=[], days=1, now=now)
    into.mkdir(parents=True, exist_ok=True)
    for name, data in (("ca.crt", ca_cert), ("tls.crt", cert), ("tls.key", key)):
        (into / name).write_bytes(data)
    return into


class Pod:
    """One replica: its own name and IP, leader election on, the Lease naming its pod IP."""

    def __init__(
        self,
        name: str,
        ip: str,
        kubeconfig: Path,
        log_dir: Path,
        ca_file: Callable[[], str | None],
        *args: str,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name, self.ip = name, ip
        self.port = free_port(ip)
        self.url = f"https://{ip}:{self.port}"
        self.ca_file = ca_file
        penv = dict(os.environ, POD_NAME=name, POD_IP=ip, POD_NAMESPACE=NS,
                    PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                    NFD_MASTER_LEADER__RETRY_PERIOD_S="0.5",
                    NFD_MASTER_LEADER__REPLICATE_INTERVAL_S="0.5", **(env or {}))  # fmt: skip
        cmd = [sys.executable, "-m", "nfd", "--log-level", "info", "master", "--host", ip,
               "--port", str(self.port), "--kubeconfig", str(kubeconfig), "--no-auth",
               "--enable-leader-election", "--no-rule-watch", *args]  # fmt: skip
        self.log = log_dir / f"{name}.log"
        with self.log.open("w") as f:
            self.proc = subprocess.Popen(cmd, env=penv, stderr=f, stdout=f)

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """As a worker sends it through the Service: verified against the CA, by name."""
        ca = self.ca_file()
        if ca is None:
            raise httpx.ConnectError("no CA published yet")
        with httpx.Client(verify=ssl.create_default_context(cafile=ca), timeout=kw.pop("timeout", 10)) as c:
            return c.request(method, self.url + path, extensions=BY_SERVICE, **kw)

    def readyz(self) -> dict[str, Any] | None:
        try:
            r = self.request("GET", "/readyz", timeout=2)
        except httpx.HTTPError:
            return None
        return r.json() if r.status_code == 200 else None

    def wait_ready(self, timeout: float = 180) -> None:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.readyz() is not None:
                return
            assert self.proc.poll() is None, self.log.read_text()
            time.sleep(0.1)
        raise AssertionError(f"{self.name} not Ready:\n{self.log.read_text()[-3000:]}")

    def drain(self) -> int:
        """What eviction does: SIGTERM, then wait for the exit."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
