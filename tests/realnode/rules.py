"""NodeFeatureRules the real-node suite applies: each matches any node (every kernel has
a version) and sets what it is asked to."""

from __future__ import annotations

import json

FEATURE_NS = "feature.node.kubernetes.io"


def rule_manifest(name: str, *, label: str, resource: str | None = None, taint: bool = False) -> str:
    rule: dict[str, object] = {
        "name": name,
        "labels": {label: "true"},
        "matchFeatures": [{"feature": "kernel.version", "matchExpressions": {"major": {"op": "Exists"}}}],
    }
    if resource:
        rule["extendedResources"] = {resource: "3"}
    if taint:
        # PreferNoSchedule: the suite's own pods still schedule on the one node.
        rule["taints"] = [{"key": f"{FEATURE_NS}/{label}", "value": "true", "effect": "PreferNoSchedule"}]
    return json.dumps(
        {
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
            "kind": "NodeFeatureRule",
            "metadata": {"name": name},
            "spec": {"rules": [rule]},
        }
    )
