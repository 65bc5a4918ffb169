"""``nfd dra``'s memory against the fake API server: VmRSS and VmHWM of the process once
it serves (an empty pool: the figure is what the agent's code and libraries cost), beside
what a bare interpreter costs with only the libraries it cannot do without (grpc for
kubelet's plugin API, ssl and socket for the API server). A per-node agent's
memory is paid on every node.

With ``--config`` and ``--host-root`` it serves a real node's devices instead (on a GPU
node: ``--config`` naming the NVIDIA GPUs and ``--host-root /``, NVML loaded). It also
prints the CPU the process used while it served: its health poll and loops, idle.

Usage: bench/dra_memory_bench.py [--seconds N] [--config FILE --host-root DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_tests = types.ModuleType("tests")
_tests.__path__ = [str(ROOT / "tests")]
sys.modules.setdefault("tests", _tests)

from tests.fakeapi import FakeApiServer  # noqa: E402

CONFIG = """resources:
  - name: example.com/fpga
    pci: {vendor: "1172", class: "12"}
    servedBy: dra
"""


def status_kib(pid: int) -> dict[str, int]:
    """The memory lines of /proc/<pid>/status, in KiB."""
    lines = (line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {k: int(v.split()[0]) for k, v in lines if k.startswith(("Vm", "Rss"))}


def rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in KiB."""
    fields = status_kib(pid)
    return fields["VmRSS"], fields["VmHWM"]


def floor_rss() -> int:
    code = "import grpc, ssl, socket, sys; sys.stdout.write('ok'); sys.stdout.flush(); sys.stdin.read()"
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/")
    assert p.stdout is not None and p.stdout.read(2) == b"ok"
    out = rss(p.pid)[0]
    p.communicate(b"")
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU of the process so far (/proc/<pid>/stat, clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="how long it serves before it is measured")
    ap.add_argument("--config", type=Path, help="device config to serve (default: an FPGA on an empty host)")
    ap.add_argument("--host-root", type=Path, help="host root for --config (default: an empty tree)")
    args = ap.parse_args()
    with FakeApiServer() as fake, tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "host/sys").mkdir(parents=True)
        (d / "devices.yaml").write_text(CONFIG)
        config = args.config.resolve() if args.config else d / "devices.yaml"
        host = args.host_root.resolve() if args.host_root else d / "host"
        kubeconfig = fake.write_kubeconfig(d / "kubeconfig")
        cmd = [
            sys.executable, "-m", "nfd", "dra", "--config", str(config), "--node-name", "n1",
            "--kubeconfig", str(kubeconfig), "--host-root", str(host), "--plugin-dir", str(d / "plugin"),
            "--registry-dir", str(d / "registry"), "--cdi-dir", str(d / "cdi"),
        ]  # fmt: skip
        # PYTHONPATH stays: where nfd is not installed, it names the checkout.
        env = {
            k: v for k, v in os.environ.items() if k == "PYTHONPATH" or not k.startswith(("NFD_", "PYTHON"))
        }
        p = subprocess.Popen(cmd, env=env, cwd="/", stderr=subprocess.DEVNULL)
        try:
            fake.wait_for(lambda: fake.objects.list("resourceslices"), what="the pool published")
            devices = sum(len(s["spec"].get("devices") or []) for s in fake.objects.list("resourceslices"))
            cpu0, t0 = cpu_seconds(p.pid), time.monotonic()
            time.sleep(args.seconds)  # settled: the loops have run a few times
            cpu = (cpu_seconds(p.pid) - cpu0) / (time.monotonic() - t0)
            mem = status_kib(p.pid)
            vm, hwm = mem["VmRSS"], mem["VmHWM"]
        finally:
            p.terminate()
            p.wait(10)
    floor = floor_rss()
    print(f"nfd dra serving {devices} device(s): VmRSS {vm / 1024:.1f} MiB, VmHWM {hwm / 1024:.1f} MiB")
    parts = ", ".join(f"{k} {mem.get(k, 0) / 1024:.1f}" for k in ("RssAnon", "RssFile", "RssShmem"))
    print(f"  of which (MiB): {parts}")
    print(f"its CPU while serving: {cpu * 100:.2f} % of a core over {args.seconds:.0f} s")
    print(f"floor (python + grpc, ssl, socket): VmRSS {floor / 1024:.1f} MiB")
    print(f"nfd dra above the floor: {(vm - floor) / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
