from pathlib import Path

import pytest

from nfd.config import DEFAULT_CPUID_BLACKLIST, WorkerConfig
from nfd.settings import ConfigError, load_model, parse_duration


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
    cfg, warnings = load_model(
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
        ),
        WorkerConfig,
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
    cfg, warnings = load_model(write(tmp_path, 'core:\n  labelSources:\n   - "local"\n'), WorkerConfig)
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
        load_model(write(tmp_path, text), WorkerConfig)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_model(tmp_path / "nope.conf", WorkerConfig)


@pytest.mark.parametrize(("text", "seconds"), [("60s", 60), ("1h30m", 5400), ("500ms", 0.5), ("0", 0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


HUGE = "0x" + "f" * 5000  # a number YAML builds and Python will not print in decimal


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'core:\n  labelWhiteList: "a{99999999999}"\n',
            "core.labelWhiteList: 'a{99999999999}' is not a valid",
        ),
        ('core:\n  labelWhiteList: "' + "(" * 2000 + ')"\n', "core.labelWhiteList: '((("),
        ("core:\n  sleepInterval: .inf\n", "core.sleepInterval: inf is not a duration"),
        ("core:\n  sleepInterval: .nan\n", "core.sleepInterval: nan is not a duration"),
        ("core:\n  sleepInterval: -5\n", "core.sleepInterval: -5 is not a duration"),
        ("core:\n  sleepInterval: 1.0e+300\n", "core.sleepInterval: 1e+300 is not a duration"),
        (f"core:\n  sleepInterval: {HUGE}\n", "core.sleepInterval: a number of 20000 bits"),
        ("core:\n  sleepInterval: 99999999999h\n", "core.sleepInterval: '99999999999h' is longer than"),
        (
            f"sources:\n  kernel:\n    kconfigFile: {HUGE}\n",
            "sources.kernel.kconfigFile: a number of 20000 bits",
        ),
        (
            f"sources:\n  pci:\n    deviceLabelFields: [{HUGE}]\n",
            "sources.pci.deviceLabelFields[0]: a number of 20000 bits",
        ),
    ],
)
def test_values_that_cannot_be_used_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    """A regular expression re refuses with OverflowError or RecursionError, a number
    that is no duration (not finite, negative, beyond Go's 292 years), a number too
    large to print: each an error naming the key, not an internal error later."""
    with pytest.raises(ConfigError) as e:
        load_model(write(tmp_path, text), WorkerConfig)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_duration_longer_than_gos_is_refused() -> None:
    with pytest.raises(ConfigError, match="is longer than"):
        parse_duration("99999999999h", where="--sleep-interval")
    assert parse_duration("2562047h") == 2562047 * 3600.0  # Go's largest whole hours
