"""Worker-side configuration: the ``core`` and ``sources`` groups of upstream's
``nfd-worker.conf``, with upstream's key names and defaults.

A model of :mod:`nfd.settings` (read with ``load_model(path, WorkerConfig)``), declared
as frozen records (:mod:`nfd.record`: declared and used like frozen dataclasses), not
pydantic: ``nfd discover`` must start in a few milliseconds, and this module is on its
path, and the worker must stay small.

Adding a group (say ``sources.gpu``): declare it like the others and give the parent a
field with ``default_factory``; :mod:`nfd.settings` derives the camelCase keys from the
field names and converts each value to what the field's default is::

    class GpuConfig(Record, frozen=True):
        device_label_fields: tuple[str, ...] = ("vendor", "product")

    class SourcesConfig(Record, frozen=True):
        ...
        gpu: GpuConfig = field(default_factory=GpuConfig)

A ``__post_init__`` may check values and raise ConfigError with the key, as with
dataclasses. The master's settings hold a :class:`WorkerConfig` too (``labeling``).
"""

from __future__ import annotations

from nfd.record import Record, field
from nfd.settings import ConfigError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (startup time)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# Upstream's default cpuid label blacklist: these stay in the raw features.
DEFAULT_CPUID_BLACKLIST: tuple[str, ...] = (
    "AVX10", "BMI1", "BMI2", "CLMUL", "CMOV", "CX16", "ERMS", "F16C", "HTT", "LZCNT",
    "MMX", "MMXEXT", "NX", "POPCNT", "RDRAND", "RDSEED", "RDTSCP", "SGX", "SGXLC", "SSE",
    "SSE2", "SSE3", "SSE4", "SSE42", "SSSE3", "TDX_GUEST",
)  # fmt: skip

DEFAULT_FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"


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
            raise ConfigError(f"{self.mig_strategy!r} is not one of none, single, mixed", "migStrategy")
        if self.replicas < 1:
            raise ConfigError(f"{self.replicas} is less than 1", "replicas")


class SourcesConfig(Record, frozen=True):
    cpu: CpuConfig = field(default_factory=CpuConfig)
    kernel: KernelConfig = field(default_factory=KernelConfig)
    pci: PciConfig = field(default_factory=PciConfig)
    usb: UsbConfig = field(default_factory=UsbConfig)
    local: LocalConfig = field(default_factory=LocalConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)
    # Worker-side rules (upstream's ``sources.custom``), kept raw for the rules engine.
    custom: tuple[Mapping[str, Any], ...] = field(default=(), metadata={"raw": True})


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
            except (re.error, OverflowError, RecursionError) as e:  # a{99999999999}, ((((...
                raise ConfigError(
                    f"{self.label_whitelist!r} is not a valid regular expression: {e}", "labelWhiteList"
                ) from None


class WorkerConfig(Record, frozen=True):
    core: CoreConfig = field(default_factory=CoreConfig)
    sources: SourcesConfig = field(default_factory=SourcesConfig)
