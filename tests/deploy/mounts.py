"""The volume-mount layouts a container runtime refuses, found from a pod spec alone.

Server-side validation accepts all of these; the kubelet only finds out when runc builds
the container's root filesystem, and the pod never starts.
"""

from __future__ import annotations

import posixpath
from typing import Any

# The kubelet mounts these volume types read-only whatever the mount says.
ALWAYS_READ_ONLY = ("configMap", "secret", "projected", "downwardAPI")
# A hostPath of these types is not a directory: nothing can be mounted below it.
NOT_A_DIRECTORY = ("File", "FileOrCreate", "Socket", "CharDevice", "BlockDevice")
# runc refuses any destination below /proc except these (libcontainer's checkProcMount).
PROC_ALLOWED = {
    "/proc/cpuinfo", "/proc/diskstats", "/proc/meminfo", "/proc/stat", "/proc/swaps",
    "/proc/uptime", "/proc/loadavg", "/proc/slabinfo", "/proc/net/dev",
    "/proc/sys/kernel/ns_last_pid",
}  # fmt: skip


def _inside(child: str, parent: str) -> bool:
    return parent == "/" or child.startswith(parent.rstrip("/") + "/")


def _read_only(mount: dict[str, Any], volume: dict[str, Any]) -> bool:
    return bool(mount.get("readOnly")) or any(k in volume for k in ALWAYS_READ_ONLY)


def mount_conflicts(spec: dict[str, Any], container: dict[str, Any]) -> list[str]:
    """Why the runtime would refuse ``container``'s mounts (empty when it would not)."""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    mounts = container.get("volumeMounts", [])
    name = container["name"]
    problems: list[str] = []
    for m in mounts:
        path = m["mountPath"]
        if not posixpath.isabs(path):
            problems.append(f"{name}: mountPath {path!r} is not absolute")
        elif posixpath.normpath(path) != path.rstrip("/") or path.endswith("/"):
            problems.append(f"{name}: mountPath {path!r} is not in normal form")
        if (path == "/proc" or path.startswith("/proc/")) and path not in PROC_ALLOWED:
            problems.append(f"{name}: mountPath {path!r} is below /proc")
        if m["name"] not in volumes:
            problems.append(f"{name}: mount {path!r} names no volume {m['name']!r}")
    for i, a in enumerate(mounts):
        for b in mounts[i + 1 :]:
            if a["mountPath"] == b["mountPath"]:
                problems.append(f"{name}: two mounts at {a['mountPath']!r}")
                continue
            for parent, child in ((a, b), (b, a)):
                if not _inside(child["mountPath"], parent["mountPath"]):
                    continue
                vol = volumes.get(parent["name"], {})
                if _read_only(parent, vol):
                    problems.append(
                        f"{name}: {child['mountPath']!r} is inside read-only mount {parent['mountPath']!r}"
                    )
                elif vol.get("hostPath", {}).get("type") in NOT_A_DIRECTORY:
                    problems.append(
                        f"{name}: {child['mountPath']!r} is inside {parent['mountPath']!r}, not a directory"
                    )
    return problems
