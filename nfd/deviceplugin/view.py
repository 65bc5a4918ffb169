"""Which extended resources this node's devices are served under, without gRPC.

The worker reports these to the master (``devicePluginResources``), which then never
patches them as extended resources itself. A device-plugin resource is served when its
selector matches at least one device: the same rule the plugin process applies. A
resource served through DRA is always reported, with the extended resource name its
DeviceClass maps: the scheduler serves that name from ResourceSlices, so the node must
not advertise it a second way.
"""

from __future__ import annotations

from pathlib import Path

from nfd.devices.config import DEVICE_PLUGIN, PluginConfig, load_config
from nfd.features import Features
from nfd.hostroot import HostRoot


def declared_resources(config: PluginConfig | str | Path) -> list[str]:
    """Sorted names of every resource the config declares, without looking at devices
    (cheap; validated like the plugin does, so a bad config raises ConfigError)."""
    cfg = config if isinstance(config, PluginConfig) else load_config(config)
    return sorted(r.name for r in cfg.resources)


def served_resources(config: PluginConfig | str | Path, *, features: Features, host: HostRoot) -> list[str]:
    """Sorted names of the resources that have devices here. ``config`` may be a path;
    a bad config raises :class:`nfd.settings.ConfigError`."""
    from nfd.devices.inventory import build_states

    cfg = config if isinstance(config, PluginConfig) else load_config(config)
    dra = {n for r in cfg.resources if r.dra for n in (r.name, r.extended_resource_name) if n}
    try:
        states, _warnings = build_states(cfg.served_by(DEVICE_PLUGIN), features=features, host=host)
        return sorted({s.name for s in states if s.slots} | dra)
    finally:
        # Kinds may have opened something to look (an NVML handle): let them go.
        for kind in {id(r.kind): r.kind for r in cfg.resources}.values():
            close = getattr(kind, "close", None)
            if callable(close):
                close()
