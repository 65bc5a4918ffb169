"""CDI spec files for resources that hand out devices by CDI name.

kubelet passes the names from ``ContainerAllocateResponse.cdi_devices`` to the runtime,
which looks them up in the spec files of ``/etc/cdi`` and ``/var/run/cdi``. We write one
file per resource, atomically (temp file + rename), so a runtime never reads half a spec.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nfd.devices.kinds.model import FoundDevice, cdi_name

# The spec version we declare by default. Every field we write exists since 0.5.0
# (device-node hostPath and names starting with a digit arrived then), so a resource can
# declare that (``cdi: {version: "0.5.0"}``) for runtimes whose CDI library predates 1.0.
CDI_VERSION = "1.0.0"
CDI_VERSIONS = ("0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")


def spec_path(cdi_dir: str | Path, kind: str) -> Path:
    vendor, _, cls = kind.partition("/")
    return Path(cdi_dir) / f"nfd-{vendor}-{cls}.json"


def _edits(d: FoundDevice, env: Sequence[str] = ()) -> dict[str, Any]:
    edits: dict[str, Any] = {}
    if d.device_nodes:
        edits["deviceNodes"] = [
            {"path": n.container_path, "hostPath": n.host_path, "permissions": n.permissions}
            for n in d.device_nodes
        ]
    if d.mounts:
        edits["mounts"] = [
            {
                "hostPath": m.host_path,
                "containerPath": m.container_path,
                "options": ["ro" if m.read_only else "rw", "nosuid", "nodev", "bind"],
            }
            for m in d.mounts
        ]
    if env or d.cdi.env:
        edits["env"] = [*env, *d.cdi.env]
    if d.cdi.hooks:
        edits["hooks"] = [
            {"hookName": h.hook_name, "path": h.path}
            | ({"args": list(h.args)} if h.args else {})
            | ({"env": list(h.env)} if h.env else {})
            for h in d.cdi.hooks
        ]
    return edits


def build_spec(
    kind: str,
    devices: Sequence[tuple[str, FoundDevice]],
    version: str = CDI_VERSION,
    *,
    annotations: dict[str, str] | None = None,
    env: Sequence[str] = (),
) -> dict[str, Any]:
    """The spec for ``kind`` (``vendor.com/class``) with one CDI device per physical ID,
    ``env`` ("K=V") set in each before the device's own. Devices with nothing to inject
    are left out (CDI refuses empty edits)."""
    out = []
    for pid, d in devices:
        edits = _edits(d, env)
        if edits:
            out.append({"name": cdi_name(pid), "containerEdits": edits})
    spec: dict[str, Any] = {"cdiVersion": version, "kind": kind, "devices": out}
    if annotations:
        spec["annotations"] = annotations
    return spec


def write_spec(
    cdi_dir: str | Path, kind: str, devices: Sequence[tuple[str, FoundDevice]], version: str = CDI_VERSION
) -> Path:
    path = spec_path(cdi_dir, kind)
    write_json(path, build_spec(kind, devices, version))
    return path


def write_json(path: str | Path, data: Any, *, locked: bool = False) -> None:
    """Write ``data`` as compact JSON atomically (see :func:`write_atomic`): a DRA
    prepare writes one per claim, and runtimes need no indentation."""
    write_atomic(path, json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n", locked=locked)


def write_atomic(path: str | Path, body: str, *, flush: bool = True, locked: bool = False) -> None:
    """Write a file atomically (temp file, rename): a reader sees the old file or the
    new one, never half of one. ``flush``: fsync it before the rename, so that a crash of
    the node leaves the old file or the new one too (else perhaps an older or empty one).
    The directory is not fsynced: after a crash of the node the rename may be lost too,
    which leaves the old file or none, never a torn one (the device plugin writes its
    specs again at start; a DRA claim whose spec or checkpoint is gone is prepared again).
    ``locked``: the caller holds a lock that makes it the file's only writer, so the
    temporary file has a fixed name (``.<name>.tmp``: one a crash left is overwritten)."""
    # Plain strings: a DRA prepare writes two files, and pathlib's parts cost more than
    # the write's system calls.
    directory, name = os.path.split(os.fspath(path))
    try:
        fd, tmp = _temporary(directory, name, locked)
    except FileNotFoundError:  # the directory is made at the first write
        os.makedirs(directory, exist_ok=True)
        fd, tmp = _temporary(directory, name, locked)
    try:
        try:
            data = memoryview(body.encode())
            while data:  # a short write is followed by the error that cut it short
                data = data[os.write(fd, data) :]
            os.fchmod(fd, 0o644)
            if flush:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with_suppressed_unlink(tmp)
        raise


def _temporary(directory: str, name: str, locked: bool) -> tuple[int, str]:
    if not locked:
        return tempfile.mkstemp(dir=directory, prefix=".nfd-", suffix=".tmp")
    tmp = os.path.join(directory, f".{name}.tmp")
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644), tmp


def with_suppressed_unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def remove_spec(cdi_dir: str | Path, kind: str) -> None:
    with_suppressed_unlink(str(spec_path(cdi_dir, kind)))
