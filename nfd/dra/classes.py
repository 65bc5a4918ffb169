"""DeviceClasses for the config's DRA resources (``nfd dra --device-classes``).

One class per resource, named ``<short name>.<domain>`` (``example.com/gpu`` ->
``gpu.example.com``), selecting this driver's devices of that resource with CEL. A class
carries the resource's ``extendedResourceName``, so that pods which still ask for the
extended resource in ``resources.limits`` are served through DRA by the scheduler.
"""

from __future__ import annotations

import json
from typing import Any

from nfd.devices.config import PluginConfig


def class_name(resource: str) -> str:
    domain, _, short = resource.partition("/")
    return "".join(c if c.isalnum() or c in ".-" else "-" for c in f"{short}.{domain}".lower()).strip(".-")


def device_classes(config: PluginConfig) -> list[dict[str, Any]]:
    driver = config.driver_name
    out = []
    for r in config.resources:
        if not r.dra:
            continue
        expr = f"device.driver == {json.dumps(driver)} && device.attributes[{json.dumps(driver)}].resource == {json.dumps(r.name)}"
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expr}}]}
        if r.extended_resource_name:
            spec["extendedResourceName"] = r.extended_resource_name
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": class_name(r.name)},
                "spec": spec,
            }
        )
    return out
