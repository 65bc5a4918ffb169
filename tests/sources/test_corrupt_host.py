"""A corrupt host file costs its own value, never a whole source, and never blocks."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from nfd.config import SourcesConfig
from nfd.discovery import discover
from nfd.hostroot import HostRoot
from nfd.sources import default_registry

GPU = "sys/bus/pci/devices/0000:47:00.0"  # an A100 on NUMA node 1


def run(root: Path, cfg: SourcesConfig):
    out: list[object] = []
    t = threading.Thread(
        target=lambda: out.append(discover(default_registry().select(["all"]), HostRoot.under(root), cfg)),
        daemon=True,
    )
    t.start()
    t.join(60)
    assert not t.is_alive(), "discovery blocked"
    return out[0]


def test_one_bad_value_costs_that_value_only(host_copy: Callable[[str], Path], cfg: SourcesConfig) -> None:
    root = host_copy("gpu-a100")
    clean = run(root, cfg).features
    (root / "proc/sys/kernel/osrelease").write_bytes(b"5.15.0-1\x00x\n")
    (root / "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages").write_text("9" * 4_000_000)
    (root / GPU / "numa_node").write_text("1" * 4_000_000)
    result = run(root, cfg)
    assert result.errors == {}
    f = result.features
    # kernel: the version is gone (and the config file named by it), the rest stays.
    assert "kernel.version" not in f.attributes and "kernel.version" in clean.attributes
    for name in ("kernel.selinux", "kernel.kvm"):
        assert f.attributes.get(name) == clean.attributes.get(name), name
    assert f.flags.get("kernel.loadedmodule") == clean.flags.get("kernel.loadedmodule")
    # memory: one hugepage size is gone, the other and NUMA stay.
    huge = f.attributes["memory.hugepages"]
    assert (
        "hugepages-2Mi" not in huge
        and huge["hugepages-1Gi"] == clean.attributes["memory.hugepages"]["hugepages-1Gi"]
    )
    assert f.attributes["memory.numa"] == clean.attributes["memory.numa"]

    # gpu: that device loses its NUMA node, not its place.
    def gpus(feats):
        return {i["pci_address"]: i for i in feats.instances["gpu.nvidia"]}

    before, after = gpus(clean), gpus(f)
    assert before.keys() == after.keys()
    assert before["0000:47:00.0"]["numa_node"] == "1" and "numa_node" not in after["0000:47:00.0"]
    assert {k: v for k, v in after.items() if k != "0000:47:00.0"} == {
        k: v for k, v in before.items() if k != "0000:47:00.0"
    }


def test_fifos_never_block_discovery(host_copy: Callable[[str], Path], cfg: SourcesConfig) -> None:
    root = host_copy("gpu-a100")
    for rel in ("proc/sys/kernel/osrelease", "proc/sys/kernel/hostname", f"{GPU}/numa_node", "proc/swaps",
                "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "usr/lib/os-release"):  # fmt: skip
        p = root / rel
        if p.exists():
            p.unlink()
        os.mkfifo(p)
    fd = root / "etc/kubernetes/node-feature-discovery/features.d"
    fd.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fd / "pipe")
    result = run(root, cfg)
    assert result.errors == {}
    assert "kernel.version" not in result.features.attributes


def test_absolute_os_release_link_is_the_hosts(host_copy: Callable[[str], Path], cfg: SourcesConfig) -> None:
    root = host_copy("gpu-a100")
    (root / "etc/os-release").unlink()
    os.symlink("/usr/lib/os-release", root / "etc/os-release")
    f = run(root, cfg).features
    assert f.attributes["system.osrelease"]["ID"] == "ubuntu"  # the fixture's, not this machine's
    (root / "usr/lib/os-release").write_text('ID="hostos"\nVERSION_ID="9.1"\n')
    assert run(root, cfg).features.attributes["system.osrelease"]["ID"] == "hostos"
