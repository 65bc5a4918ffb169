from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from deviceplugin.fixtures import FixtureHost
from dra.claims import DRIVER, NODE
from dra.kubelet_dra import DraKubelet

from nfd.devices.config import DRA, parse_config
from nfd.devices.inventory import ResourceState, build_states
from nfd.dra.driver import DraDriver
from nfd.dra.slices import DraInventory
from nfd.features import Features
from nfd.hostroot import HostRoot
from tests.fakeapi import FakeApiServer


@pytest.fixture
def fx(tmp_path: Path) -> FixtureHost:
    return FixtureHost(tmp_path / "host")


@pytest.fixture
def dirs() -> Iterator[dict[str, Path]]:
    """Short paths: unix socket paths are limited to 107 bytes."""
    d = Path(tempfile.mkdtemp(prefix="nfddra-", dir="/tmp"))
    out = {"plugin": d / "plugins" / DRIVER, "registry": d / "plugins_registry", "cdi": d / "cdi"}
    out["registry"].mkdir(parents=True)
    yield out
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kubelet(dirs: dict[str, Path]) -> Iterator[DraKubelet]:
    k = DraKubelet(dirs["registry"]).start()
    yield k
    k.stop()


FPGA_CONFIG: dict[str, Any] = {
    "resources": [
        {
            "name": "example.com/fpga",
            "pci": {"vendor": "1172"},
            "servedBy": "dra",
            "deviceNodes": ["/dev/vfio/{iommu_group}", "/dev/vfio/vfio"],
        },
        {"name": "example.com/tty", "devnode": "/dev/ttyS*", "servedBy": "dra"},
        {"name": "example.com/serial", "usb": {"vendor": "0403"}},
    ]
}


@pytest.fixture
def start_driver(
    fx: FixtureHost, dirs: dict[str, Path], fake_api: FakeApiServer
) -> Iterator[Callable[..., DraDriver]]:
    drivers: list[DraDriver] = []
    clients: list[Any] = []

    def start(
        config: dict[str, Any] | None = None,
        *,
        node: str = NODE,
        features: Callable[[], Features] | None = None,
        rediscover_interval: float = 0.0,
        token: str | None = None,
        instance: str = "",
    ) -> DraDriver:
        cfg = parse_config(config or FPGA_CONFIG)
        feats = features or fx.features

        def discover() -> tuple[list[ResourceState], Features, HostRoot]:
            f = feats()
            return build_states(cfg.served_by(DRA), features=f, host=fx.host)[0], f, fx.host

        states, f, _host = discover()
        inventory = DraInventory(states, features=f, host=fx.host)
        client = fake_api.transport(token)
        clients.append(client)
        d = DraDriver(
            states,
            inventory,
            api=client,
            driver=cfg.driver_name,
            node=node,
            plugin_dir=str(dirs["plugin"]),
            registry_dir=str(dirs["registry"]),
            cdi_dir=str(dirs["cdi"]),
            poll_interval=0.05,
            use_udev=False,
            rediscover=discover,
            rediscover_interval=rediscover_interval,
            taint_effect=cfg.dra.taint_effect,
            instance=instance,
        )
        d.start()
        drivers.append(d)
        return d

    yield start
    for d in drivers:
        d.stop()
    for c in clients:
        c.close()
