"""Feature sources: one module per domain, each with a ``discover`` that does the I/O
and a pure ``labels`` that turns features into label names and values.

Sources know nothing of the master or Kubernetes. The registry is explicit: nothing
registers itself on import, and a second source of the same name is refused.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from nfd.sources.protocols import FeatureSource as FeatureSource

log = logging.getLogger(__name__)


def __getattr__(name: str) -> object:
    # FeatureSource (a typing.Protocol) lives in nfd.sources.protocols so that discovery
    # does not import typing; it is still importable from here.
    if name == "FeatureSource":
        from nfd.sources.protocols import FeatureSource

        return FeatureSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class DuplicateSourceError(ValueError):
    pass


class UnknownSourceError(ValueError):
    pass


class Registry:
    """An ordered set of sources, keyed by name."""

    def __init__(self, sources: Iterable[FeatureSource] = ()) -> None:
        self._sources: dict[str, FeatureSource] = {}
        for s in sources:
            self.register(s)

    def register(self, source: FeatureSource) -> None:
        if source.name in self._sources:
            raise DuplicateSourceError(f"feature source {source.name!r} is registered twice")
        self._sources[source.name] = source

    def __iter__(self) -> Iterator[FeatureSource]:
        return iter(self._sources.values())

    def __contains__(self, name: object) -> bool:
        return name in self._sources

    def __len__(self) -> int:
        return len(self._sources)

    def names(self) -> list[str]:
        return list(self._sources)

    def get(self, name: str) -> FeatureSource:
        try:
            return self._sources[name]
        except KeyError:
            raise UnknownSourceError(
                f"unknown feature source {name!r} (known: {', '.join(self._sources)})"
            ) from None

    def select(self, spec: Sequence[str]) -> list[FeatureSource]:
        """Upstream's ``featureSources`` syntax: names, ``all``, and ``-name`` to drop one.
        A list of drops only (``-cpu``) drops from all: naming none to keep means all."""
        items = [i.strip() for i in spec if i.strip()]
        if items and all(i.startswith("-") for i in items):
            items.insert(0, "all")
        chosen: dict[str, FeatureSource] = {}
        for item in items:
            if item == "all":
                chosen.update(self._sources)
            elif item.startswith("-"):
                self.get(item[1:])
                chosen.pop(item[1:], None)
            else:
                chosen[item] = self.get(item)
        # Keep the registry's order so output does not depend on how the list was written.
        return [s for n, s in self._sources.items() if n in chosen]


def default_registry() -> Registry:
    """Every built-in source, in upstream's order."""
    from nfd.sources import (
        cpu,
        custom,
        fpga,
        gpu,
        kernel,
        local,
        memory,
        network,
        pci,
        storage,
        system,
        usb,
    )

    return Registry(
        [
            cpu.CpuSource(),
            kernel.KernelSource(),
            memory.MemorySource(),
            network.NetworkSource(),
            pci.PciSource(),
            gpu.GpuSource(),
            fpga.FpgaSource(),
            storage.StorageSource(),
            system.SystemSource(),
            usb.UsbSource(),
            local.LocalSource(),
            custom.CustomSource(),
        ]
    )
