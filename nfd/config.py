"""Worker-side configuration: the ``core`` and ``sources`` groups of upstream's
``nfd-worker.conf``, with upstream's key names and defaults.

Frozen dataclasses. Keys we do not know are reported as warnings (upstream's file
has keys that mean nothing here, such as ``klog``); keys we know with a value of the wrong
type are errors that name the key.

Adding a group (say ``sources.gpu``): declare it like the others and give the parent a
field with ``default_factory``; the loader derives the camelCase keys from the field
names and converts each value to what the field's default is (str, bool, int,
float/duration, a tuple of strings, a nested group; ``metadata={"raw": True}`` keeps a
list's items as they are)::

    @dataclass(frozen=True, slots=True)
    class GpuConfig:
        device_label_fields: tuple[str, ...] = ("vendor", "product")

    @dataclass(frozen=True, slots=True)
    class SourcesConfig:
        ...
        gpu: GpuConfig = field(default_factory=GpuConfig)

A ``__post_init__`` may check values and raise ConfigError, as with dataclasses.
``field(metadata={"key": "otherName"})`` names a key that is not the camelCase of the
field. The master's settings hold a :class:`WorkerConfig` too (``labeling``): one
loader for both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, TypeVar

from nfd.chars import shown

# At run time, not only for mypy: the master's pydantic settings hold a WorkerConfig and
# read its fields' types.
R = TypeVar("R")
T = TypeVar("T")

# Upstream's default cpuid label blacklist: these stay in the raw features.
DEFAULT_CPUID_BLACKLIST: tuple[str, ...] = (
    "AVX10", "BMI1", "BMI2", "CLMUL", "CMOV", "CX16", "ERMS", "F16C", "HTT", "LZCNT",
    "MMX", "MMXEXT", "NX", "POPCNT", "RDRAND", "RDSEED", "RDTSCP", "SGX", "SGXLC", "SSE",
    "SSE2", "SSE3", "SSE4", "SSE42", "SSSE3", "TDX_GUEST",
)  # fmt: skip

DEFAULT_FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the key."""


@dataclass(frozen=True, slots=True)
class CpuidConfig:
    attribute_blacklist: tuple[str, ...] = DEFAULT_CPUID_BLACKLIST
    attribute_whitelist: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CpuConfig:
    cpuid: CpuidConfig = field(default_factory=CpuidConfig)


@dataclass(frozen=True, slots=True)
class KernelConfig:
    kconfig_file: str = ""
    config_opts: tuple[str, ...] = ("NO_HZ", "NO_HZ_IDLE", "NO_HZ_FULL", "PREEMPT")


@dataclass(frozen=True, slots=True)
class PciConfig:
    device_class_whitelist: tuple[str, ...] = ("03", "0b40", "12")
    device_label_fields: tuple[str, ...] = ("class", "vendor")


@dataclass(frozen=True, slots=True)
class UsbConfig:
    device_class_whitelist: tuple[str, ...] = ("0e", "ef", "fe", "ff")
    device_label_fields: tuple[str, ...] = ("class", "vendor", "device")


@dataclass(frozen=True, slots=True)
class LocalConfig:
    # Relative paths are taken below the host root's /etc when they start with "/etc".
    features_dir: str = DEFAULT_FEATURES_DIR


@dataclass(frozen=True, slots=True)
class GpuConfig:
    """``sources.gpu``: NVIDIA labels as NVIDIA's GPU feature discovery writes them."""

    # Ask NVML (through nvidia-ml-py); off = PCI/sysfs facts only.
    nvml: bool = True
    # GFD's --mig-strategy: none, single or mixed.
    mig_strategy: str = "none"
    # Time-slicing replicas per GPU, as the device plugin is configured (gpu.replicas,
    # gpu.sharing-strategy and the "-SHARED" product suffix follow it); 1 = not shared.
    replicas: int = 1

    def __post_init__(self) -> None:
        if self.mig_strategy not in ("none", "single", "mixed"):
            raise ConfigError(
                f"sources.gpu.migStrategy: {self.mig_strategy!r} is not one of none, single, mixed"
            )
        if self.replicas < 1:
            raise ConfigError(f"sources.gpu.replicas: {self.replicas} is less than 1")


@dataclass(frozen=True, slots=True)
class SourcesConfig:
    cpu: CpuConfig = field(default_factory=CpuConfig)
    kernel: KernelConfig = field(default_factory=KernelConfig)
    pci: PciConfig = field(default_factory=PciConfig)
    usb: UsbConfig = field(default_factory=UsbConfig)
    local: LocalConfig = field(default_factory=LocalConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)
    # Worker-side rules (upstream's ``sources.custom``), kept raw for the rules engine.
    custom: tuple[Mapping[str, Any], ...] = field(default=(), metadata={"raw": True})


@dataclass(frozen=True, slots=True)
class CoreConfig:
    label_whitelist: str = field(default="", metadata={"key": "labelWhiteList"})
    no_publish: bool = False
    sleep_interval: float = 60.0  # seconds; the file says "60s" as upstream does
    feature_sources: tuple[str, ...] = ("all",)
    label_sources: tuple[str, ...] = ("all",)

    def __post_init__(self) -> None:
        if self.label_whitelist:
            try:
                re.compile(self.label_whitelist)
            except (re.error, OverflowError, RecursionError) as e:  # a{99999999999}, ((((...
                raise ConfigError(
                    f"core.labelWhiteList: {self.label_whitelist!r} is not a valid regular expression: {e}"
                ) from None


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    core: CoreConfig = field(default_factory=CoreConfig)
    sources: SourcesConfig = field(default_factory=SourcesConfig)


# -- loading --------------------------------------------------------------------------


def load_worker_config(path: str | os.PathLike[str]) -> tuple[WorkerConfig, list[str]]:
    """Read an ``nfd-worker.conf``; returns the config and warnings about unknown keys.
    Raises ConfigError (see :func:`load_config_file`)."""
    return load_config_file(
        path, lambda data, warnings: from_mapping(WorkerConfig, data or {}, warnings=warnings)
    )


def load_config_file(
    path: str | os.PathLike[str],
    build: Callable[[Any, list[str]], T],
    *,
    error: type[Exception] = ConfigError,
) -> tuple[T, list[str]]:
    """Any of nfd's config files (worker, master, device plugin): the YAML document,
    turned into settings by ``build(data, warnings)``. Raises ``error`` for a file that
    cannot be read (missing, binary, too large), bad YAML or a bad value (``build``
    raises ``error`` naming the key); every message is one line that names the file
    once. Warnings (unknown keys) come back with the file's name too."""
    from nfd.yamlfile import YamlFileError, load  # only when a file is given

    p = os.fspath(path)
    try:
        data = load(p)
    except YamlFileError as e:
        raise error(f"config file {e}") from None
    warnings: list[str] = []
    try:
        built = build(data, warnings)
    except error as e:
        raise error(f"config file {p}: {e}") from None
    return built, [f"config file {p}: {w}" for w in warnings]


def from_mapping(cls: type[R], data: Any, *, warnings: list[str], where: str = "") -> R:
    """Build a config record from upstream-style camelCase keys. Each value is converted
    to what the field's default is (a string, true/false, a whole number, a number or
    duration, a list of strings, a nested group); ``field(metadata={"raw": True})``
    takes a list of anything as it is."""
    from collections.abc import Mapping  # only when a config file is loaded

    if data is None:
        return cls()
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'the file'}: expected a mapping, got {type(data).__name__}")
    defaults = cls()
    metadata = {f.name: f.metadata for f in fields(cls)}  # type: ignore[arg-type]
    known = {meta.get("key", _camel(name)): name for name, meta in metadata.items()}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = known.get(str(key))
        if name is None:
            warnings.append(
                f"{where}: unknown key {key!r} ignored" if where else f"unknown key {key!r} ignored"
            )
            continue
        path = f"{where}.{key}" if where else str(key)
        raw = metadata[name].get("raw", False)
        kwargs[name] = _convert(getattr(defaults, name), value, warnings, path, raw=raw)
    return cls(**kwargs)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _convert(default: Any, value: Any, warnings: list[str], where: str, *, raw: bool = False) -> Any:
    if is_dataclass(default):
        return from_mapping(type(default), value, warnings=warnings, where=where)
    if isinstance(default, tuple):
        if value is None:
            return ()
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list")
        if raw:
            return tuple(value)
        return tuple(_convert("", v, warnings, f"{where}[{i}]") for i, v in enumerate(value))
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false")
        return value
    if isinstance(default, str):
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ConfigError(f"{where}: expected a string")
        if isinstance(value, int) and not _printable_int(value):
            raise ConfigError(f"{where}: {shown(value)}, expected a string")
        return str(value)
    if isinstance(default, float):
        if isinstance(value, str):
            return parse_duration(value, where=where)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected a number or a duration such as 60s")
        if not 0 <= value <= MAX_DURATION_S:  # NaN too
            raise ConfigError(
                f"{where}: {shown(value)} is not a duration of 0 to {MAX_DURATION_S:.0f} seconds"
            )
        return float(value)
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected a whole number")
        if not -(2**63) <= value < 2**63:
            raise ConfigError(f"{where}: {shown(value)} is not a 64-bit whole number")
        return value
    return value  # a field without a typed default takes the value as it is


def _printable_int(value: int) -> bool:
    import sys

    limit = sys.get_int_max_str_digits()
    return limit == 0 or value.bit_length() < limit * 3  # 2**3 < 10: fewer bits, fewer digits


# Go's longest time.Duration, 2**63-1 ns (about 292 years): a longer one does not parse
# there, and here it would overflow the scheduler's datetime arithmetic.
MAX_DURATION_S = (2**63 - 1) / 1e9
_DURATION = r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)"  # compiled on first use
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, *, where: str = "duration") -> float:
    """Go's duration syntax (``1h30m``, ``60s``, ``500ms``) in seconds."""
    s = text.strip()
    if s in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    for m in re.finditer(_DURATION, s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise ConfigError(f"{where}: {text!r} is not a duration such as 60s or 1m30s")
    if total > MAX_DURATION_S:
        raise ConfigError(f"{where}: {text!r} is longer than Go's longest duration (2562047h47m16s)")
    return total
