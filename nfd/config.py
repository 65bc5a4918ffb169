"""Worker-side configuration: the ``core`` and ``sources`` groups of upstream's
``nfd-worker.conf``, with upstream's key names and defaults.

A model of :mod:`nfd.settings` (read with ``load_model(path, WorkerConfig)``), declared
as dataclasses, not pydantic: the worker must stay small. Not frozen: nothing hashes a
config, a reload builds a new one rather than changing the one in use, and a frozen
class compiles two more methods as the module is imported. Without ``slots``: a process
holds one config (or a few, across reloads), so slots would save no memory and only cost
each class a second creation. Without ``__repr__`` (``repr=False``), as nothing prints a
config, and without ``__eq__`` (``eq=False``) where nothing compares a group by value,
which is every group but ``sources.gpu`` (its tests compare it): each method a dataclass
generates is compiled as the module is imported (see docs/architecture.md, "Plain
Python").

Adding a group (say ``sources.system``): declare it like the others and give the parent
a field with ``default_factory``; the loader derives the camelCase keys from the field
names and converts each value to what the field's default is (str, bool, int,
float/duration, a tuple of strings, a nested group; ``metadata={"raw": True}`` keeps a
list's items as they are)::

    @dataclass(eq=False, repr=False)
    class SystemConfig:
        os_release_keys: tuple[str, ...] = ("ID", "VERSION_ID")

    @dataclass(eq=False, repr=False)
    class SourcesConfig:
        ...
        system: SystemConfig = field(default_factory=SystemConfig)

A ``__post_init__`` may check values and raise ConfigError, as with dataclasses.
``field(metadata={"key": "otherName"})`` names a key that is not the camelCase of the
field. The master's settings hold a :class:`WorkerConfig` too (``labeling``): one
loader for both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nfd.settings import ConfigError

# Upstream's default cpuid label blacklist: these stay in the raw features.
DEFAULT_CPUID_BLACKLIST: tuple[str, ...] = (
    "AVX10", "BMI1", "BMI2", "CLMUL", "CMOV", "CX16", "ERMS", "F16C", "HTT", "LZCNT",
    "MMX", "MMXEXT", "NX", "POPCNT", "RDRAND", "RDSEED", "RDTSCP", "SGX", "SGXLC", "SSE",
    "SSE2", "SSE3", "SSE4", "SSE42", "SSSE3", "TDX_GUEST",
)  # fmt: skip

DEFAULT_FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"


@dataclass(eq=False, repr=False)
class CpuidConfig:
    """``sources.cpu.cpuid``: which CPUID flags become labels (all stay in the raw
    features)."""

    attribute_blacklist: tuple[str, ...] = DEFAULT_CPUID_BLACKLIST
    attribute_whitelist: tuple[str, ...] = ()


@dataclass(eq=False, repr=False)
class CpuConfig:
    """``sources.cpu``."""

    cpuid: CpuidConfig = field(default_factory=CpuidConfig)


@dataclass(eq=False, repr=False)
class KernelConfig:
    """``sources.kernel``: the kernel config file ('': upstream's search path) and the
    options of it that become labels."""

    kconfig_file: str = ""
    config_opts: tuple[str, ...] = ("NO_HZ", "NO_HZ_IDLE", "NO_HZ_FULL", "PREEMPT")


@dataclass(eq=False, repr=False)
class PciConfig:
    """``sources.pci``: the device classes labelled, and the fields a label is named by."""

    device_class_whitelist: tuple[str, ...] = ("03", "0b40", "12")
    device_label_fields: tuple[str, ...] = ("class", "vendor")


@dataclass(eq=False, repr=False)
class UsbConfig:
    """``sources.usb``: the device classes labelled, and the fields a label is named by."""

    device_class_whitelist: tuple[str, ...] = ("0e", "ef", "fe", "ff")
    device_label_fields: tuple[str, ...] = ("class", "vendor", "device")


@dataclass(eq=False, repr=False)
class LocalConfig:
    """``sources.local``: the directory of feature files."""

    # Relative paths are taken below the host root's /etc when they start with "/etc".
    features_dir: str = DEFAULT_FEATURES_DIR


@dataclass(repr=False)
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
            raise ConfigError(f"{self.mig_strategy!r} is not one of none, single, mixed", "migStrategy")
        if self.replicas < 1:
            raise ConfigError(f"{self.replicas} is less than 1", "replicas")


@dataclass(eq=False, repr=False)
class SourcesConfig:
    """``sources``: each feature source's settings."""

    cpu: CpuConfig = field(default_factory=CpuConfig)
    kernel: KernelConfig = field(default_factory=KernelConfig)
    pci: PciConfig = field(default_factory=PciConfig)
    usb: UsbConfig = field(default_factory=UsbConfig)
    local: LocalConfig = field(default_factory=LocalConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)
    # Worker-side rules (upstream's ``sources.custom``), kept raw for the rules engine.
    custom: tuple[Mapping[str, Any], ...] = field(default=(), metadata={"raw": True})


@dataclass(eq=False, repr=False)
class CoreConfig:
    """``core``: which sources run and which are labelled, the label whitelist, and the
    worker's interval and publishing switch."""

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
                    f"{self.label_whitelist!r} is not a valid regular expression: {e}", "labelWhiteList"
                ) from None


@dataclass(eq=False, repr=False)
class WorkerConfig:
    """The worker config file (``nfd-worker.conf``)."""

    core: CoreConfig = field(default_factory=CoreConfig)
    sources: SourcesConfig = field(default_factory=SourcesConfig)
