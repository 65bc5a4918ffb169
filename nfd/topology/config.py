"""``nfd-topology-updater.conf``, with upstream's key: ``excludeList``, the resources the
updater leaves out of the NodeResourceTopology object, per node name (``'*'``: every
node)::

    excludeList:
      '*': [hugepages-2Mi]
      node-a: [memory]

A model of :mod:`nfd.settings` (``load_model(path, TopologyConfig)``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nfd.settings import ConfigError

ALL_NODES = "*"


@dataclass(frozen=True)
class TopologyConfig:
    # Node name -> resource names; checked below, since a mapping's keys are free.
    exclude_list: Mapping[str, Any] = field(default_factory=dict, metadata={"raw": True})

    def __post_init__(self) -> None:
        if not isinstance(self.exclude_list, Mapping):
            raise ConfigError("expected a mapping of node name to a list of resources", "excludeList")
        for node, names in self.exclude_list.items():
            key = f"excludeList.{node}" if isinstance(node, str) else "excludeList"
            if not isinstance(node, str):
                raise ConfigError(f"the key {node!r} is not a node name", key)
            if names is None:
                continue
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise ConfigError("expected a list of resource names", key)

    def excluded(self, node: str) -> frozenset[str]:
        """The resources left out on ``node``: its own and every node's."""
        return frozenset(name for key in (node, ALL_NODES) for name in (self.exclude_list.get(key) or ()))
