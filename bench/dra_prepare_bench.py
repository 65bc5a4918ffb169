"""The DRA prepare's own work, without gRPC or HTTP: ``Preparer.prepare`` for ``--calls``
claims (one PCI device each, of a node with ``--devices``), each claim given from memory
instead of read from an API server. Prints the calling thread's CPU time per call.

    PYTHONPATH=. python bench/dra_prepare_bench.py [--devices 32] [--calls 200]

On a shared machine CPU times move with the load; instructions do not. Run it under
callgrind once with ``--calls 1`` and once with ``--calls 201``: the difference of the
two totals over 200 is the instructions of one prepare (user space; the kernel's part of
the file writes is not counted)::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python bench/dra_prepare_bench.py --calls 201
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from dra_bench import DRIVER, NODE, fpga_pool  # noqa: E402

from nfd.dra.prepare import Preparer  # noqa: E402


def claim(i: int, device: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"c{i}", "namespace": "default", "uid": f"uid-{i:08d}", "resourceVersion": "1"},
        "status": {"allocation": {"devices": {"results": [
            {"request": "dev", "driver": DRIVER, "pool": NODE, "device": device}
        ]}}},
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=32)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nfddra-", dir="/tmp"))  # the checkpoint on a disk
    shm = Path("/dev/shm")
    cdi_dir = Path(tempfile.mkdtemp(prefix="nfddra-cdi-", dir=shm)) if shm.is_dir() else tmp / "cdi"
    try:
        _host, addrs, _states, inventory = fpga_pool(tmp / "host", args.devices)
        names = ["fpga-" + a.replace(":", "-").replace(".", "-") for a in addrs]
        claims = {f"c{i}": claim(i, names[i % len(names)]) for i in range(args.calls)}
        preparer = Preparer(
            inventory, driver=DRIVER, node=NODE, cdi_dir=cdi_dir, checkpoint_path=tmp / "plugin/checkpoint.json",
            read_claim=lambda _ns, name: claims[name], write_status=None,
        )  # fmt: skip
        cpu = []
        for i in range(args.calls):
            t = time.thread_time()
            preparer.prepare("default", f"uid-{i:08d}", f"c{i}")
            cpu.append(time.thread_time() - t)
        preparer.close()
        print(f"Preparer.prepare CPU: p50 {statistics.median(cpu) * 1e6:.0f} us ({args.calls} calls)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(cdi_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
