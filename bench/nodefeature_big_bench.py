"""Big NodeFeature objects (upstream #1802: ~130 kB each at 4,000 nodes made informer
syncs time out and labels go): the master's start-up against the fake API server holding
``--nodes`` Nodes and as many NodeFeature objects of ``--kb`` kB; prints figures.

Each Node already carries what a master labelled before (its object's ``spec.labels``,
named in the tracking annotation), and its worker sends its features as the master
starts: a master that wrote before knowing every object would remove those labels.
Times the master's start (it serves once the objects are listed) to every Node
labelled; counts the Node writes that removed an object's label (0 is right); prints the
master's RSS and peak. ``--page-size``: the master's ``kube.list_page_size`` (its
NodeFeature LISTs take at most 50 a page whatever it says).

The objects are the upstream baseline node's features (84 kB of JSON) with extra PCI
devices up to the size asked, plus the node's name: nodes of one hardware kind, as a
fleet is. The fake API server serves each object's JSON as stored; it keeps only the
metadata of its parsed form (10,000 parsed objects would take it ~3 GB).

Usage: python bench/nodefeature_big_bench.py [--nodes 10000] [--kb 130] [--page-size 500]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import master_bench as mb  # noqa: E402  (bench/ is not a package)

NS = "node-feature-discovery"
OBJECT_LABEL = "bench-nf.example.com/from-object"
LABELS_ANN = "nfd.node.kubernetes.io/feature-labels"


def big_features(kb: int) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(mb.BASELINE.read_text())
    devices = raw["instances"]["pci.device"]["elements"]
    template = devices[0]["attributes"]
    i = 0
    while len(json.dumps(raw, separators=(",", ":"))) < kb * 1000:
        extra = dict(template, address=f"0000:{0x80 + i // 32:02x}:{i % 32:02x}.0", device=f"{i:04x}")
        devices.append({"attributes": extra})
        i += 1
    return raw


def node_feature(name: str, features: dict[str, Any]) -> dict[str, Any]:
    f = copy.copy(features)
    f["attributes"] = dict(f["attributes"], **{"system.name": {"elements": {"nodename": name}}})
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {"name": name, "namespace": NS, "labels": {"nfd.node.kubernetes.io/node-name": name}},
        "spec": {"features": f, "labels": {OBJECT_LABEL: "true"}},
    }


def serve_fake(n: int, kb: int) -> None:
    """Child process: the fake API server; prints its URL and the objects' size, then
    answers 'dropped' (Node writes that removed the object's label) and 'labelled'."""
    from tests.fakeapi import FakeApiServer
    from tests.fakeapi.resources import NODE_FEATURES
    from tests.fakeapi.store import Stored

    features = big_features(kb)
    with FakeApiServer() as fake:
        store = fake.store
        size = 0
        for i in range(n):
            name = f"node-{i:05d}"
            fake.create_node(
                name,
                labels={OBJECT_LABEL: "true"},
                annotations={LABELS_ANN: OBJECT_LABEL},
            )
            fake.objects.create("nodefeatures", node_feature(name, features), NS)
            with store.lock:  # keep the JSON served, drop the parsed spec
                objects = store._objects[NODE_FEATURES.key]
                s = objects[(NS, name)]
                slim = Stored({"metadata": s.obj["metadata"]}, s.raw, s.item_raw)
                objects[(NS, name)] = slim
                store._events = [e for e in store._events if e.new is not s]
            size += len(s.raw)
        mark = store.resource_version
        print(fake.url, size // n, flush=True)
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "dropped":
                # Every Node write the master made: one that left the object's label out.
                writes, _ = store.events_after(mark, ["nodes"])
                dropped = sum(
                    1 for e in writes if OBJECT_LABEL not in (e.new.obj["metadata"].get("labels") or {})
                )
                print(json.dumps(dropped), flush=True)
            elif cmd == "labelled":
                done = sum(1 for node in fake.nodes() if "bench-os.ID" in str(node["metadata"].get("labels")))
                print(json.dumps(done), flush=True)
            elif cmd == "quit":
                return


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--kb", type=int, default=130)
    ap.add_argument("--page-size", type=int, default=500)
    ap.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve_fake:
        serve_fake(a.nodes, a.kb)
        return
    t0 = time.monotonic()
    fake = subprocess.Popen(
        [sys.executable, __file__, "--serve-fake", "--nodes", str(a.nodes), "--kb", str(a.kb)],
        env=mb.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert fake.stdout and fake.stdin
    url, size = fake.stdout.readline().split()
    print(f"fake API server: {a.nodes} Nodes and NodeFeature objects of {int(size) / 1000:.0f} kB "
          f"in {time.monotonic() - t0:.0f} s", flush=True)  # fmt: skip

    def ask(cmd: str) -> Any:
        assert fake.stdout and fake.stdin
        fake.stdin.write(cmd + "\n")
        fake.stdin.flush()
        return json.loads(fake.stdout.readline())

    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": url}}],
            "users": [{"name": "fake", "user": {"token": "bench"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        }))  # fmt: skip
        port = mb.free_port()
        os.environ["NFD_MASTER_KUBE__LIST_PAGE_SIZE"] = str(a.page_size)
        t0 = time.monotonic()
        master = mb.start_master(
            port,
            "--kubeconfig",
            str(kubeconfig),
            "--no-tls",
            "--no-rule-watch",
            "--rules-dir",
            str(mb.RULES),
            "--kube-api-qps",
            "5000",
            "--kube-api-burst",
            "5000",
            cpu=None,
            timeout=1800,
        )  # fmt: skip  (it serves once the objects are listed)
        try:
            names = [f"node-{i:05d}" for i in range(a.nodes)]
            asyncio.run(mb.put_all(port, names, mb.features_template()))
            t_put = time.monotonic() - t0
            while mb.metric(port, "nfd_master_node_updates_total") < a.nodes:
                if master.poll() is not None:
                    raise SystemExit("the master exited")
                time.sleep(0.5)
            took = time.monotonic() - t0
            rss, peak = (mb.rss_mb(master.pid), _peak_mib(master.pid))
            print(f"master: {a.nodes} Nodes labelled {took:.1f} s after its start (worker features all "
                  f"sent after {t_put:.1f} s; page size {a.page_size}); CPU {mb.cpu_s(master.pid):.1f} s; "
                  f"RSS {rss:.0f} MiB, peak {peak:.0f} MiB; load average {os.getloadavg()[0]:.1f}",
                  flush=True)  # fmt: skip
            print(
                f"Nodes labelled: {ask('labelled')}; Node writes without the object's label: {ask('dropped')}"
            )
        finally:
            mb.stop(master)
            fake.stdin.write("quit\n")
            fake.stdin.flush()
            fake.wait(60)


def _peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


if __name__ == "__main__":
    main()
