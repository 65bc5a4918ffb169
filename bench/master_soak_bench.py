"""nfd master under churn for a long while, against the fake API server; prints its RSS.

A fleet of ``--nodes`` nodes is labelled, then every second, for ``--minutes``:

- ``--leave`` nodes leave (their Node deleted, their worker silent) and as many new ones
  join (a Node created, its features sent);
- ``--change`` nodes send changed features (a counter in their own group: a new digest
  and a new decision each time);
- a slice of the fleet sends heartbeats, so that every node does once a minute;
- every ``--rule-every`` seconds a NodeFeatureRule object changes (a label's value): every
  node's decision is made again and every Node written.

The master runs with its defaults otherwise, garbage collection every minute (so that
left nodes are forgotten within the run; ``--gc-interval``). Every ``--sample`` seconds it prints the
master's RSS, the nodes it holds, its update queue and CPU seconds: the curve shows what
grows and what is bounded.

Usage: python bench/master_soak_bench.py [--nodes 2000] [--minutes 30]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import master_bench as mb  # bench/ is not a package

from tests.fakeapi import FakeApiServer  # the repository is on sys.path now


def rule(value: int) -> list[dict[str, object]]:
    return [
        {
            "name": "soak",
            "labels": {"bench-soak.generation": str(value)},
            "matchFeatures": [{"feature": "kernel.version", "matchName": {"op": "Exists"}}],
        }
    ]


def changed(template: str, name: str, gen: int) -> bytes:
    body = json.loads(template.replace("__NODE__", name))
    body["features"]["attributes"]["system.name"]["elements"]["soak"] = str(gen)
    return json.dumps(body).encode()


async def churn(fake: FakeApiServer, port: int, a: argparse.Namespace) -> None:
    template = mb.features_template()
    fleet = [f"node-{i:06d}" for i in range(a.nodes)]
    joined = itertools.count(a.nodes)
    digests = await mb.put_all(port, fleet, template)
    while mb.metric(port, "nfd_master_node_updates_total") < a.nodes:
        await asyncio.sleep(0.5)
    conn = await mb.Conn.open(port)
    t0 = time.monotonic()
    next_sample = next_rule = 0.0
    rule_gen = gen = 0
    hb_per_tick = max(1, len(fleet) // 60)
    hb_at = 0
    master_pid = a.master_pid
    print(
        f"{'min':>5} {'RSS MiB':>8} {'nodes':>6} {'queue':>6} {'CPU s':>7} {'writes':>8} {'load':>5}",
        flush=True,
    )
    while (elapsed := time.monotonic() - t0) < a.minutes * 60:
        tick = time.monotonic()
        if elapsed >= next_sample:
            print(f"{elapsed / 60:5.1f} {mb.rss_mb(master_pid):8.1f} "
                  f"{mb.metric(port, 'nfd_master_nodes'):6.0f} {mb.metric(port, 'nfd_master_update_queue_depth'):6.0f} "
                  f"{mb.cpu_s(master_pid):7.1f} {mb.metric(port, 'nfd_master_node_updates_total'):8.0f} "
                  f"{os.getloadavg()[0]:5.1f}", flush=True)  # fmt: skip
            next_sample += a.sample
        if elapsed >= next_rule:
            rule_gen += 1
            if rule_gen == 1:
                fake.create_rule("soak", rule(rule_gen))
            else:
                spec = {"rules": rule(rule_gen)}
                fake.objects.modify("nodefeaturerules", "soak", lambda o, spec=spec: o.update(spec=spec))
            next_rule += a.rule_every
        for _ in range(a.leave):
            gone = fleet.pop(0)
            digests.pop(gone, None)
            fake.delete_node(gone)
            name = f"node-{next(joined):06d}"
            fake.create_node(name)
            fleet.append(name)
            status, body = await conn.request(
                "PUT", f"/api/v1/nodes/{name}/features", mb.node_body(template, name)
            )
            if status == 200:
                digests[name] = json.loads(body)["digest"]
        for k in range(a.change):
            gen += 1
            name = fleet[(gen * 7919 + k) % len(fleet)]
            status, body = await conn.request(
                "PUT", f"/api/v1/nodes/{name}/features", changed(template, name, gen)
            )
            if status == 200:
                digests[name] = json.loads(body)["digest"]
        for _ in range(hb_per_tick):
            name = fleet[hb_at % len(fleet)]
            hb_at += 1
            if name in digests:
                await conn.request(
                    "POST", f"/api/v1/nodes/{name}/heartbeat", json.dumps({"digest": digests[name]}).encode()
                )
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    conn.close()
    print(f"done: {a.minutes} min, {next(joined) - a.nodes} nodes joined and left, {gen} feature changes, "
          f"{rule_gen} rule generations; RSS {mb.rss_mb(master_pid):.1f} MiB", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--leave", type=int, default=1, help="nodes that leave (and join) each second")
    ap.add_argument("--change", type=int, default=10, help="nodes whose features change each second")
    ap.add_argument("--rule-every", type=float, default=120.0, help="seconds between rule changes")
    ap.add_argument("--sample", type=float, default=30.0, help="seconds between RSS samples")
    ap.add_argument(
        "--gc-interval", default="60s", help="the master's --gc-interval (0: no garbage collection)"
    )
    a = ap.parse_args()
    with FakeApiServer() as fake, tempfile.TemporaryDirectory() as tmp:
        for i in range(a.nodes):
            fake.create_node(f"node-{i:06d}")
        kubeconfig = fake.write_kubeconfig(Path(tmp) / "kubeconfig")
        port = mb.free_port()
        master = mb.start_master(
            port, "--kubeconfig", str(kubeconfig), "--no-tls", "--rules-dir", str(mb.RULES),
            "--gc-interval", a.gc_interval, cpu=None,
        )  # fmt: skip
        a.master_pid = master.pid
        print(f"soak: {a.nodes} nodes, {a.minutes} min; each second {a.leave} leave and join, {a.change} "
              f"change features; a rule change every {a.rule_every:.0f} s", flush=True)  # fmt: skip
        try:
            asyncio.run(churn(fake, port, a))
        finally:
            mb.stop(master)


if __name__ == "__main__":
    main()
