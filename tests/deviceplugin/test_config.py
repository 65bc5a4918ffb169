"""Config validation: every error names the key at fault."""

from __future__ import annotations

from typing import Any

import pytest

from nfd.devices.config import DEFAULT_DRIVER_NAME, extended_resource_error, parse_config
from nfd.settings import ConfigError


def err(data: Any) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    return str(e.value)


def res(**kw: Any) -> dict[str, Any]:
    return {"resources": [{"name": "example.com/x", **kw}]}


def test_empty_resource_list_is_allowed() -> None:
    assert parse_config({"resources": []}).resources == ()


def test_keys_left_empty_are_keys_left_out() -> None:
    """``deviceNodes:`` with its entries commented out is null in YAML."""
    cfg = parse_config({**res(devnode="/dev/x", deviceNodes=None, mounts=None, env=None), "dra": None})
    (r,) = cfg.resources
    assert (r.device_nodes, r.mounts, r.env, cfg.driver_name) == ((), (), (), DEFAULT_DRIVER_NAME)


def test_full_config() -> None:
    cfg = parse_config(
        res(
            pci={"vendor": ["8086", "0x10DE"], "class": "03", "driver": "vfio-pci", "address": "0000:3b:*"},
            deviceNodes=[
                "/dev/vfio/{iommu_group}",
                {"path": "/dev/dri/card0", "containerPath": "/dev/card", "permissions": "rw"},
            ],
            mounts=[{"hostPath": "/opt/x", "containerPath": "/x"}],
            env={"A": "{address}", "B": 3},
            replicas=4,
            cdi={"kind": "example.com/x", "version": "0.5.0"},
            preStartCheck=True,
        )
    )
    r = cfg.resources[0]
    assert r.kind.name == "pci"
    assert r.selector.vendor == ("8086", "10de") and r.selector.class_prefix == ("03",)
    assert (
        r.replicas == 4 and r.cdi_kind == "example.com/x" and r.cdi_version == "0.5.0" and r.pre_start_check
    )
    assert r.device_nodes[1].container_path == "/dev/card" and r.device_nodes[1].permissions == "rw"
    assert r.env == (("A", "{address}"), ("B", "3"))
    assert r.mounts[0].read_only


@pytest.mark.parametrize(
    ("data", "expect"),
    [
        (res(pci={"vendr": "8086"}), "resources[0].pci.vendr: unknown selector key"),
        (res(usb={"vendor": "0403", "model": "x"}), "resources[0].usb.model: unknown selector key"),
        (
            res(pci={"vendor": 8086}),
            "resources[0].pci.vendor: expected a string or a list of strings, got 8086 (quote hex IDs",
        ),
        (res(pci={"vendor": "80g6"}), "resources[0].pci.vendor: '80g6' is not a hex ID"),
        (res(pci={"address": "3b:00"}), "resources[0].pci.address"),
        (res(pci={}), "resources[0].pci: empty selector"),
        (res(devnode="/sys/foo*"), "resources[0].devnode: '/sys/foo*' must be a glob under /dev/"),
        (res(), "resources[0]: needs exactly one device selector"),
        (
            res(pci={"vendor": "8086"}, usb={"vendor": "0403"}),
            "resources[0]: needs exactly one device selector (pci, usb, devnode, gpu, fpga), got pci, usb",
        ),
        (res(pci={"vendor": "8086"}, colour="red"), "resources[0].colour: unknown key"),
        (
            res(pci={"vendor": "8086"}, servedBy=[{"dra": True}]),
            "resources[0].servedBy: {'dra': True} is not one of devicePlugin, dra",
        ),
        (
            res(pci={"vendor": "8086"}, replicas=0),
            "resources[0].replicas: 0: must be at least 1",
        ),
        (
            res(pci={"vendor": "8086"}, deviceNodes=["/dev/x/{group}"]),
            "resources[0].deviceNodes[0].path: unknown placeholder {group} (known: {address}",
        ),
        (
            res(pci={"vendor": "8086"}, deviceNodes=["/tmp/x"]),
            "resources[0].deviceNodes[0].path: device nodes live under /dev/",
        ),
        (
            res(pci={"vendor": "8086"}, deviceNodes=[{"path": "/dev/x", "permissions": "rwx"}]),
            "resources[0].deviceNodes[0].permissions",
        ),
        (
            res(pci={"vendor": "8086"}, mounts=[{"hostPath": "rel"}]),
            "resources[0].mounts[0].hostPath: expected an absolute path",
        ),
        (
            res(pci={"vendor": "8086"}, mounts=[{"hostPath": "/opt/x", "readOnly": "yes"}]),
            "resources[0].mounts[0].readOnly: expected true or false",
        ),
        (
            res(pci={"vendor": "8086"}, mounts=[{"hostPath": "/opt/x", "readOnly": 0}]),
            "resources[0].mounts[0].readOnly: expected true or false",
        ),
        (
            res(pci={"vendor": "8086"}, env={"1X": "a"}),
            "resources[0].env: '1X' is not a valid environment variable name",
        ),
        (res(pci={"vendor": "8086"}, cdi=True), "resources[0].cdi: a CDI device needs something to inject"),
        (res(devnode="/dev/x", cdi={"kind": "nodomain"}), "resources[0].cdi: 'nodomain' is not a CDI kind"),
        (res(devnode="/dev/x", cdi={"kind": ""}), "resources[0].cdi: '' is not a CDI kind"),
        (res(devnode="/dev/x", cdi={"version": "9.9.9"}), "resources[0].cdi.version"),
        (
            {"resources": [{"name": "fpga", "devnode": "/dev/x"}]},
            "resources[0].name: invalid resource name: 'fpga' must be 'vendor-domain/name'",
        ),
        (
            {"resources": [{"name": "kubernetes.io/fpga", "devnode": "/dev/x"}]},
            "reserved for native resources",
        ),
        (
            {"resources": [{"name": "Example.com/fpga", "devnode": "/dev/x"}]},
            "resources[0].name: invalid resource name",
        ),
        (
            {"resources": [{"name": "example.com/fp ga", "devnode": "/dev/x"}]},
            "resources[0].name: invalid resource name",
        ),
        (
            {
                "resources": [
                    {"name": "example.com/a", "devnode": "/dev/x"},
                    {"name": "example.com/a", "devnode": "/dev/y"},
                ]
            },
            "resources[1].name: 'example.com/a' is declared twice",
        ),
        ({"resources": {}}, "resources: expected a list"),
        ({}, "resources: required"),
        ({"resource": []}, "resources: required"),
        ({"resources": [], "resource": []}, "resource: unknown key"),
        ([1], "expected a mapping"),
    ],
)
def test_errors_name_the_key(data: Any, expect: str) -> None:
    assert expect in err(data)


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("example.com/fpga", True),
        ("nvidia.com/gpu", True),
        ("intel.com/sriov_net-A.1", True),
        ("gpu", False),
        ("example.com/", False),
        ("/gpu", False),
        ("a.kubernetes.io/x", False),
        ("example.com/a/b", False),
        ("example.com/-x", False),
        ("example.com/" + "x" * 64, False),
    ],
)
def test_extended_resource_names(name: str, ok: bool) -> None:
    assert (extended_resource_error(name) is None) is ok


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"resources": [], "": 1}, "'': unknown key"),
        ({"resources": [], " ": 1}, "' ': unknown key"),
        ({"resources": [], "a.b": 1}, "'a.b': unknown key"),
        (res(devnode="/dev/x", **{"a\nb": 1}), "resources[0].'a\\nb': unknown key"),
        (res(pci={"": "8086"}), "resources[0].pci.'': unknown selector key"),
        (res(pci={None: "8086"}), "resources[0].pci.None: unknown selector key"),
    ],
)
def test_an_unknown_key_that_is_no_plain_name_is_quoted(data: Any, message: str) -> None:
    """An empty key, one of blanks, one with a dot or a newline: quoted, so that the
    message names it, on one line, and no key path reads as another."""
    assert err(data).startswith(message)


def test_a_key_that_is_no_string_is_not_read_as_a_list_index() -> None:
    assert err({"resources": [], "dra": {-1: None}}) == "dra: the key -1 is not a string"
    assert err({"resources": [], 1: 2}) == "the key 1 is not a string"


def test_a_selector_value_too_large_to_print_names_its_key() -> None:
    """YAML builds 0xfff... of 5,000 digits; Python will not print it in decimal."""
    message = err(res(pci={"vendor": int("f" * 5000, 16)}))
    assert message.startswith("resources[0].pci.vendor: expected a string or a list of strings, got a number")
    assert len(err(res(pci={"vendor": [["x"] * 1000]}))) < 200
