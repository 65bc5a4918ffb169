"""Which extended resources the device plugin serves on this node, without gRPC.

The worker reports these to the master (``devicePluginResources``). A resource is served
when its selector matches at least one device: the same rule the plugin process applies.
"""

from __future__ import annotations

from pathlib import Path

from nfd.devices.config import PluginConfig, load_config
from nfd.features import Features
from nfd.hostroot import HostRoot


def declared_resources(config: PluginConfig | str | Path) -> list[str]:
    """Sorted names of every resource the config declares, without looking at devices
    (cheap; validated like the plugin does, so a bad config raises ConfigError)."""
    cfg = config if isinstance(config, PluginConfig) else load_config(config)
    return sorted(r.name for r in cfg.resources)


def served_resources(config: PluginConfig | str | Path, *, features: Features, host: HostRoot) -> list[str]:
    """Sorted names of the resources that have devices here. ``config`` may be a path;
    a bad config raises :class:`nfd.devices.model.ConfigError`."""
    from nfd.devices.inventory import build_states

    cfg = config if isinstance(config, PluginConfig) else load_config(config)
    try:
        states, _warnings = build_states(cfg.resources, features=features, host=host)
        return sorted(s.name for s in states if s.slots)
    finally:
        # Kinds may have opened something to look (an NVML handle): let them go.
        for kind in {id(r.kind): r.kind for r in cfg.resources}.values():
            close = getattr(kind, "close", None)
            if callable(close):
                close()
