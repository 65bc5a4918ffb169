"""Helpers for the worker tests: a real master process, worker processes, a host tree."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FEATURES_D = "etc/kubernetes/node-feature-discovery/features.d"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    for k in list(e):
        if k.startswith("NFD_") or k == "NODE_NAME":
            del e[k]
    return e


def wait_until(pred: Callable[[], Any], *, timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll ``pred`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Master:
    """``nfd master --no-publish --no-auth`` on a loopback port; restartable on the
    same port."""

    def __init__(self, tmp: Path, extra: list[str] | None = None, *, tls: bool = False) -> None:
        self.port = free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.tls = tls
        self.extra = list(extra or [])
        self.log = tmp / f"master-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [sys.executable, "-m", "nfd", "master", "--no-publish", "--no-auth"]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port), *self.extra]
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(cmd, env=env(), stdout=logf, stderr=subprocess.STDOUT)
        wait_until(self._ready, timeout=60, what=f"master on {self.url} (log: {self.log})")

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"master exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
        try:
            if self.tls:  # up once it accepts connections; the worker checks the certificate
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return True
            return http_get(self.url + "/healthz", timeout=0.5)[0] == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def node(self, name: str) -> dict[str, Any] | None:
        """The master's view of a node, or None while it has none."""
        status, body = http_get(f"{self.url}/api/v1/nodes/{name}")
        if status == 404:
            return None
        assert status == 200, (status, body)
        return dict(json.loads(body))

    def labels(self, name: str) -> dict[str, str] | None:
        """The node's labels in the master's view, ``feature.node.kubernetes.io/``
        dropped; None while the master holds nothing for the node."""
        view = self.node(name)
        if view is None:
            return None
        prefix = "feature.node.kubernetes.io/"
        return {k.removeprefix(prefix): v for k, v in view["labels"].items()}

    def metric(self, name: str) -> float:
        status, body = http_get(f"{self.url}/metrics")
        assert status == 200
        for line in body.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        return 0.0


class HostTree:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.features_d = root / FEATURES_D
        self.features_d.mkdir(parents=True)

    def write(self, name: str, text: str) -> None:
        # Write then rename, as a ConfigMap update or an editor does: readers never see half a file.
        tmp = self.features_d / f".{name}.tmp"
        tmp.write_text(text)
        tmp.rename(self.features_d / name)


class WorkerProc:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path, port: int) -> None:
        self.proc = proc
        self.log = log
        self.port = port

    def metrics(self) -> dict[str, float]:
        """Sample name{labels} -> value from the worker's /metrics."""
        status, body = http_get(f"http://127.0.0.1:{self.port}/metrics")
        assert status == 200
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def requests(self, kind: str, result: str) -> float:
        key = f'nfd_worker_master_requests_total{{kind="{kind}",result="{result}"}}'
        try:
            return self.metrics().get(key, 0.0)
        except OSError:
            return 0.0

    def output(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _alive_and_serving(w: WorkerProc) -> bool:
    if w.proc.poll() is not None:
        raise AssertionError(f"worker exited {w.proc.returncode}: {w.output()[-2000:]}")
    try:
        return http_get(f"http://127.0.0.1:{w.port}/healthz", timeout=0.5)[0] == 200
    except OSError:
        return False


def run_cli(
    *args: str, timeout: float = 30, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    e = env()
    e.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "nfd", *args], env=e, capture_output=True, text=True, timeout=timeout
    )


def count_lines(text: str, pattern: str) -> int:
    return len(re.findall(pattern, text))
