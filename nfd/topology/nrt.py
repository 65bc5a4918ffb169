"""The NodeResourceTopology object (``topology.node.k8s.io/v1alpha2``) for one node.

Zones are named ``node-<N>`` with type ``Node`` and carry the sysfs distances to the other
zones as costs; resources are sorted by name, quantities written as Kubernetes writes
them (``64Gi``, ``24``, ``1500m``). The Topology Manager policy and scope go into the top-level
attributes (``topologyManagerPolicy``, ``topologyManagerScope``, kubelet's spelling) and
into the deprecated ``topologyPolicies`` that schedulers still read. The Node owns the
object, so deleting the Node lets the garbage collector delete it.
"""

from __future__ import annotations

from typing import Any

from nfd.hw.hugepages import kib_quantity
from nfd.topology.accounting import MILLI, Zone
from nfd.topology.kubeletconfig import TopologyPolicy
from nfd.topology.layout import Layout

GROUP = "topology.node.k8s.io"
VERSION = "v1alpha2"
PLURAL = "noderesourcetopologies"
KIND = "NodeResourceTopology"


def quantity(name: str, value: int) -> str:
    """``value`` in the unit accounting counts ``name`` in: milli-CPUs for cpu, bytes for
    memory and huge pages, a count for devices."""
    if name == "cpu":
        return str(value // MILLI) if value % MILLI == 0 else f"{value}m"
    if name == "memory" or name.startswith("hugepages-"):
        return kib_quantity(value // 1024) if value and value % 1024 == 0 else str(value)
    return str(value)


def zone_name(node_id: int) -> str:
    return f"node-{node_id}"


def _zone(zone: Zone, layout: Layout, exclude: frozenset[str]) -> dict[str, Any]:
    node = next((n for n in layout.nodes if n.id == zone.id), None)
    out: dict[str, Any] = {"name": zone_name(zone.id), "type": "Node"}
    if node is not None and node.distances:
        out["costs"] = [{"name": zone_name(i), "value": d} for i, d in sorted(node.distances.items())]
    out["resources"] = [
        {
            "name": name,
            "capacity": quantity(name, a.capacity),
            "allocatable": quantity(name, a.allocatable),
            "available": quantity(name, a.available),
        }
        for name, a in sorted(zone.resources.items())
        if name not in exclude
    ]
    return out


def build(
    node_name: str,
    *,
    zones: list[Zone],
    layout: Layout,
    policy: TopologyPolicy | None,
    node_uid: str | None,
    exclude: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The whole object. ``policy`` None (unreadable or unknown): no policy attributes.
    ``node_uid`` None: no owner reference (the Node could not be read). Resources named
    in ``exclude`` are left out (upstream's excludeList)."""
    meta: dict[str, Any] = {"name": node_name}
    if node_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}]
    obj: dict[str, Any] = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": meta}
    if policy is not None:
        obj["topologyPolicies"] = [policy.legacy_name()]
        obj["attributes"] = [
            {"name": "topologyManagerPolicy", "value": policy.policy},
            {"name": "topologyManagerScope", "value": policy.scope},
        ]
    obj["zones"] = [_zone(z, layout, exclude) for z in zones]
    return obj


def content(obj: dict[str, Any]) -> dict[str, Any]:
    """What the updater owns in an object: compared to decide whether to write."""
    meta = obj.get("metadata") or {}
    return {
        "ownerReferences": meta.get("ownerReferences"),
        "topologyPolicies": obj.get("topologyPolicies"),
        "attributes": obj.get("attributes"),
        "zones": obj.get("zones"),
    }
