"""The system source on fixture trees and on this machine."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from nfd.config import SourcesConfig
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.sources.system import SystemSource, parse_os_release

SRC = SystemSource()


def test_arm64_amazon_linux(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("arm64-al2023"), cfg)
    assert f == Features(
        attributes={
            "system.name": {"nodename": "ip-10-0-1-23.ec2.internal"},
            "system.osrelease": {
                "NAME": "Amazon Linux", "VERSION": "2023", "ID": "amzn", "ID_LIKE": "fedora",
                "VERSION_ID": "2023", "PLATFORM_ID": "platform:al2023",
                "PRETTY_NAME": "Amazon Linux 2023", "ANSI_COLOR": "0;33", "VERSION_ID.major": "2023",
            },
            "system.dmiid": {"sys_vendor": "Amazon EC2", "product_name": "m7g.large"},
        }
    )  # fmt: skip
    assert SRC.labels(f, cfg) == {
        "os_release.ID": "amzn",
        "os_release.VERSION_ID": "2023",
        "os_release.VERSION_ID.major": "2023",
    }


def test_major_and_minor(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("gpu-a100"), cfg)
    assert SRC.labels(f, cfg) == {
        "os_release.ID": "ubuntu",
        "os_release.VERSION_ID": "22.04",
        "os_release.VERSION_ID.major": "22",
        "os_release.VERSION_ID.minor": "04",
    }
    assert f.attributes["system.dmiid"] == {
        "sys_vendor": "NVIDIA",
        "product_name": "DGXA100 920-23687-2530-000",
    }


def test_node_name_from_environment(
    host: Callable[[str], HostRoot], cfg: SourcesConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NODE_NAME", "node-a")
    assert SRC.discover(host("numa-2s"), cfg).attributes["system.name"] == {"nodename": "node-a"}


def test_os_release_parsing() -> None:
    text = "ID='opensuse-leap'\nVERSION_ID=\"15.5\"\nEMPTY=\n  INDENTED=x\n# C=1\nVARIANT_ID=server\n"
    assert parse_os_release(text) == {
        "ID": "opensuse-leap",
        "VERSION_ID": "15.5",
        "VERSION_ID.major": "15",
        "VERSION_ID.minor": "5",
        "VARIANT_ID": "server",
    }
    assert "VERSION_ID.major" not in parse_os_release("VERSION_ID=rolling\n")


def test_dangling_etc_link_falls_back_to_usr_lib(
    host_copy: Callable[[str], Path], cfg: SourcesConfig
) -> None:
    root = host_copy("numa-2s")
    os.remove(root / "etc/os-release")
    f = SRC.discover(HostRoot.under(root), cfg)
    assert f.attributes["system.osrelease"]["ID"] == "rocky"
    os.remove(root / "usr/lib/os-release")
    f = SRC.discover(HostRoot.under(root), cfg)
    assert "system.osrelease" not in f.attributes and SRC.labels(f, cfg) == {}


def test_live_machine(cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot(), cfg)
    assert f.attributes["system.name"]["nodename"] == os.uname().nodename
    release = f.attributes["system.osrelease"]
    assert release["ID"]
    labels = SRC.labels(f, cfg)
    assert labels["os_release.ID"] == release["ID"]
