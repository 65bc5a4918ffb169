from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for d in docs:
        if d["kind"] == kind and d["metadata"]["name"] == name:
            return d
    raise AssertionError(f"no {kind}/{name}")


def rbac_rules(docs: list[dict[str, Any]], kind: str, name: str) -> set[tuple[str, str, tuple[str, ...]]]:
    """The role's rules flattened: (API group, resource, sorted verbs) for each pair."""
    return {
        (g, r, tuple(sorted(rule["verbs"])))
        for rule in find(docs, kind, name)["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }


def workloads(docs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for d in docs:
        if d["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "Job", "Pod"):
            yield d


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]
    return spec


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(doc)
    return list(spec.get("initContainers", [])) + list(spec["containers"])


def flag(args: list[str], name: str) -> str | None:
    for a in args:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None
