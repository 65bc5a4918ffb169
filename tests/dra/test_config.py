"""The device config's DRA keys: every error names the key at fault."""

from __future__ import annotations

from typing import Any

import pytest

from nfd.devices.config import DEFAULT_DRIVER_NAME, parse_config
from nfd.settings import ConfigError


def err(data: Any) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    return str(e.value)


def dra(name: str = "example.com/x", **kw: Any) -> dict[str, Any]:
    return {"name": name, "pci": {"vendor": "1172"}, "servedBy": "dra", **kw}


def test_defaults() -> None:
    cfg = parse_config({"resources": [dra(), {"name": "example.com/y", "usb": {"vendor": "0403"}}]})
    assert cfg.driver_name == DEFAULT_DRIVER_NAME == "nfd.node.kubernetes.io"
    x, y = cfg.resources
    assert x.dra and x.extended_resource_name == "example.com/x"
    assert not y.dra and y.served_by == "devicePlugin" and y.extended_resource_name is None
    assert (
        parse_config({"resources": [dra(extendedResourceName=False)]}).resources[0].extended_resource_name
        is None
    )
    assert (
        parse_config({"dra": {"driverName": "gpu.example.com"}, "resources": []}).driver_name
        == "gpu.example.com"
    )
    assert cfg.dra.taint_effect == "NoSchedule"
    assert (
        parse_config({"dra": {"taintEffect": "NoExecute"}, "resources": []}).dra.taint_effect == "NoExecute"
    )


@pytest.mark.parametrize(
    ("data", "expect"),
    [
        (
            {"resources": [dra(servedBy="kubelet")]},
            "resources[0].servedBy: 'kubelet' is not one of devicePlugin, dra",
        ),
        (
            {"resources": [dra(servedBy=["dra", "devicePlugin"])]},
            "resources[0].servedBy: served by the device plugin or by DRA, never both",
        ),
        (
            {
                "resources": [
                    {"name": "example.com/x", "pci": {"vendor": "1"}, "extendedResourceName": "example.com/z"}
                ]
            },
            "resources[0].extendedResourceName: only for servedBy: dra",
        ),
        (
            {"resources": [dra(extendedResourceName="gpu")]},
            "resources[0].extendedResourceName: invalid resource name",
        ),
        (
            {"resources": [dra(extendedResourceName=3)]},
            "resources[0].extendedResourceName: expected a string",
        ),
        (
            {"resources": [dra(), dra("example.com/y", extendedResourceName="example.com/x")]},
            "resources[1].extendedResourceName: 'example.com/x' is already served by resources[0].name",
        ),
        ({"resources": [dra(replicas=2)]}, "resources[0].replicas: DRA hands out whole devices"),
        ({"resources": [dra("example.com/" + "x" * 60)]}, "is longer than 64 characters"),
        (
            {"dra": {"driver": "x.example.com"}, "resources": []},
            "dra.driver: unknown key",
        ),
        ({"dra": "x.example.com", "resources": []}, "dra: expected a mapping"),
        ({"dra": {"driverName": "-x.example.com"}, "resources": []}, "dra.driverName: invalid driver name"),
        (
            {"dra": {"taintEffect": "PreferNoSchedule"}, "resources": []},
            "dra.taintEffect: 'PreferNoSchedule' is not one of NoSchedule, NoExecute",
        ),
    ],
)
def test_errors_name_the_key(data: dict[str, Any], expect: str) -> None:
    assert expect in err(data)
