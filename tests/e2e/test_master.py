"""``nfd master`` end to end: the real command as a process, the real kubernetes client,
and the ``e2e`` cluster (the fake API server, or a real cluster with
NFD_E2E_REAL_CLUSTER=1; see tests/e2e/conftest.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from nfd.features import Features

REPO = Path(__file__).resolve().parents[2]
FNS = "feature.node.kubernetes.io"

RULES = textwrap.dedent("""
    apiVersion: nfd.k8s-sigs.io/v1alpha1
    kind: NodeFeatureRule
    metadata: {name: e2e-rules}
    spec:
      rules:
        - name: accelerated
          labels: {"e2e-accelerated": "true"}
          extendedResources: {"e2e-widgets": "@attr.e2e.widgets", "nvidia.com/gpu": "8"}
          matchFeatures:
            - feature: attr.e2e
              matchExpressions: {widgets: {op: Exists}}
        - name: plain
          labels: {"e2e-kernel": "@attr.e2e.kernel"}
          matchFeatures:
            - feature: attr.e2e
              matchExpressions: {kernel: {op: Exists}}
""")


class Master:
    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=10)

    def put(self, node: str, attrs: dict[str, str], **body: Any) -> httpx.Response:
        f = Features()
        f.set_attributes("attr.e2e", attrs)
        payload = {"nfdVersion": "e2e", "digest": f.digest(), "features": f.to_dict(), **body}
        return self.http.put(f"/api/v1/nodes/{node}/features", json=payload)

    def view(self, node: str) -> dict[str, Any]:
        return self.http.get(f"/api/v1/nodes/{node}").json()  # type: ignore[no-any-return]

    def wait_in_sync(self, node: str, timeout: float = 15) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.view(node)
            if v.get("inSync"):
                return v
            time.sleep(0.05)
        raise AssertionError(f"{node} not in sync: {self.view(node)}")


@contextmanager
def master(e2e: Any, tmp_path: Path, *extra: str) -> Iterator[Master]:
    rules = tmp_path / "rules"
    rules.mkdir(exist_ok=True)
    (rules / "e2e.yaml").write_text(RULES)
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "nfd", "--log-level", "info", "master", "--host", "127.0.0.1", "--port", "0",
           "--kubeconfig", str(e2e.kubeconfig), "--no-auth", "--no-tls", "--no-rule-watch", "--rules-dir", str(rules), *extra]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    url = None
    log: list[str] = []
    deadline = time.monotonic() + 30
    while url is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        log.append(line)
        m = re.search(r"running on (http://127\.0\.0\.1:\d+)", line)
        url = m.group(1) if m else None
    if url is None:
        proc.kill()
        raise AssertionError("master did not start:\n" + "".join(log))
    m = Master(proc, url)
    try:
        yield m
    finally:
        m.http.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)


def node_of(e2e: Any, name: str) -> Any:
    return e2e.core_v1().read_node(name)


def test_labels_and_rules_reach_the_node_foreign_labels_stay(e2e, tmp_path):
    n = e2e.make_node("a", labels={"team.example.com/owner": "ops"})
    with master(e2e, tmp_path) as m:
        body = m.put(n, {"kernel": "6.1", "widgets": "3"}).json()
        assert body["labels"] == {f"{FNS}/e2e-accelerated": "true", f"{FNS}/e2e-kernel": "6.1"}
        m.wait_in_sync(n)
        labels = node_of(e2e, n).metadata.labels
        assert labels[f"{FNS}/e2e-kernel"] == "6.1" and labels[f"{FNS}/e2e-accelerated"] == "true"
        assert labels["team.example.com/owner"] == "ops"

        m.put(n, {"kernel": "6.1"})  # no widgets: that rule's label goes, nothing else
        m.wait_in_sync(n)
        labels = node_of(e2e, n).metadata.labels
        assert f"{FNS}/e2e-accelerated" not in labels
        assert labels[f"{FNS}/e2e-kernel"] == "6.1" and labels["team.example.com/owner"] == "ops"


def test_node_selector_finds_the_labelled_node(e2e, tmp_path):
    gpu, plain = e2e.make_node("gpu"), e2e.make_node("plain")
    with master(e2e, tmp_path) as m:
        m.put(gpu, {"widgets": "1"})
        m.put(plain, {"kernel": "6.1"})
        m.wait_in_sync(gpu)
        m.wait_in_sync(plain)
    # What a Pod with nodeSelector {feature.node.kubernetes.io/e2e-accelerated: "true"} needs.
    got = e2e.core_v1().list_node(
        label_selector=f"{FNS}/e2e-accelerated=true,e2e.nfd.node.kubernetes.io/run={e2e.run_id}"
    )
    assert [x.metadata.name for x in got.items] == [gpu]


def test_extended_resources_and_device_plugin_names(e2e, tmp_path):
    n = e2e.make_node("er", capacity={"nvidia.com/gpu": "4"})
    with master(e2e, tmp_path) as m:
        body = m.put(n, {"widgets": "3"}, devicePluginResources=["nvidia.com/gpu"]).json()
        assert "nvidia.com/gpu" in body["rejected"]["extendedResources"]
        m.wait_in_sync(n)
        st = node_of(e2e, n).status
        assert st.capacity[f"{FNS}/e2e-widgets"] == "3" and st.allocatable[f"{FNS}/e2e-widgets"] == "3"
        assert st.capacity["nvidia.com/gpu"] == "4"  # the device plugin's number, untouched


def test_restart_changes_nothing(e2e, tmp_path):
    n = e2e.make_node("restart", labels={"team.example.com/owner": "ops"})
    with master(e2e, tmp_path) as m:
        m.put(n, {"kernel": "6.1", "widgets": "2"})
        m.wait_in_sync(n)
    before = node_of(e2e, n)
    with master(e2e, tmp_path) as m2:
        m2.put(n, {"kernel": "6.1", "widgets": "2"})
        m2.wait_in_sync(n)
        time.sleep(0.3)
    after = node_of(e2e, n)
    # Not removed and re-added (upstream #2408): the Node was not written at all.
    assert after.metadata.resource_version == before.metadata.resource_version
    assert after.metadata.labels == before.metadata.labels


def test_resources_come_back_after_the_node_is_recreated(e2e, tmp_path):
    n = e2e.make_node("recreate")
    with master(e2e, tmp_path, "--resync-period", "500ms") as m:
        m.put(n, {"widgets": "5"})
        m.wait_in_sync(n)
        e2e.core_v1().delete_node(n)
        e2e._made.remove(n)
        e2e.make_node("recreate")  # kubelet registers it again: no labels, no resources
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            node = node_of(e2e, n)
            if (node.status.capacity or {}).get(f"{FNS}/e2e-widgets") == "5":
                break
            time.sleep(0.1)
        assert node.status.capacity[f"{FNS}/e2e-widgets"] == "5"
        assert node.status.allocatable[f"{FNS}/e2e-widgets"] == "5"
        assert node.metadata.labels[f"{FNS}/e2e-accelerated"] == "true"


@pytest.mark.fake_only
def test_no_write_when_nothing_changed(e2e, tmp_path):
    n = e2e.make_node("quiet")
    with master(e2e, tmp_path) as m:
        digest = m.put(n, {"kernel": "6.1"}).json()["digest"]
        m.wait_in_sync(n)
        mark = e2e.fake.log.mark()
        for _ in range(10):
            assert m.put(n, {"kernel": "6.1"}).status_code == 200
            assert m.http.post(f"/api/v1/nodes/{n}/heartbeat", json={"digest": digest}).json() == {
                "known": True
            }
        time.sleep(0.3)
        assert e2e.fake.log.writes(since=mark) == []


def test_sigterm_shuts_down_cleanly(e2e, tmp_path):
    with master(e2e, tmp_path) as m:
        assert m.http.get("/readyz").status_code == 200
        m.proc.send_signal(signal.SIGTERM)
        assert m.proc.wait(15) == 0
