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

_QUEUE_ATTRS = ("dax", "rotational", "nr_zones", "zoned")


def read_block(path: str) -> Instance:
    inst: Instance = {"name": os.path.basename(path)}
    for name in _QUEUE_ATTRS:
        value = hostfiles.attr(os.path.join(path, "queue", name))
        if value is not None:
            inst[name] = value
    size = hostfiles.attr(os.path.join(path, "size"))
    if size is not None:
        inst["size"] = size
    return inst


class StorageSource:
    name = "storage"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        f = Features()
        base = str(host.sys / "block")
        names = hostfiles.entries(base)
        if names is None:
            return f
        f.instances["storage.block"] = [read_block(os.path.join(base, n)) for n in names]
        return f

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        if any(d.get("rotational") == "0" for d in features.instances.get("storage.block", [])):
            return {"nonrotationaldisk": "true"}
        return {}
