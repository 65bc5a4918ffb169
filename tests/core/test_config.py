from pathlib import Path

import pytest

from nfd.config import (
    DEFAULT_CPUID_BLACKLIST,
    ConfigError,
    WorkerConfig,
    load_worker_config,
    parse_duration,
)


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "nfd-worker.conf"
    p.write_text(text)
    return p


def test_defaults_are_upstreams() -> None:
    c = WorkerConfig()
    assert c.core.sleep_interval == 60.0
    assert c.sources.pci.device_class_whitelist == ("03", "0b40", "12")
    assert c.sources.usb.device_label_fields == ("class", "vendor", "device")
    assert c.sources.cpu.cpuid.attribute_blacklist == DEFAULT_CPUID_BLACKLIST
    assert "SSE42" in DEFAULT_CPUID_BLACKLIST
    assert c.sources.kernel.config_opts == ("NO_HZ", "NO_HZ_IDLE", "NO_HZ_FULL", "PREEMPT")


def test_upstream_keys(tmp_path: Path) -> None:
    cfg, warnings = load_worker_config(
        write(
            tmp_path,
            """
core:
  labelWhiteList: "^cpu-"
  sleepInterval: 1m30s
  featureSources: [cpu, -usb]
  klog: {v: 3}
sources:
  cpu:
    cpuid:
      attributeWhitelist: [AVX512F]
  kernel:
    configOpts: [PREEMPT]
    kconfigFile: /boot/custom
  pci:
    deviceClassWhitelist: ["0200", "03"]
    deviceLabelFields: [vendor]
""",
        )
    )
    assert cfg.core.label_whitelist == "^cpu-"
    assert cfg.core.sleep_interval == 90.0
    assert cfg.core.feature_sources == ("cpu", "-usb")
    assert cfg.sources.cpu.cpuid.attribute_whitelist == ("AVX512F",)
    assert cfg.sources.cpu.cpuid.attribute_blacklist == DEFAULT_CPUID_BLACKLIST
    assert cfg.sources.kernel.kconfig_file == "/boot/custom"
    assert cfg.sources.pci.device_label_fields == ("vendor",)
    assert warnings == [f"config file {tmp_path / 'nfd-worker.conf'}: core: unknown key 'klog' ignored"]


def test_intel_published_worker_config(tmp_path: Path) -> None:
    cfg, warnings = load_worker_config(write(tmp_path, 'core:\n  labelSources:\n   - "local"\n'))
    assert cfg.core.label_sources == ("local",)
    assert warnings == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("core: [1, 2]", "core: expected a mapping"),
        ("core:\n  noPublish: 3\n", "core.noPublish: expected true or false"),
        (
            "sources:\n  pci:\n    deviceClassWhitelist: '03'\n",
            "sources.pci.deviceClassWhitelist: expected a list",
        ),
        ("core:\n  sleepInterval: soon\n", "sleepInterval: 'soon' is not a duration"),
        ("core: {\n", "not valid YAML: line"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=__import__("re").escape(message)):
        load_worker_config(write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_worker_config(tmp_path / "nope.conf")


@pytest.mark.parametrize(("text", "seconds"), [("60s", 60), ("1h30m", 5400), ("500ms", 0.5), ("0", 0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
