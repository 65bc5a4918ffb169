"""The interfaces of feature sources and CPUID readers, as typing protocols.

Kept apart so that discovery, which only calls them, does not import typing; they are
importable from their usual places (``nfd.sources.FeatureSource``,
``nfd.sources.cpuid_x86.CpuidReader``) too.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from nfd.config import SourcesConfig
from nfd.features import Features, Labels
from nfd.hostroot import HostRoot

Regs = tuple[int, int, int, int]


@runtime_checkable
class FeatureSource(Protocol):
    """A feature domain (``cpu``, ``pci`` ...)."""

    @property
    def name(self) -> str: ...

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        """Read the host and return this domain's raw features (``<name>.<feature>``).

        A missing file means the feature is absent; other read errors are logged and
        discovery goes on with what could be read.
        """
        ...

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        """Pure: label names (without ``feature.node.kubernetes.io/`` and without the
        ``<source>-`` prefix, which the caller adds) and values from the features."""
        ...


class CpuidReader(Protocol):
    def cpuid(self, leaf: int, subleaf: int = 0) -> Regs:
        """(eax, ebx, ecx, edx) for ``leaf``/``subleaf``."""
        ...

    def xgetbv(self, index: int) -> int:
        """The 64-bit extended control register ``index`` (XCR0 for 0). Only valid when
        CPUID.1:ECX.OSXSAVE is set; callers check that first, as the CPU faults otherwise."""
        ...
