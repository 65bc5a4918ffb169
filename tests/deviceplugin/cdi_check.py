"""A CDI spec checker written from the spec's facts (field names per level, name rules),
strict like the loaders: unknown fields are errors."""

from __future__ import annotations

import re
from typing import Any

TOP = {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}
DEVICE = {"name", "annotations", "containerEdits"}
EDITS = {"env", "deviceNodes", "mounts", "hooks", "additionalGids", "intelRdt", "netDevices"}
NODE = {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}
MOUNT = {"hostPath", "containerPath", "type", "options"}
HOOK = {"hookName", "path", "args", "env", "timeout"}
KIND = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?/[A-Za-z]([A-Za-z0-9_-]*[A-Za-z0-9])?$")
NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
VERSION = re.compile(r"^\d+\.\d+\.\d+$")


def problems(spec: Any) -> list[str]:
    out: list[str] = []

    def keys(obj: Any, allowed: set[str], where: str) -> bool:
        if not isinstance(obj, dict):
            out.append(f"{where}: not an object")
            return False
        out.extend(f"{where}.{k}: unknown field" for k in set(obj) - allowed)
        return True

    def edits(e: Any, where: str, *, required: bool) -> None:
        if not keys(e, EDITS, where):
            return
        if required and not e:
            out.append(f"{where}: empty container edits")
        for i, env in enumerate(e.get("env", [])):
            if not isinstance(env, str) or "=" not in env:
                out.append(f"{where}.env[{i}]: not K=V")
        for i, n in enumerate(e.get("deviceNodes", [])):
            if keys(n, NODE, f"{where}.deviceNodes[{i}]"):
                if not n.get("path", "").startswith("/"):
                    out.append(f"{where}.deviceNodes[{i}].path: required, absolute")
                if set(n.get("permissions", "")) - set("rwm"):
                    out.append(f"{where}.deviceNodes[{i}].permissions: not of r, w, m")
        for i, m in enumerate(e.get("mounts", [])):
            if keys(m, MOUNT, f"{where}.mounts[{i}]") and not (m.get("hostPath") and m.get("containerPath")):
                out.append(f"{where}.mounts[{i}]: hostPath and containerPath are required")
        for i, h in enumerate(e.get("hooks", [])):
            if keys(h, HOOK, f"{where}.hooks[{i}]") and not (h.get("hookName") and h.get("path")):
                out.append(f"{where}.hooks[{i}]: hookName and path are required")

    if not keys(spec, TOP, "spec"):
        return out
    if not VERSION.match(str(spec.get("cdiVersion", ""))):
        out.append("spec.cdiVersion: missing or not a version")
    if not KIND.match(str(spec.get("kind", ""))):
        out.append("spec.kind: not vendor.com/class")
    names = set()
    for i, d in enumerate(spec.get("devices", [])):
        if not keys(d, DEVICE, f"devices[{i}]"):
            continue
        if not NAME.match(str(d.get("name", ""))):
            out.append(f"devices[{i}].name: invalid")
        if d.get("name") in names:
            out.append(f"devices[{i}].name: duplicate")
        names.add(d.get("name"))
        edits(d.get("containerEdits"), f"devices[{i}].containerEdits", required=True)
    if "containerEdits" in spec:
        edits(spec["containerEdits"], "spec.containerEdits", required=False)
    return out
