"""The NUMA layout read from sysfs, through the one host-file reader."""

from __future__ import annotations

from pathlib import Path

from nfd.hostroot import HostRoot
from nfd.topology.layout import Layout, read_layout


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_a_bad_hugepage_count_costs_that_size_only(tmp_path: Path) -> None:
    node = "sys/devices/system/node/node0"
    _write(tmp_path, f"{node}/cpulist", "0-3\n")
    _write(tmp_path, f"{node}/meminfo", "Node 0 MemTotal:       1048576 kB\n")
    _write(tmp_path, f"{node}/distance", "10\n")
    _write(tmp_path, f"{node}/hugepages/hugepages-2048kB/nr_hugepages", "4\n")
    _write(tmp_path, f"{node}/hugepages/hugepages-1048576kB/nr_hugepages", "many\n")
    layout = read_layout(HostRoot.under(tmp_path))
    (n,) = layout.nodes
    assert n.cpus == frozenset(range(4))
    assert n.memory_bytes == 1048576 * 1024
    assert n.distances == {0: 10}
    assert n.hugepages_bytes == {"hugepages-2Mi": 4 * 2 * 1024 * 1024}


def test_a_cpulist_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    import os
    import threading

    node = tmp_path / "sys/devices/system/node/node0"
    node.mkdir(parents=True)
    os.mkfifo(node / "cpulist")  # nobody writes it: a plain open() waits for a writer
    got: list[Layout] = []
    t = threading.Thread(target=lambda: got.append(read_layout(HostRoot.under(tmp_path))), daemon=True)
    t.start()
    t.join(30)  # a bound, not a timing: the read must not wait for a writer at all
    assert got, "reading the layout blocked on a FIFO"
    (n,) = got[0].nodes
    assert n.cpus == frozenset()
