"""ResourceClaims as a user creates them and as the scheduler allocates them, over HTTP
with the real kubernetes client; and the pool as the scheduler reads it."""

from __future__ import annotations

import json
from typing import Any

from tests.fakeapi import FakeApiServer

DRIVER = "nfd.node.kubernetes.io"
NODE = "node-a"


def create_claim(
    api_client: Any, namespace: str, name: str, *, device_class: str, count: int = 1
) -> dict[str, Any]:
    from kubernetes import client

    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [{"name": "dev", "exactly": {"deviceClassName": device_class, "count": count}}]
            }
        },
    }
    api: Any = client.ResourceV1Api(api_client)
    resp = api.create_namespaced_resource_claim(namespace, body, _preload_content=False)
    out: dict[str, Any] = json.loads(resp.data)
    return out


def allocate(api_client: Any, claim: dict[str, Any], results: list[tuple[str, str, str]]) -> dict[str, Any]:
    """Write ``status.allocation`` as the scheduler does: (driver, pool, device) each."""
    from kubernetes import client

    api: Any = client.ResourceV1Api(api_client)
    meta = claim["metadata"]
    current = json.loads(
        api.read_namespaced_resource_claim(meta["name"], meta["namespace"], _preload_content=False).data
    )
    current["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "dev", "driver": driver, "pool": pool, "device": device}
                    for driver, pool, device in results
                ]
            }
        }
    }
    resp = api.replace_namespaced_resource_claim_status(
        meta["name"], meta["namespace"], current, _preload_content=False
    )
    out: dict[str, Any] = json.loads(resp.data)
    return out


def published(fake_api: FakeApiServer) -> dict[str, dict[str, Any]]:
    """Devices of the newest generation of this node's pool, by name."""
    slices = [s for s in fake_api.objects.list("resourceslices") if s["spec"]["nodeName"] == NODE]
    if not slices:
        return {}
    gen = max(s["spec"]["pool"]["generation"] for s in slices)
    newest = [s for s in slices if s["spec"]["pool"]["generation"] == gen]
    assert len(newest) == newest[0]["spec"]["pool"]["resourceSliceCount"]
    return {d["name"]: d for s in newest for d in s["spec"].get("devices") or []}
