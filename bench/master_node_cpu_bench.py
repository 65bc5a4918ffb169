"""The master's CPU per new node, piece by piece, in process: each piece the way the
master does it now next to the way it did before (measured in the same run), on the
nodes of bench/master_bench.py (the upstream baseline's 50 kB of features plus the
node's name) and the rules of bench/data.

- the features PUT's body: JSON then the pydantic model (before), or one pass of
  pydantic-core against the model's TypedDicts (``jsonbody.parse_features``);
- the node's decision (``MasterService.submit``: the canonical encoding, the store), for
  scale; unchanged;
- the JSON Patch body: ``json.dumps`` (the REST client's, before) or pydantic-core;
- the PATCH answer, the Node watch event and (apart: once a Node per LIST, at the
  master's start and each resync, not per write) a page of a Node LIST: a labelled Node as the API server answers
  it (a kubelet-less Node as bench/master_realcluster_bench.py creates, the labels, the
  tracking annotation, managedFields naming each label), parsed whole (before) or for
  what the master reads (``nfd.master.core.nodeview``).

CPU seconds of this process (``time.process_time``), the best of ``--rounds``; prints
microseconds a node and each piece's ratio, and asserts nothing.

Usage: python bench/master_node_cpu_bench.py [--nodes 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import master_bench as mb  # bench/ is not a package
from pydantic_core import to_json

from nfd.master.api import jsonbody
from nfd.master.api.models import FeaturesRequest
from nfd.master.core import nodeview
from nfd.master.core.settings import MasterSettings
from nfd.master.publishing.patches import node_patch, observe
from nfd.master.runtime import build_runtime


def best(fn: Callable[[], Any], rounds: int, n: int) -> float:
    """Microseconds a node, the best of ``rounds``."""
    out = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        out = min(out, (time.process_time() - t0) / n * 1e6)
    return out


def labelled_node(name: str, ops: list[dict[str, Any]]) -> bytes:
    """The Node as the API server answers the first write of ``ops`` to a bench Node."""
    labels = {"bench.nfd.node.kubernetes.io/run": "r", "kubernetes.io/hostname": name}
    annotations = {"node.alpha.kubernetes.io/ttl": "0"}
    for op in ops:
        path = op["path"].split("/")
        if len(path) == 4 and path[1] == "metadata":
            key = path[3].replace("~1", "/").replace("~0", "~")
            (labels if path[2] == "labels" else annotations)[key] = op["value"]
    fields = {
        "f:metadata": {
            "f:labels": {f"f:{k}": {} for k in labels},
            "f:annotations": {f"f:{k}": {} for k in annotations},
        }
    }
    conditions = [
        {"type": t, "status": "Unknown", "reason": "NodeStatusNeverUpdated", "message": "bench Node, no kubelet",
         "lastHeartbeatTime": None, "lastTransitionTime": "2026-01-01T00:00:00Z"}
        for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
    ]  # fmt: skip
    node = {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": "0b6cfd1e-3c5a-4d55-9a8e-5b1f0e6f6a11",
            "resourceVersion": "123456",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": labels,
            "annotations": annotations,
            "managedFields": [
                {"manager": "python", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:taints": {}}, "f:status": {"f:conditions": {}}}},
                {"manager": "nfd-master", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-01-01T00:00:10Z", "fieldsType": "FieldsV1", "fieldsV1": fields},
            ],
        },
        "spec": {
            "taints": [
                {"key": "bench.nfd.node.kubernetes.io/fake", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
            ]
        },
        "status": {"conditions": conditions, "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                   "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                                "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "",
                                "kubeProxyVersion": "", "operatingSystem": "", "architecture": ""}},
    }  # fmt: skip
    return json.dumps(node, separators=(",", ":")).encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()

    settings = MasterSettings()
    settings.auth.enabled = False
    settings.kube.publish = False
    settings.rules.watch = False
    settings.rules.rules_dir = mb.RULES
    rt = build_runtime(settings)

    async def rules() -> None:  # as the master's start gives them to the service
        rt.service.set_rules(rt.rules.rulesets())

    asyncio.run(rules())
    template = mb.features_template()
    names = [f"node-{i:05d}" for i in range(a.nodes)]
    bodies = [mb.node_body(template, n) for n in names]

    def two_steps() -> None:
        for b in bodies:
            jsonbody.check(FeaturesRequest, jsonbody.parse(b))

    def one_pass() -> None:
        for b in bodies:
            jsonbody.parse_features(b)

    parsed = [jsonbody.parse_features(b) for b in bodies]

    def submit() -> None:  # a fresh store each round: every node is new
        rt.service.store.nodes.clear()
        for n, d in zip(names, parsed, strict=True):
            rt.service.submit(n, features=d["features"], nfd_version=d.get("nfdVersion") or "")

    t_submit = best(submit, a.rounds, a.nodes)
    recs = [rt.service.store.get(n) for n in names]
    ops = [node_patch(r.decision, observe({"metadata": {"name": r.name}}, r.decision)) for r in recs if r]
    answers = [labelled_node(n, o) for n, o in zip(names, ops, strict=True)]
    events = [b'{"type":"MODIFIED","object":' + x + b"}" for x in answers]

    def each(fn: Callable[[Any], Any], items: list[Any]) -> Callable[[], None]:
        def run() -> None:
            for x in items:
                fn(x)

        return run

    pieces = [
        ("features PUT body", best(two_steps, a.rounds, a.nodes), best(one_pass, a.rounds, a.nodes)),
        ("decision (submit, unchanged)", t_submit, t_submit),
        ("JSON Patch body", best(each(json.dumps, ops), a.rounds, a.nodes), best(each(to_json, ops), a.rounds, a.nodes)),
        ("PATCH answer", best(each(json.loads, answers), a.rounds, a.nodes),
         best(each(nodeview.node, answers), a.rounds, a.nodes)),
        ("Node watch event", best(each(json.loads, events), a.rounds, a.nodes),
         best(each(nodeview.event, events), a.rounds, a.nodes)),
    ]  # fmt: skip
    print(f"{a.nodes} nodes; {len(bodies[0])} B of features, {len(ops[0])} patch ops "
          f"({len(to_json(ops[0]))} B), a {len(answers[0])} B answer; CPU, best of {a.rounds}")  # fmt: skip
    print(f"{'piece':32} {'before':>10} {'now':>10} {'now/before':>11}")
    for what, before, now in pieces:
        print(f"{what:32} {before:8.0f}us {now:8.0f}us {now / before:11.2f}")
    tb, tn = sum(p[1] for p in pieces), sum(p[2] for p in pieces)
    print(f"{'these pieces together':32} {tb:8.0f}us {tn:8.0f}us {tn / tb:11.2f}")
    # Pages of 500 (the master's list page size), of the Nodes as nfd found them.
    plain = [labelled_node(n, []) for n in names]
    pages = [b'{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":['
             + b",".join(plain[i:i + 500]) + b"]}" for i in range(0, len(plain), 500)]  # fmt: skip
    lb, ln = (
        best(each(json.loads, pages), a.rounds, a.nodes),
        best(each(nodeview.page, pages), a.rounds, a.nodes),
    )
    print(f"{'a Node in a LIST page (apart)':32} {lb:8.0f}us {ln:8.0f}us {ln / lb:11.2f}")


if __name__ == "__main__":
    main()
