"""The kernel feature source (placeholder until built)."""

from __future__ import annotations

from nfd.config import SourcesConfig
from nfd.features import Features, Labels
from nfd.hostroot import HostRoot


class KernelSource:
    name = "kernel"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        return Features()

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        return {}
