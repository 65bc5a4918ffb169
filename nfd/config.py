"""Worker-side configuration: the ``core`` and ``sources`` groups of upstream's
``nfd-worker.conf``, with upstream's key names and defaults.

Frozen records (:mod:`nfd.record`: declared and used like frozen dataclasses), not
pydantic, not even dataclasses: ``nfd discover`` must start in a few milliseconds, and
this module is on its path. Keys we do not know are reported as warnings (upstream's file
has keys that mean nothing here, such as ``klog``); keys we know with a value of the wrong
type are errors that name the key.

Adding a group (say ``sources.gpu``): declare it like the others and give the parent a
field with ``default_factory``; the loader derives the camelCase keys from the field
names and converts values by the annotations (str, bool, float/duration, tuple[X, ...],
nested groups, Mapping/Any kept raw)::

    class GpuConfig(Record, frozen=True):
        device_label_fields: tuple[str, ...] = ("vendor", "product")

    class SourcesConfig(Record, frozen=True):
        ...
        gpu: GpuConfig = field(default_factory=GpuConfig)

A ``__post_init__`` may check values and raise ConfigError, as with dataclasses.
``field(metadata={"key": "otherName"})`` names a key that is not the camelCase of the
field. (A plain frozen ``@dataclass`` group still loads too, at the cost of importing
dataclasses.)
"""

from __future__ import annotations

import os

from nfd.record import Record, field, field_metadata, record_fields

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (startup time)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, TypeVar

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


class CpuidConfig(Record, frozen=True):
    attribute_blacklist: tuple[str, ...] = DEFAULT_CPUID_BLACKLIST
    attribute_whitelist: tuple[str, ...] = ()


class CpuConfig(Record, frozen=True):
    cpuid: CpuidConfig = field(default_factory=CpuidConfig)


class KernelConfig(Record, frozen=True):
    kconfig_file: str = ""
    config_opts: tuple[str, ...] = ("NO_HZ", "NO_HZ_IDLE", "NO_HZ_FULL", "PREEMPT")


class PciConfig(Record, frozen=True):
    device_class_whitelist: tuple[str, ...] = ("03", "0b40", "12")
    device_label_fields: tuple[str, ...] = ("class", "vendor")


class UsbConfig(Record, frozen=True):
    device_class_whitelist: tuple[str, ...] = ("0e", "ef", "fe", "ff")
    device_label_fields: tuple[str, ...] = ("class", "vendor", "device")


class LocalConfig(Record, frozen=True):
    # Relative paths are taken below the host root's /etc when they start with "/etc".
    features_dir: str = DEFAULT_FEATURES_DIR


class GpuConfig(Record, frozen=True):
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


class SourcesConfig(Record, frozen=True):
    cpu: CpuConfig = field(default_factory=CpuConfig)
    kernel: KernelConfig = field(default_factory=KernelConfig)
    pci: PciConfig = field(default_factory=PciConfig)
    usb: UsbConfig = field(default_factory=UsbConfig)
    local: LocalConfig = field(default_factory=LocalConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)
    # Worker-side rules (upstream's ``sources.custom``), kept raw for the rules engine.
    custom: tuple[Mapping[str, Any], ...] = ()


class CoreConfig(Record, frozen=True):
    label_whitelist: str = field(default="", metadata={"key": "labelWhiteList"})
    no_publish: bool = False
    sleep_interval: float = 60.0  # seconds; the file says "60s" as upstream does
    feature_sources: tuple[str, ...] = ("all",)
    label_sources: tuple[str, ...] = ("all",)

    def __post_init__(self) -> None:
        if self.label_whitelist:
            import re  # only with a whitelist: discovery's path stays free of re

            try:
                re.compile(self.label_whitelist)
            except re.error as e:
                raise ConfigError(
                    f"core.labelWhiteList: {self.label_whitelist!r} is not a valid regular expression: {e}"
                ) from None


class WorkerConfig(Record, frozen=True):
    core: CoreConfig = field(default_factory=CoreConfig)
    sources: SourcesConfig = field(default_factory=SourcesConfig)


# -- loading --------------------------------------------------------------------------


def load_worker_config(path: str | os.PathLike[str]) -> tuple[WorkerConfig, list[str]]:
    """Read an ``nfd-worker.conf``; returns the config and warnings about unknown keys.

    Raises ConfigError for a file that cannot be read (missing, binary, too large), bad
    YAML or a bad value; the message names the file once and the key.
    """
    from nfd.yamlfile import YamlFileError, load  # only when a file is given

    p = os.fspath(path)
    try:
        data = load(p)
    except YamlFileError as e:
        raise ConfigError(f"config file {e}") from None
    warnings: list[str] = []
    try:
        cfg = from_mapping(WorkerConfig, data or {}, warnings=warnings)
    except ConfigError as e:
        raise ConfigError(f"config file {p}: {e}") from None
    return cfg, [f"config file {p}: {w}" for w in warnings]


def from_mapping(cls: type[T], data: Any, *, warnings: list[str], where: str = "") -> T:
    """Build a config record (or dataclass) from upstream-style camelCase keys."""
    built: T = _build(cls, data, warnings, where)
    return built


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _build(cls: type, data: Any, warnings: list[str], where: str) -> Any:
    from collections.abc import Mapping  # only when a config file is loaded

    if data is None:
        return cls()
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'the file'}: expected a mapping, got {type(data).__name__}")
    hints = _hints(cls)
    known = {key: name for name, key in _keys(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = known.get(str(key))
        if name is None:
            warnings.append(f"{where}: unknown key {key!r} ignored" if where else f"unknown key {key!r} ignored")
            continue
        kwargs[name] = _convert(hints[name], value, warnings, f"{where}.{key}" if where else str(key))
    return cls(**kwargs)


def _keys(cls: type) -> list[tuple[str, str]]:
    """(field name, file key) of a record or dataclass."""
    if issubclass(cls, Record):
        return [(n, field_metadata(cls, n).get("key", _camel(n))) for n in record_fields(cls)]
    import dataclasses

    return [(f.name, f.metadata.get("key", _camel(f.name))) for f in dataclasses.fields(cls)]  # type: ignore[arg-type]


def _hints(cls: type) -> dict[str, Any]:
    """Field name -> type, the string annotations evaluated in the class's module."""
    import sys
    import typing
    from collections.abc import Mapping

    local = {"Any": typing.Any, "Mapping": Mapping}  # imported only for type checking above
    if not issubclass(cls, Record):
        return typing.get_type_hints(cls, localns=local)
    ns = vars(sys.modules[cls.__module__])
    return {
        n: eval(tp, ns, local) if isinstance(tp, str) else tp  # our own annotations
        for n, tp in cls._types.items()
    }


def _is_group(tp: Any) -> bool:
    return isinstance(tp, type) and (issubclass(tp, Record) or hasattr(tp, "__dataclass_fields__"))


def _convert(tp: Any, value: Any, warnings: list[str], where: str) -> Any:
    import types
    import typing
    from collections.abc import Mapping

    if _is_group(tp):
        return _build(tp, value, warnings, where)
    origin = typing.get_origin(tp)
    if tp is str:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ConfigError(f"{where}: expected a string")
        return str(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected a whole number")
        return value
    if tp is float:
        if isinstance(value, str):
            return parse_duration(value, where=where)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected a number or a duration such as 60s")
        return float(value)
    if origin is tuple:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list")
        (item_tp, _ellipsis) = typing.get_args(tp)
        return tuple(_convert(item_tp, v, warnings, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (Mapping, dict) or tp is typing.Any or origin is types.UnionType:
        return value
    raise ConfigError(f"{where}: unsupported setting type {tp}")  # pragma: no cover


_DURATION = r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)"  # compiled on first use
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, *, where: str = "duration") -> float:
    """Go's duration syntax (``1h30m``, ``60s``, ``500ms``) in seconds."""
    import re

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
    return total
