"""``nfd dra``'s memory against the fake API server: VmRSS and VmHWM of the process once
it serves (an empty pool: the figure is what the agent's code and libraries cost), beside
what a bare interpreter costs with only the libraries it cannot do without (grpc for
kubelet's plugin API, ssl and http.client for the API server). A per-node agent's
memory is paid on every node.

Usage: bench/dra_memory_bench.py [--seconds N]
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


def rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in KiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def floor_rss() -> int:
    code = "import grpc, ssl, http.client, sys; sys.stdout.write('ok'); sys.stdout.flush(); sys.stdin.read()"
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/")
    assert p.stdout is not None and p.stdout.read(2) == b"ok"
    out = rss(p.pid)[0]
    p.communicate(b"")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="how long it serves before it is measured")
    args = ap.parse_args()
    with FakeApiServer() as fake, tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "host/sys").mkdir(parents=True)
        (d / "devices.yaml").write_text(CONFIG)
        kubeconfig = fake.write_kubeconfig(d / "kubeconfig")
        cmd = [
            sys.executable, "-m", "nfd", "dra", "--config", str(d / "devices.yaml"), "--node-name", "n1",
            "--kubeconfig", str(kubeconfig), "--host-root", str(d / "host"), "--plugin-dir", str(d / "plugin"),
            "--registry-dir", str(d / "registry"), "--cdi-dir", str(d / "cdi"),
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NFD_", "PYTHON"))}
        p = subprocess.Popen(cmd, env=env, cwd="/", stderr=subprocess.DEVNULL)
        try:
            fake.wait_for(lambda: fake.objects.list("resourceslices"), what="the pool published")
            time.sleep(args.seconds)  # settled: the loops have run a few times
            vm, hwm = rss(p.pid)
        finally:
            p.terminate()
            p.wait(10)
    floor = floor_rss()
    print(f"nfd dra: VmRSS {vm / 1024:.1f} MiB, VmHWM {hwm / 1024:.1f} MiB")
    print(f"floor (python + grpc, ssl, http.client): VmRSS {floor / 1024:.1f} MiB")
    print(f"nfd dra above the floor: {(vm - floor) / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
