"""What one Node write costs the API server, by patch type: a JSON Patch of one op per
label (``add /metadata/labels/<name>``) against the one JSON Merge Patch of the same
labels, on a real cluster given a kubeconfig.

Run on the machine that runs the API server and etcd (their CPU is read from /proc):
``python bench/apiserver_patch_bench.py --kubeconfig FILE [--nodes 500] [--rounds 3]``.
Creates its own Nodes (as ``master_realcluster_bench.py`` does: without kubelets,
labelled ``bench.nfd.node.kubernetes.io/run``) and deletes them at the end; before each
pass the labels are taken off again (untimed). Rounds alternate which type goes first.
Prints each pass's rate, the API server's and etcd's CPU seconds, and the client's."""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
import master_realcluster_bench as rb

LABELS = 178  # as many as a node of bench/data gets from nfd


def server_pids() -> list[int]:
    pids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if Path(f"/proc/{p}/comm").read_text().strip() in ("kube-apiserver", "etcd"):
                    pids.append(int(p))
            except OSError:
                pass
    return pids


def cpu_s(pids: list[int]) -> float:
    total = 0
    for p in pids:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    env_conf = os.environ.get("KUBECONFIG")
    ap.add_argument("--kubeconfig", type=Path, default=env_conf, required=not env_conf)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--inflight", type=int, default=64)
    a = ap.parse_args()
    pids = server_pids()
    if not pids:
        raise SystemExit("no kube-apiserver or etcd process on this machine")
    api = rb.Api(a.kubeconfig, a.inflight)
    run = uuid.uuid4().hex[:8]
    names = [f"nfd-patch-{run}-{i:05d}" for i in range(a.nodes)]
    labels = {f"feature.node.kubernetes.io/bench-{i:03d}.example": "true" for i in range(LABELS)}
    merge = {"metadata": {"labels": labels}}
    ops = [{"op": "add", "path": f"/metadata/labels/{k.replace('~', '~0').replace('/', '~1')}", "value": v}
           for k, v in labels.items()]  # fmt: skip
    bodies = {"merge": (merge, "application/merge-patch+json"), "json": (ops, "application/json-patch+json")}
    with rb.bench_nodes(api, run, names):
        waited = rb.wait_quiet(api, f"{rb.RUN_LABEL}={run}", 5, 300)
        print(f"{a.nodes} Nodes created, quiet after {waited:.0f} s", flush=True)
        for r in range(a.rounds):
            for kind in ("merge", "json") if r % 2 == 0 else ("json", "merge"):
                rb.strip(api, names, labels)
                time.sleep(3)
                body, content_type = bodies[kind]
                server, client = cpu_s(pids), time.process_time()
                took = rb.parallel(
                    lambda n, b=body, c=content_type: api.request("PATCH", f"/api/v1/nodes/{quote(n)}", b, c),
                    names,
                    a.inflight,
                )
                print(
                    f"round {r + 1}, {kind} patch: {a.nodes / took:.0f} nodes/s, API server and etcd CPU "
                    f"{cpu_s(pids) - server:.2f} s, client CPU {time.process_time() - client:.2f} s; "
                    f"load average {os.getloadavg()[0]:.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
