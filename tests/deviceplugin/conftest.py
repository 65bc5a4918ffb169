from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures import FixtureHost
from kubelet_standin import KubeletStandIn, short_tmpdir

from nfd.deviceplugin.manager import Manager
from nfd.deviceplugin.metrics import DevicePluginMetrics
from nfd.devices.config import parse_config
from nfd.devices.inventory import build_states
from nfd.devices.kinds import KindRegistry
from nfd.features import Features
from nfd.hostroot import HostRoot


@pytest.fixture
def fx(tmp_path: Path) -> FixtureHost:
    return FixtureHost(tmp_path / "host")


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    d = short_tmpdir()
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kubelet(plugin_dir: Path) -> Iterator[KubeletStandIn]:
    k = KubeletStandIn(plugin_dir)
    k.start()
    yield k
    k.stop()


@pytest.fixture
def start_plugin(fx: FixtureHost, plugin_dir: Path, tmp_path: Path) -> Iterator[Callable[..., Manager]]:
    """Start a Manager for a config given as a dict: over the fixture host by default, or
    with other kinds, host and features."""
    managers: list[Manager] = []

    def start(
        config: dict[str, Any],
        *,
        kinds: KindRegistry | None = None,
        host: HostRoot | None = None,
        features: Features | None = None,
        metrics: DevicePluginMetrics | None = None,
    ) -> Manager:
        cfg = parse_config(config, kinds)
        states, warnings = build_states(
            cfg.resources,
            features=fx.features() if features is None else features,
            host=fx.host if host is None else host,
        )
        if host is not None:  # a caller-built node: every resource must find its devices
            assert warnings == []
        m = Manager(
            states,
            plugin_dir=str(plugin_dir),
            cdi_dir=str(tmp_path / "cdi"),
            poll_interval=0.05,
            watch_interval=0.02,
            use_udev=False,
            metrics=metrics,
        )
        m.start()
        managers.append(m)
        return m

    yield start
    for m in managers:
        m.stop()
