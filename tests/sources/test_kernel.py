"""The kernel source on fixture trees, on bad input and on this machine."""

from __future__ import annotations

import gzip
import logging
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from nfd.config import KernelConfig, SourcesConfig
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.sources import kernel
from nfd.sources.kernel import KernelSource, parse_kconfig, parse_version

SRC = KernelSource()


def test_gpu_node_from_boot_config(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("gpu-a100"), cfg)
    assert f.attributes["kernel.version"] == {
        "full": "5.15.0-91-generic",
        "major": "5",
        "minor": "15",
        "revision": "0",
    }
    assert f.attributes["kernel.config"] == {
        "64BIT": "y",
        "NO_HZ_COMMON": "y",
        "NO_HZ_FULL": "y",
        "NO_HZ": "y",
        "PREEMPT_VOLUNTARY": "y",
        "HZ": "250",
        "LOCALVERSION": "",
        "DRM": "m",
        "VFIO_PCI": "m",
    }
    assert f.flags["kernel.loadedmodule"] == {
        "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia", "drm_kms_helper", "drm",
    }  # fmt: skip
    assert f.flags["kernel.enabledmodule"] == f.flags["kernel.loadedmodule"] | {"pcieportdrv", "nvme-core"}
    assert f.attributes["kernel.selinux"] == {"enabled": "false"}
    assert f.attributes["kernel.kvm"] == {"enabled": "true"}
    assert SRC.labels(f, cfg) == {
        "version.full": "5.15.0-91-generic",
        "version.major": "5",
        "version.minor": "15",
        "version.revision": "0",
        "config.NO_HZ": "true",
        "config.NO_HZ_FULL": "true",
    }


def test_selinux_enforcing_gives_label(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("sriov-nic"), cfg)
    assert f.attributes["kernel.selinux"] == {"enabled": "true"}
    assert SRC.labels(f, cfg)["selinux.enabled"] == "true"
    # permissive (enforce=0) is "false" and gives no label
    f2 = SRC.discover(host("numa-2s"), cfg)
    assert f2.attributes["kernel.selinux"] == {"enabled": "false"}
    assert "selinux.enabled" not in SRC.labels(f2, cfg)


def test_proc_config_gz_and_no_builtin_list(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("fpga-pac"), cfg)
    assert f.attributes["kernel.config"]["FPGA_DFL_PCI"] == "m"
    assert f.attributes["kernel.version"]["full"] == "6.1.0-13-amd64"
    # modules.builtin missing: upstream leaves enabledmodule out, loadedmodule stays
    assert "kernel.enabledmodule" not in f.flags
    assert f.flags["kernel.loadedmodule"] == {"dfl_pci", "dfl", "fpga_mgr", "xhci_pci"}
    assert f.attributes["kernel.kvm"] == {"enabled": "false"}
    labels = SRC.labels(f, cfg)
    assert labels["config.NO_HZ_IDLE"] == "true"
    assert "config.PREEMPT" not in labels  # PREEMPT_DYNAMIC / _VOLUNTARY are other options


def test_arm64_kernel(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("arm64-al2023"), cfg)
    assert f.attributes["kernel.version"] == {
        "full": "6.1.61-85.141.amzn2023.aarch64",
        "major": "6",
        "minor": "1",
        "revision": "61",
    }
    assert f.attributes["kernel.config"]["ARM64"] == "y"
    assert f.attributes["kernel.config"]["DEFAULT_HOSTNAME"] == "(none)"  # quotes trimmed
    assert f.flags["kernel.enabledmodule"] == {"ena", "nvme", "nvme-core"}


def test_config_opts_label_values(host: Callable[[str], HostRoot]) -> None:
    cfg = SourcesConfig(kernel=KernelConfig(config_opts=("DRM", "HZ", "NO_HZ", "MISSING")))
    labels = SRC.labels(SRC.discover(host("gpu-a100"), cfg), cfg)
    # y and m are "true"; other values are labelled as they are, as upstream does
    assert {k: v for k, v in labels.items() if k.startswith("config.")} == {
        "config.DRM": "true",
        "config.HZ": "250",
        "config.NO_HZ": "true",
    }


def test_kconfig_file_setting_wins(
    host_copy: Callable[[str], Path], tmp_path: Path, cfg: SourcesConfig
) -> None:
    root = host_copy("gpu-a100")
    own = tmp_path / "my.config.gz"
    own.write_bytes(gzip.compress(b"CONFIG_PREEMPT=y\n# CONFIG_NO_HZ is not set\n"))
    c = replace(cfg, kernel=replace(cfg.kernel, kconfig_file=str(own)))
    f = SRC.discover(HostRoot.under(root), c)
    assert f.attributes["kernel.config"] == {"PREEMPT": "y"}
    assert SRC.labels(f, c)["config.PREEMPT"] == "true"


def test_parse_version_forms() -> None:
    assert parse_version("6.8.0") == {"full": "6.8.0", "major": "6", "minor": "8", "revision": "0"}
    assert parse_version("6.8") == {"full": "6.8", "major": "6", "minor": "8", "revision": ""}
    # characters a label value cannot hold become "_", edges trimmed
    assert parse_version("5.4.0+git#1 ")["full"] == "5.4.0_git_1"
    assert parse_version("custom") == {"full": "custom"}


def test_parse_kconfig_keeps_raw_values() -> None:
    text = b'CONFIG_A=y\nCONFIG_B=m\nCONFIG_C="x y"\n# CONFIG_D is not set\nCONFIG_E\nNOTCONFIG_F=1\nCONFIG_G=a=b'
    assert parse_kconfig(text) == {"A": "y", "B": "m", "C": "x y", "G": "a=b"}


def test_parse_kconfig_in_pieces_loses_no_line() -> None:
    # Longer than a piece, with lines of every length across the cuts, a value that is
    # not UTF-8, and no newline at the end.
    lines = [
        f"CONFIG_OPT_{i}={'v' * (i % 97)}" if i % 5 else f"# CONFIG_OFF_{i} is not set" for i in range(3000)
    ]
    data = "\n".join(lines).encode() + b'\nCONFIG_BAD="\xff"\nCONFIG_LAST=y'
    assert len(data) > 4 * kernel._PIECE
    expected = {f"OPT_{i}": "v" * (i % 97) for i in range(3000) if i % 5}
    expected |= {"BAD": "\ufffd", "LAST": "y"}
    assert parse_kconfig(data) == expected


def test_repeated_passes_follow_a_changed_config(
    host_copy: Callable[[str], Path], cfg: SourcesConfig
) -> None:
    root = host_copy("fpga-pac")
    src = KernelSource()
    first = src.discover(HostRoot.under(root), cfg)
    first.attributes["kernel.config"]["FPGA"] = "mutated"  # callers may change their copy
    assert src.discover(HostRoot.under(root), cfg).attributes["kernel.config"]["FPGA"] == "m"
    (root / "proc/config.gz").write_bytes(gzip.compress(b"CONFIG_ONLY=y\n"))
    assert src.discover(HostRoot.under(root), cfg).attributes["kernel.config"] == {"ONLY": "y"}


def test_broken_config_gz_falls_back_and_is_logged(
    host_copy: Callable[[str], Path], cfg: SourcesConfig, caplog: pytest.LogCaptureFixture
) -> None:
    root = host_copy("fpga-pac")
    (root / "proc/config.gz").write_bytes(b"not gzip at all")
    (root / "boot").mkdir(exist_ok=True)
    (root / "boot/config-6.1.0-13-amd64").write_text("CONFIG_FROM_BOOT=y\n")
    with caplog.at_level(logging.WARNING):
        f = SRC.discover(HostRoot.under(root), cfg)
    assert f.attributes["kernel.config"] == {"FROM_BOOT": "y"}
    assert any("config.gz" in r.getMessage() for r in caplog.records)


def test_unreadable_files_are_logged_and_the_rest_goes_on(
    host_copy: Callable[[str], Path], cfg: SourcesConfig, caplog: pytest.LogCaptureFixture
) -> None:
    root = host_copy("gpu-a100")
    # a directory where a file should be: EISDIR on read, even for root
    os.remove(root / "proc/modules")
    (root / "proc/modules").mkdir()
    with caplog.at_level(logging.WARNING):
        f = SRC.discover(HostRoot.under(root), cfg)
    assert "kernel.loadedmodule" not in f.flags
    assert f.flags["kernel.enabledmodule"] == {"pcieportdrv", "nvme-core"}
    assert f.attributes["kernel.version"]["major"] == "5"
    assert any("proc/modules" in r.getMessage() for r in caplog.records)


def test_empty_tree_gives_only_kvm(tmp_path: Path, cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot.under(tmp_path), cfg)
    assert f == Features(attributes={"kernel.kvm": {"enabled": "false"}})
    assert SRC.labels(f, cfg) == {}


def test_live_machine(cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot(), cfg)
    version = f.attributes["kernel.version"]
    assert version["full"] and version["major"] == os.uname().release.split(".")[0]
    assert f.attributes["kernel.kvm"]["enabled"] in ("true", "false")
    labels = SRC.labels(f, cfg)
    assert labels["version.full"] == version["full"]
    for opt in cfg.kernel.config_opts:
        if f.attributes.get("kernel.config", {}).get(opt) in ("y", "m"):
            assert labels[f"config.{opt}"] == "true"
