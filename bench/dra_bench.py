"""DRA figures: the driver (slice publisher, health, kubelet plugin) in this process,
the fake API server over real HTTP, and a kubelet stand-in over real unix sockets.

    PYTHONPATH=. python bench/dra_bench.py [--devices 256] [--trials 20] [--calls 500]

- time from a device vanishing (its sysfs dir removed) to the ResourceSlice without it
  being stored, and from its return to the slice with it, with the default 200 ms
  health poll and no udev;
- the pool for a node with ``--devices`` PCI devices: slices, bytes as stored, and the
  writes for the first publish, for an unchanged re-sync, and for one health change;
- NodePrepareResources latency (one claim per call, one device: the claim read, its
  checkpoint file written, the CDI spec written and fsynced) p50/p99, as a ratio to a do-nothing
  grpcio DRAPlugin that answers every call with a fixed response, timed in interleaved
  blocks in this run. The claim's status.devices is written after the answer, on the
  driver's status thread, once the calls leave a quiet moment (kubelet's prepares come in
  bursts): the bench waits for the block's writes before the reference's block, and
  prints how long they took.
- with ``--spans``, the prepare's steps timed inside the driver (wall and the calling
  thread's CPU time, p50 over the calls): the wrappers cost a little, so the ratio of
  such a run is not the one to quote.

CDI specs go to a tmpfs directory when /dev/shm exists, as /var/run/cdi is on a node; the
checkpoint goes to the disk under /tmp, as /var/lib/kubelet does. The checkpoint is not
fsynced (see nfd/dra/checkpoint.py): on this machine's disk one fsync takes several
milliseconds, which the last lines show for comparison.
The fake API server runs in a process of its own (as a real one does), so the driver's
times hold only the driver's work, not the server's handling of its requests.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from concurrent import futures
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
from dra.claims import allocate, create_claim  # noqa: E402
from dra.kubelet_dra import DraKubelet, wait_for  # noqa: E402

from nfd.devices.cdi import write_json  # noqa: E402
from nfd.devices.config import DRA, parse_config  # noqa: E402
from nfd.devices.inventory import build_states  # noqa: E402
from nfd.dra.api.dra.v1 import api_pb2 as dra_pb  # noqa: E402
from nfd.dra.api.dra.v1 import api_pb2_grpc as dra_grpc  # noqa: E402
from nfd.dra.driver import DraDriver  # noqa: E402
from nfd.dra.slices import DraInventory  # noqa: E402
from nfd.features import Features  # noqa: E402
from nfd.hostroot import HostRoot  # noqa: E402
from tests.fakeapi import FakeApiServer  # noqa: E402

DRIVER = "nfd.node.kubernetes.io"
NODE = "bench-node"
SLICES = "resourceslices.resource.k8s.io"


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def ms(x: float) -> str:
    return f"{x * 1000:.2f} ms"


def fpga_pool(root: Path, n: int) -> tuple[HostRoot, list[str], list[Any], DraInventory]:
    """The bench's node: ``n`` FPGA functions (``make_host``) served by DRA; the host, the
    PCI addresses, the resource states and the pool."""
    host, feats, addrs = make_host(root, n)
    config = parse_config(
        {"resources": [{"name": "example.com/fpga", "pci": {"vendor": "1172"}, "servedBy": "dra",
                        "deviceNodes": ["/dev/vfio/{iommu_group}", "/dev/vfio/vfio"]}]}
    )  # fmt: skip
    states, _ = build_states(config.served_by(DRA), features=feats, host=host)
    return host, addrs, states, DraInventory(states, features=feats, host=host)


def make_host(root: Path, n: int) -> tuple[HostRoot, Features, list[str]]:
    """``n`` PCI functions bound to vfio-pci, each in its own IOMMU group."""
    addrs = [f"0000:{0x10 + i // 32:02x}:{(i % 32):02x}.0" for i in range(n)]
    drivers = root / "sys/bus/pci/drivers/vfio-pci"
    drivers.mkdir(parents=True)
    (root / "dev/vfio").mkdir(parents=True)
    (root / "dev/vfio/vfio").write_text("")
    insts = []
    for i, a in enumerate(addrs):
        d = root / "sys/devices/pci0000:00" / a
        d.mkdir(parents=True)
        (d / "numa_node").write_text(f"{i % 2}\n")
        (d / "driver").symlink_to(drivers)
        link = root / "sys/bus/pci/devices" / a
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(d)
        (root / f"dev/vfio/{i}").write_text("")
        insts.append({"address": a, "vendor": "1172", "device": "5052", "class": "1200", "driver": "vfio-pci",
                      "numa_node": str(i % 2), "iommu_group": str(i)})  # fmt: skip
    feats = Features()
    feats.set_instances("pci.device", insts)
    return HostRoot.under(root), feats, addrs


def serve_api(conn: Connection) -> None:
    """The fake API server's process: sends its URL, then answers the bench's questions
    about what it stores until told to stop."""
    with FakeApiServer() as fake:
        conn.send(fake.url)
        while (ask := conn.recv()) is not None:
            what, arg = ask
            if what == "list":
                conn.send(fake.objects.list(arg))
            else:
                conn.send(len(fake.log.writes(resource=arg)))


class ApiProcess:
    """The fake API server in a child process, with the few views the bench needs."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process with gRPC threads
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=serve_api, args=(child,), daemon=True)

    def __enter__(self) -> ApiProcess:
        self._proc.start()
        self.url: str = self._conn.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        self._conn.send(None)
        self._proc.join(10)

    def list(self, plural: str) -> list[dict[str, Any]]:
        self._conn.send(("list", plural))
        out: list[dict[str, Any]] = self._conn.recv()
        return out

    def writes(self, resource: str) -> int:
        self._conn.send(("writes", resource))
        n: int = self._conn.recv()
        return n

    def transport(self) -> Any:
        from nfd.kube.config import Credentials
        from nfd.kube.light import LightTransport

        return LightTransport(Credentials(self.url), timeout=30.0)

    def api_client(self) -> Any:
        from kubernetes import client

        return client.ApiClient(client.Configuration(host=self.url))


def published(fake: ApiProcess) -> set[str]:
    slices = fake.list("resourceslices")
    if not slices:
        return set()
    gen = max(s["spec"]["pool"]["generation"] for s in slices)
    return {d["name"] for s in slices if s["spec"]["pool"]["generation"] == gen for d in s["spec"]["devices"]}


def wait_until(cond: Any, timeout: float = 10.0) -> float:
    """Seconds until ``cond()`` held, polling every 1 ms."""
    t0 = time.perf_counter()
    while not cond():
        if time.perf_counter() - t0 > timeout:
            raise SystemExit("timed out")
        time.sleep(0.001)
    return time.perf_counter() - t0


class FixedAnswer(dra_grpc.DRAPluginServicer):
    """The do-nothing reference: every NodePrepareResources gets the same answer."""

    def NodePrepareResources(self, request: Any, context: Any) -> Any:
        resp = dra_pb.NodePrepareResourcesResponse()
        for c in request.claims:
            resp.claims[c.uid].devices.add(
                request_names=["dev"], pool_name=NODE, device_name="d", cdi_device_ids=[f"{DRIVER}/claim=x"]
            )
        return resp


def reference_server(path: str) -> grpc.Server:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=[("grpc.so_reuseport", 0)])
    dra_grpc.add_DRAPluginServicer_to_server(FixedAnswer(), server)
    server.add_insecure_port("unix:" + path)
    server.start()
    return server


def _timed(f: Any, xs: list[tuple[float, float]]) -> Any:
    def timed(*a: Any, **k: Any) -> Any:
        t, c = time.perf_counter(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            xs.append((time.perf_counter() - t, time.thread_time() - c))

    return timed


def time_spans() -> dict[str, list[tuple[float, float]]]:
    """Wrap the prepare's steps (on their classes, before the driver is made) to record
    each call's (wall, thread CPU) seconds under the step's label."""
    from nfd.dra import checkpoint, plugin, prepare, publisher, slices

    spans: dict[str, list[tuple[float, float]]] = {}
    steps = [
        (plugin.DraService, "NodePrepareResources", "gRPC handler"),
        (publisher.ClaimReaderApi, "__call__", "claim GET"),
        (slices.DraInventory, "usable", "device re-check"),
        (prepare.Preparer, "_sync", "listing check"),
        (checkpoint.ClaimFiles, "save", "checkpoint file"),
        (prepare.Preparer, "_write_spec", "CDI spec"),
    ]
    for owner, attr, label in steps:
        setattr(owner, attr, _timed(getattr(owner, attr), spans.setdefault(label, [])))
    return spans


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=256)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--block", type=int, default=50, help="calls per interleaved block")
    ap.add_argument("--spans", action="store_true", help="time the prepare's steps inside the driver")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    tmp = Path(tempfile.mkdtemp(prefix="nfddra-", dir="/tmp"))
    try:
        return run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace, tmp: Path) -> int:
    spans = time_spans() if args.spans else {}
    host, addrs, states, inventory = fpga_pool(tmp / "host", args.devices)
    registry = tmp / "reg"
    registry.mkdir()
    shm = Path("/dev/shm")
    cdi_dir = Path(tempfile.mkdtemp(prefix="nfddra-cdi-", dir=shm)) if shm.is_dir() else tmp / "cdi"
    with ApiProcess() as fake:
        client = fake.transport()
        driver = DraDriver(
            states, inventory, api=client, driver=DRIVER, node=NODE,
            plugin_dir=str(tmp / "plugin"), registry_dir=str(registry), cdi_dir=str(cdi_dir), use_udev=False,
        )  # fmt: skip
        t0 = time.perf_counter()
        driver.start()
        wait_until(lambda: len(published(fake)) == args.devices)
        first = time.perf_counter() - t0
        slices = fake.list("resourceslices")
        size = sum(len(json.dumps(s, separators=(",", ":"))) for s in slices)
        writes_first = fake.writes(SLICES)
        print(f"pool of {args.devices} devices: {len(slices)} slices, {size} bytes as stored, "
              f"{writes_first} writes, published {ms(first)} after start")  # fmt: skip
        n0 = fake.writes(SLICES)
        driver.publisher.sync(inventory.published(driver.slices.taints), force=True)
        print(f"unchanged re-sync: {fake.writes(SLICES) - n0} writes")

        gone, back = [], []
        name = "fpga-" + addrs[7].replace(":", "-").replace(".", "-")
        src = Path(str(host.sys)) / "bus/pci/devices" / addrs[7]
        target = src.resolve()
        n0 = fake.writes(SLICES)
        for _ in range(args.trials):
            src.unlink()
            gone.append(wait_until(lambda: name not in published(fake)))
            src.symlink_to(target)
            back.append(wait_until(lambda: name in published(fake)))
        per_change = (fake.writes(SLICES) - n0) / (2 * args.trials)
        print(
            f"device vanishes -> withdrawn: p50 {ms(statistics.median(gone))}, max {ms(max(gone))} ({args.trials} trials)"
        )
        print(f"device returns -> published:  p50 {ms(statistics.median(back))}, max {ms(max(back))}")
        print(
            f"writes per health change: {per_change:.1f} (every slice of the pool carries the new generation)"
        )

        kubelet = DraKubelet(registry).start()
        wait_for(lambda: DRIVER in kubelet.drivers)
        claims = []
        users = fake.api_client()  # the claims' authors and the scheduler, not the driver
        for i in range(args.calls):
            c = create_claim(users, "default", f"c{i}", device_class="fpga.example.com")
            allocate(
                users,
                c,
                [(DRIVER, NODE, "fpga-" + addrs[i % len(addrs)].replace(":", "-").replace(".", "-"))],
            )
            claims.append(("default", c["metadata"]["uid"], f"c{i}"))
        ref_sock = str(tmp / "ref.sock")
        ref = reference_server(ref_sock)
        ref_channel = grpc.insecure_channel("unix:" + ref_sock)
        ref_stub = dra_grpc.DRAPluginStub(ref_channel)
        for _ in range(50):  # warm both channels
            ref_stub.NodePrepareResources(
                dra_pb.NodePrepareResourcesRequest(claims=[dra_pb.Claim(namespace="d", uid="w", name="w")])
            )
        kubelet.unprepare(DRIVER, ("default", "warm", "warm"))
        for xs in spans.values():
            xs.clear()  # the calls below only
        nfd_t: list[float] = []
        ref_t: list[float] = []
        status_t: list[float] = []
        for start in range(0, args.calls, args.block):
            for c in claims[start : start + args.block]:
                t = time.perf_counter()
                resp = kubelet.prepare(DRIVER, c)
                nfd_t.append(time.perf_counter() - t)
                assert resp.claims[c[1]].error == "", resp.claims[c[1]].error
            # The block's status writes, made once the calls leave a quiet moment, are
            # over before the reference's block (they would slow its calls, not ours).
            t = time.perf_counter()
            driver.preparer.flush_status(60)
            status_t.append(time.perf_counter() - t)
            for ns, uid, name in claims[start : start + args.block]:
                t = time.perf_counter()  # the request made as the kubelet stand-in makes it
                req = dra_pb.NodePrepareResourcesRequest(
                    claims=[dra_pb.Claim(namespace=ns, uid=uid, name=name)]
                )
                dra_grpc.DRAPluginStub(ref_channel).NodePrepareResources(req, timeout=45)
                ref_t.append(time.perf_counter() - t)
        for label, xs in (("nfd", nfd_t), ("do-nothing grpcio", ref_t)):
            print(
                f"NodePrepareResources {label}: p50 {ms(pct(xs, 50))}, p99 {ms(pct(xs, 99))} ({len(xs)} calls)"
            )
        for label, pairs in spans.items():
            wall, cpu = (statistics.median(x) for x in zip(*pairs, strict=True))
            print(f"  span {label}: p50 {ms(wall)}, CPU {ms(cpu)} ({len(pairs)} calls)")
        print(
            f"status writes after each block of {args.block}: {ms(statistics.median(status_t))} (median of"
            f" {len(status_t)} blocks, from the block's last answer)"
        )
        floor = []
        for i in range(50):  # what one flushed write costs on the checkpoint's disk
            t = time.perf_counter()
            write_json(tmp / "plugin" / f"floor-{i}.json", {"i": i})
            floor.append(time.perf_counter() - t)
        print(f"one fsynced file write on the checkpoint's disk: p50 {ms(statistics.median(floor))}")
        print(
            f"ratio nfd / do-nothing: p50 {pct(nfd_t, 50) / pct(ref_t, 50):.1f}x, p99 {pct(nfd_t, 99) / pct(ref_t, 99):.1f}x"
        )
        kubelet.stop()
        ref.stop(None)
        driver.stop()
        client.close()
    shutil.rmtree(cdi_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
