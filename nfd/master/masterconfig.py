"""The master's config file: ``core`` and ``sources`` as in ``nfd-worker.conf`` (the
master computes the built-in labels centrally with them), plus upstream nfd-master's
top-level keys where they mean the same here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nfd.config import ConfigError, WorkerConfig, from_mapping, load_config_file, parse_duration
from nfd.master.settings import MasterSettings

_LIST_KEYS = {"extraLabelNs": "extra_label_ns", "denyLabelNs": "deny_label_ns"}


def load_master_config(path: str | Path, settings: MasterSettings) -> list[str]:
    """Read the file into ``settings`` (in place); returns warnings for unknown keys.
    Raises ConfigError, one line naming the file once and the key, for anything
    unusable."""
    _, warnings = load_config_file(path, lambda data, w: _apply(data, settings, w))
    return warnings


def _apply(data: Any, settings: MasterSettings, warnings: list[str]) -> None:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping")
    labeling: dict[str, Any] = {k: data[k] for k in ("core", "sources") if k in data}
    settings.labeling = from_mapping(WorkerConfig, labeling, warnings=warnings)
    for key, value in data.items():
        where = str(key)
        if key in ("core", "sources"):
            continue
        if key in _LIST_KEYS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{where}: expected a list of strings")
            setattr(settings.policy, _LIST_KEYS[key], [*getattr(settings.policy, _LIST_KEYS[key]), *value])
        elif key == "labelWhiteList":
            settings.policy.label_whitelist = _str(value, where)
        elif key == "enableTaints":
            settings.policy.enable_taints = _bool(value, where)
        elif key == "noPublish":
            settings.kube.publish = not _bool(value, where)
        elif key == "resyncPeriod":
            settings.kube.resync_period_s = parse_duration(_str(value, where), where=where) or 3600.0
        elif key == "nfdApiParallelism":
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{where}: expected a positive integer")
            settings.kube.parallelism = value
        elif key == "klog":
            continue  # upstream's logging options; nothing to set here
        else:
            warnings.append(f"unknown key {key!r} ignored")


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise ConfigError(f"{where}: expected a string")
    return v


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(f"{where}: expected true or false")
    return v
