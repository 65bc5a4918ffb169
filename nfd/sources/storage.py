"""The storage feature source: ``storage.block`` instances from ``/sys/block``.

Attributes as upstream: ``name`` and the queue's ``dax``, ``rotational``, ``nr_zones``,
``zoned``; ours on top: ``size`` (in 512-byte sectors, as sysfs gives it).
Label: ``nonrotationaldisk`` when any block device has ``rotational`` 0.
"""

from __future__ import annotations

import os

from nfd import hostfiles
from nfd.config import SourcesConfig
from nfd.features import Features, Instance, Labels
from nfd.hostroot import HostRoot

_ATTRS = ("queue/dax", "queue/rotational", "queue/nr_zones", "queue/zoned", "size")


def read_block(path: str) -> Instance:
    return {"name": os.path.basename(path), **hostfiles.attrs(path, _ATTRS)}


class StorageSource:
    name = "storage"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        f = Features()
        paths = hostfiles.device_dirs(host.sys / "block")
        if paths is None:
            return f
        f.instances["storage.block"] = [read_block(p) for p in paths]
        return f

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        if any(d.get("rotational") == "0" for d in features.instances.get("storage.block", [])):
            return {"nonrotationaldisk": "true"}
        return {}
