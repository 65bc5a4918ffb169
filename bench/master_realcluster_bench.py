"""nfd master against a real API server: how fast it labels Nodes, next to a bare client.

Creates ``--nodes`` Node objects without kubelets (label ``bench.nfd.node.kubernetes.io/
run=<id>``, taint ``bench.nfd.node.kubernetes.io/fake:NoSchedule``; created as the node
lifecycle controller would mark them unreachable, so that it does not write them during
a pass), waits until they are quiet, runs an untimed warm-up pass of each side, then
``--rounds`` rounds of two timed passes, A B, B A, A B ... (each side first in half):

- nfd: ``nfd master`` on loopback (``--no-auth --no-tls``, the kubeconfig given, the
  rules of bench/data; no NodeFeature, NodeFeatureRule or NodeFeatureGroup objects read
  or written: a cluster's own nfd is left alone) gets every node's features once (as in
  bench/master_bench.py); timed from empty to all labelled, once the master is started
  (its Node watch open, after the LIST of every Node) and ``--settle`` seconds more,
  with the 429s it got, its CPU seconds and RSS.
- the baseline: merge PATCHes of the same labels and tracking annotation (taken from what
  nfd wrote) over persistent connections opened in the pass (TLS to the API server, as
  the master's), ``--inflight`` at a time: by default the master's ceiling
  (``--parallelism``, 64), so that both sides may load the server alike.

Before each pass every Node is stripped of the labels and nfd's annotations (untimed),
then ``--settle`` seconds of quiet: the server's work after a pass (compaction, caches,
garbage collection) is not charged to the next. Prints each pass (with how busy the
machine's CPUs were, the CPU the API server and etcd each spent a node, where they run
on this machine, and the watchers the API server dropped for reading too slowly) and
each round's ratio (nfd / baseline), then each side's median rate and their ratio (the
figure), and etcd's database size at the start and the end (as the API server reports
it: a database that many runs have grown slows every write). Every Node
it created is deleted at the end, also on failure, Ctrl-C or SIGTERM. The API server,
etcd and the master share the machine's CPUs.

Usage: python bench/master_realcluster_bench.py --kubeconfig FILE [--nodes 2000] [--rounds 4]
       [--settle 15] [--inflight N] [--parallelism N] [--delete-stale]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import urllib3

sys.path.insert(0, str(Path(__file__).resolve().parent))

import master_bench as mb  # bench/ is not a package

from nfd.master.publishing.patches import parse_names  # the repository is on sys.path now

RUN_LABEL = "bench.nfd.node.kubernetes.io/run"
PASS_LABEL = "bench.nfd.node.kubernetes.io/pass"
TAINT = "bench.nfd.node.kubernetes.io/fake"
FEATURE_LABELS_ANN = "nfd.node.kubernetes.io/feature-labels"
WATCH_OPEN = 'code="200",resource="nodes",verb="watch"'  # the labels as the registry sorts them


class Api:
    """A minimal client on persistent connections: one urllib3 pool, as many
    connections as requests in flight. Retries a 429 after its Retry-After, counted."""

    def __init__(self, kubeconfig: Path, connections: int) -> None:
        from kubernetes import client, config

        conf = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=conf)  # type: ignore[no-untyped-call]
        url = urlsplit(conf.host)
        self.headers = {"Accept": "application/json"}
        token = (conf.api_key or {}).get("authorization") or (conf.api_key or {}).get("BearerToken")
        if token:
            self.headers["Authorization"] = token if token.startswith("Bearer ") else f"Bearer {token}"
        kw: dict[str, Any] = {"maxsize": connections, "block": True, "retries": False, "timeout": 60.0}
        if url.scheme == "https":
            kw.update(cert_file=conf.cert_file, key_file=conf.key_file)
            if conf.verify_ssl:
                kw.update(
                    ca_certs=conf.ssl_ca_cert,
                    cert_reqs="CERT_REQUIRED",
                    assert_hostname=conf.tls_server_name or None,
                )
            else:
                kw.update(cert_reqs="CERT_NONE")
            self.pool: Any = urllib3.HTTPSConnectionPool(url.hostname, url.port or 443, **kw)
        else:
            self.pool = urllib3.HTTPConnectionPool(url.hostname, url.port or 80, **kw)
        self.throttled = 0
        self._lock = threading.Lock()

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        for attempt in range(5):
            try:
                r = self.pool.request(method, path, body=data, headers=headers)
            except urllib3.exceptions.HTTPError:
                # A keep-alive connection the server closed while idle: every request
                # here is idempotent (a create answers 409 the second time).
                if attempt == 4:
                    raise
                time.sleep(0.2)
                continue
            if r.status == 409 and method == "POST":
                return {}
            if r.status == 429:
                with self._lock:
                    self.throttled += 1
                time.sleep(float(r.headers.get("Retry-After") or 1))
                continue
            if r.status >= 300:
                raise SystemExit(f"{method} {path}: {r.status} {r.data[:300]!r}")
            return json.loads(r.data) if r.data else {}
        raise SystemExit(f"{method} {path}: no answer")

    def metrics(self) -> bytes:
        """The API server's own metrics (empty where they may not be read)."""
        headers = {k: v for k, v in self.headers.items() if k != "Accept"}
        r = self.pool.request("GET", "/metrics", headers=headers)
        return r.data if r.status == 200 else b""

    def etcd_size(self) -> str:
        """etcd's database size as the API server reports it: one grown by many runs
        (bbolt keeps the pages compaction frees) slows every write."""
        m = re.search(rb"^apiserver_storage_size_bytes\{[^}]*\} (\S+)$", self.metrics(), re.M)
        return f"{float(m.group(1)) / 1e6:.0f} MB" if m else "unknown"

    def dropped_watchers(self) -> float:
        """Watchers the API server has closed for reading too slowly, every resource
        (``apiserver_terminated_watchers_total``): on a saturated box it drops them
        and they resume, and a pass that makes watchers slow makes the server work."""
        return sum(
            float(v)
            for v in re.findall(
                rb"^apiserver_terminated_watchers_total\{[^}]*\} (\S+)$", self.metrics(), re.M
            )
        )

    def list_nodes(self, selector: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cont = ""
        while True:
            q = f"/api/v1/nodes?limit=500&labelSelector={quote(selector)}"
            page = self.request("GET", q + (f"&continue={quote(cont)}" if cont else ""))
            items += page.get("items") or []
            cont = (page.get("metadata") or {}).get("continue") or ""
            if not cont:
                return items


def parallel(fn: Callable[[str], None], names: list[str], inflight: int) -> float:
    """Seconds to run ``fn`` on every name, ``inflight`` at a time."""
    t0 = time.monotonic()
    with ThreadPoolExecutor(inflight) as ex:
        for _ in ex.map(fn, names):
            pass
    return time.monotonic() - t0


def create_nodes(api: Api, run: str, names: list[str]) -> None:
    """Nodes created as the node lifecycle controller would leave a kubelet-less Node
    (conditions Unknown, the unreachable taints), so that it has nothing to write: at
    its default 20 requests a second it would otherwise write each Node twice over the
    next minutes (1,000 s at 10,000 Nodes), under whichever pass runs then."""
    unknown = [
        {
            "type": t,
            "status": "Unknown",
            "reason": "NodeStatusNeverUpdated",
            "message": "bench Node, no kubelet",
        }
        for t in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
    ]
    taints = [
        {"key": TAINT, "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
    ]

    def create(name: str) -> None:
        api.request("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {RUN_LABEL: run, "kubernetes.io/hostname": name}},
            "spec": {"taints": taints},
            "status": {"conditions": unknown},
        })  # fmt: skip

    parallel(create, names, 32)


def delete_nodes(api: Api, selector: str) -> int:
    """Delete every Node ``selector`` matches; answers how many were left after 60 s."""
    try:
        api.request("DELETE", f"/api/v1/nodes?labelSelector={quote(selector)}")
    except (SystemExit, urllib3.exceptions.HTTPError) as e:
        print(f"deleting the collection failed ({e}); deleting each Node")
    deadline = time.monotonic() + 60
    left = api.list_nodes(selector)
    while left and time.monotonic() < deadline:
        for node in left:  # a collection delete may stop part-way: each on its own
            name = node["metadata"]["name"]
            try:
                api.request("DELETE", f"/api/v1/nodes/{quote(name)}")
            except (SystemExit, urllib3.exceptions.HTTPError):
                pass  # gone meanwhile, or tried again on the next round
        time.sleep(1)
        left = api.list_nodes(selector)
    return len(left)


@contextmanager
def bench_nodes(api: Api, run: str, names: list[str]) -> Iterator[None]:
    """The Nodes exist inside; deleted on the way out, whatever the way."""

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    selector = f"{RUN_LABEL}={run}"
    try:
        create_nodes(api, run, names)
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second TERM must not stop the cleanup
        left = delete_nodes(api, selector)
        signal.signal(signal.SIGTERM, previous)
        print(f"deleted the bench Nodes ({selector})" + (f"; {left} still there" if left else ""))


def master_metric(port: int, name: str, labels: str = "", text: str | None = None) -> float:
    text = scrape(port) if text is None else text
    pat = rf"^{re.escape(name)}{re.escape('{' + labels + '}') if labels else ''} ([0-9.e+]+)$"
    m = re.search(pat, text, re.M)
    return float(m.group(1)) if m else 0.0


def api_requests(text: str) -> dict[str, float]:
    """The master's API requests so far, by verb and resource (its metrics)."""
    out: dict[str, float] = {}
    for m in re.finditer(r"^nfd_master_api_requests_total\{([^}]*)\} (\S+)$", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        key = f"{labels.get('verb')} {labels.get('resource')}"
        out[key] = out.get(key, 0) + float(m.group(2))
    return out


def scrape(port: int) -> str:
    return str(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode())


def run_nfd(
    api: Api, kubeconfig: Path, run: str, names: list[str], parallelism: int | None, settle: float
) -> dict[str, Any]:
    os.environ["NFD_MASTER_NODEFEATURES__GROUPS"] = "false"  # no NodeFeatureGroup statuses
    port = mb.free_port()
    extra = ["--parallelism", str(parallelism)] if parallelism else []
    master = mb.start_master(
        port, "--kubeconfig", str(kubeconfig), "--no-tls", "--rules-dir", str(mb.RULES),
        "--no-rule-watch", "--no-nodefeature-watch", "--gc-interval", "0", *extra, cpu=None,
    )  # fmt: skip
    try:
        template = mb.features_template()
        requests = mb.feature_requests(names, template)
        started = time.monotonic() + 60
        # Timed once the master is started: its Node watch open, after the LIST of every
        # Node it holds its writes for (the baseline's start is not timed either).
        while master_metric(port, "nfd_master_api_requests_total", WATCH_OPEN) < 1:
            if time.monotonic() > started:
                raise SystemExit("the master did not open its Node watch in 60 s")
            time.sleep(0.05)
        # Then quiet again, as before the baseline's pass: the master's start LISTs
        # every Node (25 MB of JSON at 1,000 labelled Nodes), and the server's work after
        # it (its garbage collection) is the start's, not the pass's.
        time.sleep(settle)
        requests0 = api_requests(scrape(port))
        c0, t0, box = mb.cpu_s(master.pid), time.monotonic(), BoxCpu(api)
        import asyncio

        sender = time.process_time()
        asyncio.run(mb.send_all(port, requests, template))
        t_put, sender = time.monotonic() - t0, time.process_time() - sender
        deadline = t0 + 600
        windows: list[float] = []  # the master's writes in flight allowed, as it adapts
        progress: list[tuple[float, float]] = []  # (seconds into the pass, nodes labelled)
        # Each scrape costs the master CPU the small box's API server lacks (a few ms
        # through FastAPI), and a pass is timed to the scrape that sees the last write:
        # scrapes every 0.2 s until the first write, then at half the time the rest
        # should take at the rate so far (at most 0.5 s, at least 0.02 s), so that the
        # end is seen within a few tens of ms after some twenty scrapes a pass.
        while (
            done := master_metric(port, "nfd_master_node_updates_total", text=(text := scrape(port)))
        ) < len(names):
            now = time.monotonic()
            if now > deadline:
                raise SystemExit("nfd did not label every node in 10 minutes")
            windows.append(master_metric(port, "nfd_master_api_writes_in_flight_limit", text=text))
            progress.append((now - t0, done))
            left_s = (len(names) - done) * (now - t0) / done if done else 0.4
            time.sleep(min(0.5, max(0.02, left_s / 2)))
        took = time.monotonic() - t0
        cpu = mb.cpu_s(master.pid) - c0
        sent = {k: v - requests0.get(k, 0) for k, v in api_requests(text).items()}
        half = next((t for t, d in progress if d >= len(names) / 2), took)
        out = {
            "seconds": took, "put_s": t_put, "cpu_s": cpu, "sender_cpu_s": sender,
            "rss_mib": mb.rss_mb(master.pid), "peak_mib": mb.rss_mb(master.pid, "VmHWM"),
            "throttled": master_metric(port, "nfd_master_node_update_failures_total", 'reason="429"'),
            "window": f"{max(windows, default=0):.0f} at most, {sum(windows) / max(1, len(windows)):.0f} on average",
            "box": box.text(len(names)),
            "halves": f"the first half labelled after {half:.1f} s, the second in {took - half:.1f} s",
            "requests": ", ".join(f"{k} {v:.0f}" for k, v in sorted(sent.items()) if v),
        }  # fmt: skip
    finally:
        mb.stop(master)
    nodes = api.list_nodes(f"{RUN_LABEL}={run}")
    done = [n for n in nodes if FEATURE_LABELS_ANN in (n["metadata"].get("annotations") or {})]
    if len(done) != len(names):
        raise SystemExit(f"nfd labelled {len(done)} of {len(names)} Nodes")
    meta = nodes[0]["metadata"]
    out["tracking"] = meta["annotations"][FEATURE_LABELS_ANN]
    out["labels"] = {k: meta["labels"][k] for k in parse_names(out["tracking"])}
    return out


NFD_KEYS = ("feature-labels", "feature-annotations", "extended-resources", "taints")


def strip(api: Api, names: list[str], labels: dict[str, str]) -> None:
    """Untimed: every Node back to without the bench's labels and nfd's annotations, so
    that each pass, nfd's or the baseline's, writes the same to the same Nodes."""
    body = {"metadata": {
        "labels": dict.fromkeys([*labels, PASS_LABEL]),
        "annotations": dict.fromkeys(f"nfd.node.kubernetes.io/{k}" for k in NFD_KEYS),
    }}  # fmt: skip
    merge_patch_all(api, names, body, 32)


def merge_patch_all(api: Api, names: list[str], body: dict[str, Any], inflight: int) -> float:
    """Seconds to merge-PATCH every Node with ``body``, ``inflight`` at a time."""
    merge = "application/merge-patch+json"
    return parallel(lambda n: api.request("PATCH", f"/api/v1/nodes/{quote(n)}", body, merge), names, inflight)


def run_baseline(
    kubeconfig: Path, names: list[str], labels: dict[str, str], tracking: str, inflight: int, k: str
) -> dict[str, Any]:
    """Seconds to set ``labels`` (and nfd's tracking annotation, as nfd's write carries
    it) on every Node by merge PATCH, ``inflight`` at a time; and the 429s it got. On
    connections of its own, opened in the pass: each pass's master opens its own too (a
    TLS handshake each, on both sides of the box's CPUs)."""
    api = Api(kubeconfig, inflight)
    body = {"metadata": {"labels": {**labels, PASS_LABEL: k}, "annotations": {FEATURE_LABELS_ANN: tracking}}}  # fmt: skip
    try:
        box = BoxCpu(api)
        cpu = time.process_time()
        took = merge_patch_all(api, names, body, inflight)
        cpu = time.process_time() - cpu
        return {"seconds": took, "throttled": api.throttled, "cpu_s": cpu, "box": box.text(len(names))}
    finally:
        api.pool.close()


def wait_quiet(api: Api, selector: str, settle: float, timeout: float) -> float:
    """Seconds until at most 1% of the bench Nodes changed in ``settle`` seconds (the
    controllers that react to new Nodes are done with them; what remains is a trickle,
    the NoExecute taints' rate-limited updates), at most ``timeout``."""
    t0 = time.monotonic()
    before = {n["metadata"]["name"]: n["metadata"]["resourceVersion"] for n in api.list_nodes(selector)}
    while time.monotonic() - t0 < timeout:
        time.sleep(settle)
        now = {n["metadata"]["name"]: n["metadata"]["resourceVersion"] for n in api.list_nodes(selector)}
        changed = sum(1 for k, v in now.items() if before.get(k) != v)
        before = now
        if changed <= len(now) // 100:
            break
    return time.monotonic() - t0


SERVER_PROCESSES = ("kube-apiserver", "etcd")


class BoxCpu:
    """The machine's CPU over a pass: how busy its CPUs were, and the CPU seconds of the
    API server and etcd where they run on this machine (``/proc``; a remote cluster's
    are not seen), so that a pass shows what the server spent a node on each side."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.pids = {
            int(d.name): comm for d in Path("/proc").iterdir()
            if d.name.isdigit() and (comm := _comm(d)) in SERVER_PROCESSES
        }  # fmt: skip
        self.dropped0 = api.dropped_watchers()
        self.busy0, self.total0 = _stat()
        self.server0 = self._server()

    def _server(self) -> dict[str, float]:
        total = dict.fromkeys(SERVER_PROCESSES, 0.0)
        for pid, comm in self.pids.items():
            try:
                total[comm] += mb.cpu_s(pid)
            except OSError:
                pass  # restarted meanwhile: its time is lost, the figure is low
        return total

    def text(self, nodes: int) -> str:
        busy, total = _stat()
        pct = 100 * (busy - self.busy0) / max(1, total - self.total0)
        now = self._server()
        ms = {k: (now[k] - self.server0[k]) / nodes * 1e3 for k in SERVER_PROCESSES}
        server = (
            f"; API server and etcd {sum(ms.values()):.1f} ms a node "
            f"({ms['kube-apiserver']:.1f} + {ms['etcd']:.1f})"
            if self.pids
            else ""
        )
        dropped = self.api.dropped_watchers() - self.dropped0
        return f"CPUs {pct:.0f}% busy{server}; slow watchers dropped {dropped:.0f}"


def _comm(d: Path) -> str:
    try:
        return (d / "comm").read_text().strip()
    except OSError:
        return ""


def _stat() -> tuple[int, int]:
    """Busy and total jiffies of all CPUs (``/proc/stat``; idle and iowait are not busy)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def median(xs: list[float]) -> float:
    s = sorted(xs)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2


class Passes:
    """The timed passes of one run, over the same Nodes: each starts from stripped Nodes
    after the settle time, and prints its figures."""

    def __init__(self, api: Api, a: argparse.Namespace, run: str, names: list[str]) -> None:
        self.api, self.a, self.run, self.names = api, a, run, names
        self.inflight = a.inflight or a.parallelism or 64
        self.labels: dict[str, str] = {}
        self.tracking = ""

    def one(self, side: str, title: str, k: str) -> float:
        """One pass of ``side`` ("nfd" or "baseline"); answers its rate, nodes a second."""
        n = len(self.names)
        strip(self.api, self.names, self.labels)
        time.sleep(self.a.settle)
        load = os.getloadavg()[0]
        if side == "nfd":
            nfd = run_nfd(
                self.api, self.a.kubeconfig, self.run, self.names, self.a.parallelism, self.a.settle
            )
            self.labels, self.tracking = nfd["labels"], nfd["tracking"]
            rate = n / nfd["seconds"]
            print(f"{title}, nfd master: {n} nodes labelled in {nfd['seconds']:.1f} s = "
                  f"{rate:.0f} nodes/s (features all sent after {nfd['put_s']:.1f} s, "
                  f"the sender's CPU {nfd['sender_cpu_s']:.1f} s), "
                  f"429s {nfd['throttled']:.0f}, CPU {nfd['cpu_s']:.1f} s, RSS {nfd['rss_mib']:.0f} MiB "
                  f"(peak {nfd['peak_mib']:.0f} MiB); writes in flight {nfd['window']}; "
                  f"{nfd['halves']}; load average before {load:.1f}; {nfd['box']}; "
                  f"API requests: {nfd['requests']}",
                  flush=True)  # fmt: skip
            return rate
        b = run_baseline(self.a.kubeconfig, self.names, self.labels, self.tracking, self.inflight, k)
        rate = n / b["seconds"]
        print(f"{title}, baseline: {self.inflight} in flight, {rate:.0f} nodes/s "
              f"({b['seconds']:.1f} s, 429s {b['throttled']}, CPU {b['cpu_s']:.1f} s; "
              f"{len(self.labels)} labels a PATCH); "
              f"load average before {load:.1f}; {b['box']}", flush=True)  # fmt: skip
        return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    env_conf = os.environ.get("KUBECONFIG")
    ap.add_argument("--kubeconfig", type=Path, default=env_conf, required=not env_conf)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=4, help="timed rounds of a pass of each side (even: fair)")
    ap.add_argument("--inflight", type=int, help="the baseline's writes in flight (default: nfd's most)")
    ap.add_argument("--settle", type=float, default=15.0, help="seconds of quiet before each pass")
    ap.add_argument("--parallelism", type=int, help="the master's --parallelism (default: its own, 64)")
    ap.add_argument("--delete-stale", action="store_true", help=f"first delete old runs' Nodes ({RUN_LABEL})")
    a = ap.parse_args()
    api = Api(a.kubeconfig, max(a.inflight or a.parallelism or 64, 32))
    if a.delete_stale:
        print(f"stale bench Nodes left: {delete_nodes(api, RUN_LABEL)}")
    print(f"etcd database: {api.etcd_size()}", flush=True)
    run = uuid.uuid4().hex[:8]
    names = [f"nfd-bench-{run}-{i:05d}" for i in range(a.nodes)]
    n = len(names)
    try:
        with bench_nodes(api, run, names):
            waited = wait_quiet(api, f"{RUN_LABEL}={run}", a.settle, 300)
            print(f"{n} Nodes created ({RUN_LABEL}={run}), quiet after {waited:.0f} s more; "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
            passes = Passes(api, a, run, names)
            # Untimed: the first writes to new Nodes meet a cold server (caches, etcd's first
            # compaction), whichever side makes them; nfd's gives the baseline its labels.
            passes.one("nfd", "warm-up", "warmup")
            passes.one("baseline", "warm-up", "warmup")
            rates: dict[str, list[float]] = {"nfd": [], "baseline": []}
            ratios: list[float] = []
            for r in range(a.rounds):
                # A B, B A ...: the second pass of a round meets a server busy after the
                # first (compaction, caches, collection): each side goes first in half.
                got = {}
                for side in ("baseline", "nfd") if r % 2 == 0 else ("nfd", "baseline"):
                    got[side] = passes.one(side, f"round {r + 1}", str(r + 1))
                    rates[side].append(got[side])
                ratios.append(got["nfd"] / got["baseline"])
                print(f"round {r + 1}: ratio {ratios[-1]:.2f}", flush=True)
            med = {k: median(v) for k, v in rates.items()}
            print(f"{n} Nodes, {a.rounds} rounds: nfd {' '.join(f'{x:.0f}' for x in rates['nfd'])} nodes/s, "
                  f"median {med['nfd']:.0f}; baseline {' '.join(f'{x:.0f}' for x in rates['baseline'])}, "
                  f"median {med['baseline']:.0f}; ratio of the medians {med['nfd'] / med['baseline']:.2f} "
                  f"(rounds' ratios {' '.join(f'{x:.2f}' for x in ratios)}, median {median(ratios):.2f}); "
                  f"etcd database: {api.etcd_size()}", flush=True)  # fmt: skip
    except KeyboardInterrupt:
        raise SystemExit("interrupted") from None


if __name__ == "__main__":
    main()
