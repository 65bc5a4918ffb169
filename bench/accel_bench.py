"""Accelerator discovery costs, on the fixture trees with the fake NVML (no GPU needed).

Prints per-pass times of the gpu and fpga sources, of GFD label computation, and of one
health poll of the gpu device kind over 8 GPUs (the device plugin polls every 200 ms).

    python bench/accel_bench.py

Also the cost on this machine: usually no accelerator (what every GPU-less node pays); on
a node with NVIDIA GPUs the real NVML's, with one health poll of its GPUs through the
real NVML and the memory that loading NVML adds to the process. Asserts nothing.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nfd.config import GpuConfig, SourcesConfig
from nfd.devices.config import parse_config
from nfd.devices.inventory import build_states
from nfd.devices.kinds import KindRegistry
from nfd.devices.kinds.gpu import GpuKind
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.hw.nvml_fake import FakeNvml, a100_mig, h100x8
from nfd.sources.fpga import FpgaSource
from nfd.sources.gpu import GpuSource

HOSTS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "hosts"


def measure(label: str, fn: Callable[[], object], n: int = 200) -> None:
    fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    print(
        f"{label:<52} median {statistics.median(times) * 1e3:7.3f} ms   p95 {sorted(times)[int(n * 0.95)] * 1e3:7.3f} ms"
    )


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    h100 = HostRoot.under(HOSTS / "gpu-h100x8")
    a100 = HostRoot.under(HOSTS / "gpu-a100-mig")
    cfg = SourcesConfig()
    mixed = SourcesConfig(gpu=GpuConfig(mig_strategy="mixed"))
    gpu = GpuSource(nvml=lambda: FakeNvml(h100x8()))
    mig = GpuSource(nvml=lambda: FakeNvml(a100_mig()))
    feats = gpu.discover(h100, cfg)
    mig_feats = mig.discover(a100, mixed)
    measure("gpu source discover, 8x H100 (fake NVML)", lambda: gpu.discover(h100, cfg))
    measure("gpu source discover, 2x A100 MIG (fake NVML)", lambda: mig.discover(a100, mixed))
    measure("gpu labels, 8x H100", lambda: gpu.labels(feats, cfg), n=2000)
    measure("gpu labels, 2x A100 MIG mixed", lambda: mig.labels(mig_feats, mixed), n=2000)
    measure(
        "gpu source discover, AMD MI300X x2 (DRM)",
        lambda: gpu.discover(HostRoot.under(HOSTS / "gpu-amd-mi300"), cfg),
    )
    measure(
        "fpga source discover, Arria 10",
        lambda: FpgaSource().discover(HostRoot.under(HOSTS / "fpga-arria10"), cfg),
    )
    here, real_gpu, real_fpga = HostRoot(), GpuSource(), FpgaSource()
    before = rss_mib()
    t0 = time.perf_counter()
    real_gpu.discover(here, cfg)
    print(f"{'gpu source discover, this machine, first pass':<52} {(time.perf_counter() - t0) * 1e3:7.3f} ms")
    measure(
        "gpu + fpga discover, this machine",
        lambda: (real_gpu.discover(here, cfg), real_fpga.discover(here, cfg)),
    )
    print(f"{'RSS those passes added (NVML where it is used)':<52} {rss_mib() - before:7.1f} MiB")
    real_plugin = parse_config({"resources": [{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia"}}]})
    real_states, _ = build_states(real_plugin.resources, features=Features(), host=here)
    if real_states and real_states[0].physical_ids:
        n = len(real_states[0].physical_ids)
        measure(f"device plugin health poll, this machine's {n} GPU(s)", real_states[0].refresh)

    kind = GpuKind(nvml=lambda: FakeNvml(h100x8()), event_wait=0.05)
    plugin = parse_config(
        {"resources": [{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia"}}]}, KindRegistry((kind,))
    )
    (state,), _ = build_states(plugin.resources, features=Features(), host=h100)
    measure("device plugin health poll, 8 GPUs", state.refresh, n=1000)
    kind.close()


if __name__ == "__main__":
    main()
