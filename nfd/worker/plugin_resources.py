"""The extended-resource names a device plugin serves, read from its config file.

Only the names are needed (the master must leave those resources to the kubelet), so
this is a small YAML read, not the device plugin's own config model, which would bring
grpc into the worker. Accepted shapes::

    resources:                      resources:
      - name: example.com/dev         example.com/dev: {...}
      - resourceName: vendor/x

and a top-level ``resourceName`` for a single-resource config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class PluginConfigError(ValueError):
    pass


def served_resources(path: str | Path) -> list[str]:
    import yaml

    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as e:
        raise PluginConfigError(f"device-plugin config {p}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise PluginConfigError(f"device-plugin config {p}: not valid YAML") from e
    names: list[str] = []
    if isinstance(data, dict):
        if isinstance(data.get("resourceName"), str):
            names.append(data["resourceName"])
        resources: Any = data.get("resources")
        if isinstance(resources, dict):
            names.extend(str(k) for k in resources)
        elif isinstance(resources, list):
            for i, item in enumerate(resources):
                name = None
                if isinstance(item, dict):
                    name = item.get("name", item.get("resourceName"))
                elif isinstance(item, str):
                    name = item
                if not isinstance(name, str) or not name:
                    raise PluginConfigError(f"device-plugin config {p}: resources[{i}] has no name")
                names.append(name)
    elif data is not None:
        raise PluginConfigError(f"device-plugin config {p}: expected a mapping")
    for n in names:
        if "/" not in n:
            raise PluginConfigError(
                f"device-plugin config {p}: resource {n!r} is not of the form vendor/name"
            )
    return sorted(set(names))
