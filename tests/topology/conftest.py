from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixture_node import allocatable, pods, write_sysfs
from podresources_standin import PodResourcesStandIn, short_tmpdir

from nfd.hostroot import HostRoot


@pytest.fixture
def host(tmp_path: Path) -> HostRoot:
    return HostRoot.under(write_sysfs(tmp_path / "host"))


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    d = Path(short_tmpdir())
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kubelet(sock_dir: Path) -> Iterator[PodResourcesStandIn]:
    with PodResourcesStandIn(sock_dir / "kubelet.sock", allocatable=allocatable(), pods=pods()) as k:
        yield k


@pytest.fixture
def kubelet_config(tmp_path: Path) -> Path:
    p = tmp_path / "kubelet-config.yaml"
    p.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "cpuManagerPolicy: static\nreservedSystemCPUs: 0,96\nmemoryManagerPolicy: Static\n"
        "topologyManagerPolicy: single-numa-node\ntopologyManagerScope: pod\n"
    )
    return p
