"""The kubelet's Topology Manager policy and scope, from its config file or a configz
answer.

The config file is a ``KubeletConfiguration`` (YAML or JSON); configz wraps the same keys
in ``{"kubeletconfig": {...}}``. Absent keys take kubelet's defaults (``none``,
``container``). A value kubelet would not accept is reported as a :class:`PolicyError`
naming the file and key; the updater then publishes the node without these attributes
rather than guess.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
SCOPES = ("container", "pod")

# The deprecated top-level ``topologyPolicies`` value that schedulers still read
# (topology.node.k8s.io v1alpha2): policy and scope folded into one word.
_LEGACY = {"best-effort": "BestEffort", "restricted": "Restricted", "single-numa-node": "SingleNUMANode"}


class PolicyError(ValueError):
    """The config cannot be read, or names a policy or scope kubelet does not know."""


@dataclass(frozen=True)
class TopologyPolicy:
    policy: str = "none"
    scope: str = "container"

    def legacy_name(self) -> str:
        if self.policy == "none":
            return "None"
        return _LEGACY[self.policy] + ("PodLevel" if self.scope == "pod" else "ContainerLevel")


def parse(text: str, source: str) -> TopologyPolicy:
    """The policy in a kubelet config file's or configz answer's text; ``source`` names
    it in errors."""
    from nfd import yamlfile  # JSON is YAML; configz answers come as JSON

    try:
        data: Any = yamlfile.parse(text, source) if text.strip() else {}
    except yamlfile.YamlFileError as e:
        raise PolicyError(str(e)) from None
    if isinstance(data, dict) and isinstance(data.get("kubeletconfig"), dict):
        data = data["kubeletconfig"]
    if not isinstance(data, dict):
        raise PolicyError(f"{source}: expected a KubeletConfiguration mapping")
    policy = data.get("topologyManagerPolicy") or "none"
    scope = data.get("topologyManagerScope") or "container"
    if policy not in POLICIES:
        raise PolicyError(
            f"{source}: topologyManagerPolicy {_shown(policy)} is not a Topology Manager policy "
            f"(one of {', '.join(POLICIES)})"
        )
    if scope not in SCOPES:
        raise PolicyError(
            f"{source}: topologyManagerScope {_shown(scope)} is not a Topology Manager scope "
            f"(one of {', '.join(SCOPES)})"
        )
    return TopologyPolicy(policy, scope)


def _shown(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):  # a date, bytes, a set, a number too large to print
        return f"of type {type(value).__name__}"


def load(path: str) -> TopologyPolicy:
    """Read through :mod:`nfd.yamlfile`, as every YAML file is: bounded, UTF-8, never
    blocking on a FIFO."""
    from nfd import yamlfile

    try:
        text = yamlfile.read_text(path, limit=yamlfile.CONFIG_LIMIT)
    except yamlfile.YamlFileError as e:
        raise PolicyError(str(e)) from None
    return parse(text, path)
