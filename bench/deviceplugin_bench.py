"""Device-plugin figures: ``nfd device-plugin`` runs as its own process (as it does on a
node) over a fixture host, and this process plays kubelet over real unix sockets.

    PYTHONPATH=. python bench/deviceplugin_bench.py [--allocs 2000] [--trials 20] [--client go]

Allocate is measured from two clients. kubelet is Go: ``bench/kubelet-client`` calls
Allocate as kubelet does, with grpc-go over the socket, and is built here when ``go`` and
grpc-go are installed (Debian: ``apt-get install golang-go golang-google-grpc-dev``).
The same client also times two reference plugins that answer every call with a fixed
response: one in Go (``kubelet-client -serve``: this machine's floor for the call) and
one on grpcio's server as nfd uses it (``--serve-grpcio``: the floor for any plugin
built on grpcio). The three servers are timed in interleaved blocks, so that a noisy
minute on a shared machine lands on all of them alike. The Python stand-in (grpcio
client) is measured too; its own client-side cost is in its figures. The p99 target is
judged on the Go client when there is one.

- Allocate latency (p50/p99) of a one-device request, client to plugin and back;
- time from a device vanishing (its sysfs dir removed) to the ListAndWatch update, and
  from its return to the Healthy update, with the default 200 ms poll and no udev;
- time from kubelet.sock being re-created (a kubelet restart: every socket deleted) to
  the plugin's new Register call, with the default 100 ms directory watch.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "deviceplugin"))
sys.path.insert(0, str(ROOT))

from fixtures import FixtureHost  # noqa: E402
from kubelet_standin import KubeletStandIn, short_tmpdir  # noqa: E402

from nfd.devices.config import parse_config  # noqa: E402
from nfd.devices.inventory import build_states  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def ms(x: float) -> str:
    return f"{x * 1000:.2f} ms"


DEVICES = ("0000:3b:00.0", "0000:3c:00.0", "0000:af:00.0", "0000:b0:00.0")


def go_client() -> Path | None:
    """Build bench/kubelet-client (grpc-go from GOPATH: Debian's packages put it in
    /usr/share/gocode); None when there is no Go toolchain or grpc-go."""
    go = shutil.which("go")
    if go is None:
        return None
    out = ROOT / ".bench" / "kubelet-client"
    gopath = os.environ.get("GOPATH") or "/usr/share/gocode"
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": gopath, "GOFLAGS": ""}
    env.setdefault("GOCACHE", str(ROOT / ".bench" / "gocache"))
    p = subprocess.run(
        [go, "build", "-o", str(out), "."], cwd=ROOT / "bench" / "kubelet-client", env=env,
        capture_output=True, text=True,
    )  # fmt: skip
    if p.returncode != 0:
        print(
            f"(no Go client: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else 'go build failed'})"
        )
        return None
    return out


def allocate_go(client: Path, socket: Path, calls: int, *, warmup: int = 100) -> list[float]:
    p = subprocess.run(
        [str(client), "-socket", str(socket), "-devices", ",".join(DEVICES), "-calls", str(calls),
         "-warmup", str(warmup)],
        capture_output=True, text=True,
    )  # fmt: skip
    if p.returncode != 0:
        raise SystemExit(p.stderr.strip() or "kubelet-client failed")
    return [ns / 1e9 for ns in json.loads(p.stdout)]


def serve_grpcio(socket: str) -> None:
    """The grpcio reference plugin: nfd's server set-up, an Allocate with a fixed answer."""
    from concurrent import futures

    import grpc

    from nfd.deviceplugin.api.v1beta1 import api_pb2 as pb
    from nfd.deviceplugin.api.v1beta1 import api_pb2_grpc as pb_grpc

    answer = pb.AllocateResponse(container_responses=[pb.ContainerAllocateResponse(envs={"A": "B"})])

    class Fixed(pb_grpc.DevicePluginServicer):
        def Allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
            return answer

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=[("grpc.so_reuseport", 0)])
    pb_grpc.add_DevicePluginServicer_to_server(Fixed(), server)
    server.add_insecure_port("unix:" + socket)
    server.start()
    print("serving", flush=True)
    server.wait_for_termination()


def start_reference(cmd: list[str]) -> subprocess.Popen[str]:
    ref = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert ref.stdout is not None
    if ref.stdout.readline().strip() != "serving":
        ref.kill()
        raise SystemExit(f"reference plugin did not start: {' '.join(cmd)}")
    return ref


def allocate_interleaved(client: Path, nfd_socket: Path, calls: int, block: int) -> dict[str, list[float]]:
    """Go reference, grpcio reference and nfd, each timed in turn, ``block`` calls at a time."""
    tmp = Path(short_tmpdir())
    go_sock, py_sock = tmp / "go.sock", tmp / "py.sock"
    refs = [start_reference([str(client), "-serve", str(go_sock)])]
    try:
        refs.append(start_reference([sys.executable, __file__, "--serve-grpcio", str(py_sock)]))
        sockets = {"Go reference plugin": go_sock, "grpcio reference plugin": py_sock, "nfd": nfd_socket}
        lat: dict[str, list[float]] = {k: [] for k in sockets}
        for _ in range(max(1, calls // block)):
            for name, sock in sockets.items():
                lat[name] += allocate_go(client, sock, block, warmup=20)
        return lat
    finally:
        for ref in refs:
            ref.kill()
            ref.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def report(what: str, lat: list[float]) -> float:
    p99 = pct(lat, 99)
    print(
        f"  Allocate through the socket, {what + ',':24} {len(lat)} calls: p50 {ms(pct(lat, 50))}  "
        f"p90 {ms(pct(lat, 90))}  p99 {ms(p99)}  max {ms(max(lat))}"
    )
    return p99


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--allocs", type=int, default=2000)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--client", choices=("both", "go", "python"), default="both")
    ap.add_argument("--block", type=int, default=250, help="Go-client calls per server in turn")
    ap.add_argument("--serve-grpcio", metavar="SOCKET", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_grpcio:
        serve_grpcio(args.serve_grpcio)
        return 0
    gocli = go_client() if args.client != "python" else None
    if args.client == "go" and gocli is None:
        print("--client go: no Go toolchain with grpc-go here")
        return 2
    logging.disable(logging.WARNING)
    os.environ["GRPC_VERBOSITY"] = "ERROR"

    work = Path(tempfile.mkdtemp(prefix="nfddp-bench-"))
    plugin_dir = Path(short_tmpdir())
    fx = FixtureHost(work / "host")
    config = {
        "resources": [
            {
                "name": "example.com/fpga",
                "pci": {"vendor": "1172"},
                "deviceNodes": ["/dev/vfio/{iommu_group}", "/dev/vfio/vfio"],
                "env": {"FPGA_GROUPS": "{iommu_group}"},
            }
        ]
    }
    (work / "dp.yaml").write_text(yaml.safe_dump(config))
    (work / "features.json").write_text(fx.features().to_json())
    # The plugin's own share: health re-check of the device plus the edits, no transport.
    states, _ = build_states(parse_config(config).resources, features=fx.features(), host=fx.host)
    own = []
    for _ in range(args.allocs):
        t0 = time.perf_counter()
        states[0].allocate(["0000:3b:00.0"])
        own.append(time.perf_counter() - t0)
    print(f"Allocate work in the plugin, no transport: p50 {ms(pct(own, 50))}  p99 {ms(pct(own, 99))}")
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    cmd = [sys.executable, "-m", "nfd", "device-plugin", "--config", str(work / "dp.yaml")]
    cmd += ["--plugin-dir", str(plugin_dir), "--cdi-dir", str(work / "cdi")]
    cmd += ["--features", str(work / "features.json"), "--host-root", str(fx.root)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GRPC_VERBOSITY": "ERROR"}
    plugin = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    ok = True
    try:
        req = kubelet.registered(timeout=30)
        judged: float | None = None
        if gocli is not None:
            print(f"grpc-go client (as kubelet), blocks of {args.block} calls per server in turn:")
            lat = allocate_interleaved(gocli, plugin_dir / req.endpoint, args.allocs, args.block)
            p99s = {name: report(name, xs) for name, xs in lat.items()}
            judged = p99s["nfd"]
            go_ref, py_ref = p99s["Go reference plugin"], p99s["grpcio reference plugin"]
            print(
                f"  p99 ratios: nfd / Go reference {judged / go_ref:.2f}, nfd / grpcio reference {judged / py_ref:.2f}"
            )
            if go_ref > 0.002:
                print("  (the Go reference alone misses 2 ms here: this machine cannot show the target)")
        with kubelet.client(req.endpoint) as c:
            if args.client != "go":
                for _ in range(100):  # warm up the channel
                    c.allocate([DEVICES[0]])
                py_lat: list[float] = []
                for i in range(args.allocs):
                    t0 = time.perf_counter()
                    c.allocate([DEVICES[i % 4]])
                    py_lat.append(time.perf_counter() - t0)
                print("grpcio client (the Python stand-in):")
                p99 = report("nfd", py_lat)
                judged = p99 if judged is None else judged
            ok &= judged is not None and judged <= 0.002
            if judged is not None:
                print(f"Allocate p99 judged: {ms(judged)}  (target <= 2 ms)")

            w = c.watch()
            w.until(lambda s: s.get("0000:af:00.0") == "Healthy")
            sysdir = fx.root / "sys/bus/pci/devices/0000:af:00.0"
            gone, back = [], []
            for _ in range(args.trials):
                t0 = time.perf_counter()
                shutil.move(sysdir, work / "away")
                at, _snap = w.until(lambda s: s.get("0000:af:00.0") == "Unhealthy")
                gone.append(at - t0)
                t0 = time.perf_counter()
                shutil.move(work / "away", sysdir)
                at, _snap = w.until(lambda s: s.get("0000:af:00.0") == "Healthy")
                back.append(at - t0)
            w.cancel()
            ok &= max(gone) <= 1.0 and max(back) <= 1.0
            print(
                f"device vanished -> ListAndWatch Unhealthy ({args.trials} trials): "
                f"mean {ms(statistics.mean(gone))}  max {ms(max(gone))}  (target <= 1 s)"
            )
            print(
                f"device returned -> ListAndWatch Healthy  ({args.trials} trials): "
                f"mean {ms(statistics.mean(back))}  max {ms(max(back))}  (target <= 1 s)"
            )

        rereg = []
        for _ in range(max(5, args.trials // 2)):
            t0 = kubelet.restart()
            at, _req = kubelet.next_registration()
            rereg.append(at - t0)
        ok &= max(rereg) <= 1.0
        print(
            f"kubelet.sock re-created -> Register ({len(rereg)} restarts): "
            f"mean {ms(statistics.mean(rereg))}  max {ms(max(rereg))}  (target <= 1 s)"
        )
    finally:
        plugin.send_signal(signal.SIGTERM)
        try:
            plugin.wait(timeout=10)
        except subprocess.TimeoutExpired:
            plugin.kill()
        kubelet.stop()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(plugin_dir, ignore_errors=True)
    print(
        f"load average during the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
    )
    print("all targets met" if ok else "SOME TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
