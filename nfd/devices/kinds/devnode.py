"""Device nodes matched by globs under /dev: each match is one device."""

from __future__ import annotations

import glob
import os
import stat
from pathlib import Path
from typing import Any

from nfd.devices.kinds.model import DeviceNode, FoundDevice
from nfd.devices.kinds.shared import string_list
from nfd.features import Features
from nfd.hostfiles import numa_above
from nfd.hostroot import HostRoot
from nfd.settings import ConfigError

_FIELDS = frozenset({"path", "name"})


def _numa_of_node(node: Path, host: HostRoot) -> int | None:
    """/sys/dev/{char,block}/MAJ:MIN links to the device; its NUMA node is on the way up."""
    try:
        st = os.stat(node)
    except OSError:
        return None
    kind = "char" if stat.S_ISCHR(st.st_mode) else "block" if stat.S_ISBLK(st.st_mode) else None
    if kind is None:
        return None
    link = host.sys / "dev" / kind / f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    return numa_above(link, host.sys)


class DevNodeKind:
    name = "devnode"
    template_fields = _FIELDS
    udev_subsystems: tuple[str, ...] = ()  # node files come and go; polling sees them

    def parse_selector(self, raw: Any, where: str) -> tuple[str, ...]:
        globs = string_list(raw, where)
        for g in globs:
            if not g.startswith("/dev/") or "/../" in g + "/":
                raise ConfigError(f"{where}: {g!r} must be a glob under /dev/")
        return globs

    def describe(self, selector: Any) -> str:
        return "devnode " + " ".join(selector)

    def discover(
        self, selector: Any, *, resource: str, features: Features, host: HostRoot
    ) -> list[FoundDevice]:
        seen: dict[str, FoundDevice] = {}
        for pattern in selector:
            rel_pattern = pattern[len("/dev/") :]
            for match in sorted(glob.glob(glob.escape(str(host.dev)) + "/" + rel_pattern)):
                if os.path.isdir(match):
                    continue
                rel = os.path.relpath(match, host.dev)
                path = "/dev/" + rel
                if path in seen:
                    continue
                seen[path] = FoundDevice(
                    id=rel.replace("/", "_"),
                    numa_node=_numa_of_node(Path(match), host),
                    device_nodes=(DeviceNode(path, path, "rwm"),),
                    attributes={"path": path, "name": os.path.basename(rel)},
                )
        return list(seen.values())

    def unmatched(self, selector: Any, host: HostRoot) -> list[str]:
        """The globs that match nothing (reported as warnings at start)."""
        return [
            p
            for p in selector
            if not any(not os.path.isdir(m) for m in glob.glob(glob.escape(str(host.dev)) + "/" + p[5:]))
        ]

    def refresh(self, device: FoundDevice, host: HostRoot) -> FoundDevice | str:
        # The node itself is checked by the caller with every other node of the device.
        return device
