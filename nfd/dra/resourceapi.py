"""The resource.k8s.io API as the DRA agent speaks to it: its paths, and how its
failures read in the agent's log lines. The slice publisher, the claim status writer and
the device events share them."""

from __future__ import annotations

from nfd.kube.errors import ApiError
from nfd.kube.transport import path

RESOURCE_API = ("apis", "resource.k8s.io", "v1")


def api_failure(e: ApiError) -> str:
    """An ApiError as the agent's log lines word it."""
    return f"HTTP {e.status}: {e.message}" if e.status else f"API server unreachable: {e.message}"


def claim_path(namespace: str, name: str, *sub: str) -> str:
    return path(*RESOURCE_API, "namespaces", namespace, "resourceclaims", name, *sub)
