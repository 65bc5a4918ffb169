"""Undoing what nfd did to a cluster, for ``nfd prune`` after an uninstall: from each Node
the labels, annotations, extended resources and taints the master's ownership
annotations name (``patches.owned``), those annotations, and the rest of nfd's own
annotation namespace; the NodeFeature objects nfd's workers wrote; and the
ResourceSlices nfd's DRA driver published (kubelet does not always delete them when the
driver goes).

Nothing the ownership annotations do not name is touched: a label set by hand in
``feature.node.kubernetes.io`` stays. The patches are the master's own (``node_patch``
and ``status_patch`` towards a decision that sets nothing), so what the master would
remove and what prune removes cannot differ."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from nfd.decision import Decision
from nfd.devices.config import DEFAULT_DRIVER_NAME
from nfd.kube.errors import ApiError, Conflict, Invalid, NotFound
from nfd.master.core.kube import KubeApi, Resource
from nfd.master.publishing.patches import (
    TRACKING,
    Op,
    escape,
    node_patch,
    observe,
    owned,
    status_patch,
    taint_str_dict,
)
from nfd.nodefeature import GROUP, NODE_NAME_LABEL, PLURAL, VERSION, WORKER_VERSION_ANNOTATION
from nfd.policy import NFD_NS

log = logging.getLogger(__name__)

NOTHING = Decision()
# A Node someone else keeps writing (kubelet, a controller): read it again and recompute
# the patch this many times before giving up on it.
ATTEMPTS = 5
# ResourceSlices, as the API server serves them from Kubernetes 1.34 on.
SLICE_GROUP, SLICE_VERSION, SLICE_PLURAL = "resource.k8s.io", "v1", "resourceslices"


@dataclass(frozen=True)
class NodePlan:
    """What nfd set on one Node, and the patches that remove it (empty: nothing to do).
    The Node patch is conditional on the Node's resourceVersion: it rewrites
    ``spec.taints`` whole, and a taint added meanwhile must not be lost."""

    name: str
    labels: tuple[str, ...] = ()
    annotations: tuple[str, ...] = ()
    extended_resources: tuple[str, ...] = ()
    taints: tuple[str, ...] = ()
    node_ops: tuple[Op, ...] = ()
    status_ops: tuple[Op, ...] = ()

    def items(self) -> list[str]:
        return (
            [f"label {k}" for k in self.labels]
            + [f"annotation {k}" for k in self.annotations]
            + [f"extended resource {k}" for k in self.extended_resources]
            + [f"taint {t}" for t in self.taints]
        )


def _nothing(node: Mapping[str, Any]) -> None:
    """What a prune keeps of a PATCH answer it has no use for."""
    return None


def plan(node: Mapping[str, Any]) -> NodePlan:
    """What nfd set on ``node`` (a Node as JSON), and the patches that remove it."""
    meta = node.get("metadata") or {}
    ann: dict[str, str] = meta.get("annotations") or {}
    obs = observe(node, None)
    own_labels, own_ann, own_ers, own_taints = owned(obs)
    # nfd's namespace is nfd's alone (rules cannot write there): besides the ownership
    # annotations it may hold upstream's version annotations of an earlier install.
    ours = {k for k in ann if k.startswith(f"{NFD_NS}/")}
    node_ops = node_patch(NOTHING, obs)
    node_ops += [
        {"op": "remove", "path": f"/metadata/annotations/{escape(k)}"} for k in sorted(ours - set(TRACKING))
    ]
    rv = str(meta.get("resourceVersion") or "")
    if node_ops and rv:
        node_ops.insert(0, {"op": "test", "path": "/metadata/resourceVersion", "value": rv})
    return NodePlan(
        name=str(meta.get("name") or ""),
        labels=tuple(sorted(own_labels & obs.labels.keys())),
        annotations=tuple(sorted((own_ann & ann.keys()) | ours)),
        extended_resources=tuple(sorted(own_ers & (obs.capacity.keys() | obs.allocatable.keys()))),
        taints=tuple(sorted(s for s in map(taint_str_dict, obs.taints) if s in own_taints)),
        node_ops=tuple(node_ops),
        status_ops=tuple(status_patch(NOTHING, obs)),
    )


def is_workers(obj: Mapping[str, Any]) -> bool:
    """A NodeFeature object as nfd's worker (or upstream's) writes it: labelled with its
    node and annotated with the worker's version. Other writers' (GPU feature discovery,
    say) carry the label only."""
    meta = obj.get("metadata") or {}
    return bool((meta.get("labels") or {}).get(NODE_NAME_LABEL)) and WORKER_VERSION_ANNOTATION in (
        meta.get("annotations") or {}
    )


@dataclass
class PruneResult:
    nodes: list[NodePlan] = field(default_factory=list)  # the Nodes that carried something
    nodefeatures: list[str] = field(default_factory=list)  # "namespace/name"
    resourceslices: list[str] = field(default_factory=list)  # names
    errors: list[str] = field(default_factory=list)


class Pruner:
    """Prunes Nodes (all, ``names``, or those ``selector`` selects), their workers'
    NodeFeature objects and the ResourceSlices of the DRA ``drivers`` for them;
    ``dry_run`` reads only. ``report`` gets a line for each item removed (would be, in a
    dry run) as it goes."""

    def __init__(
        self,
        api: KubeApi,
        *,
        dry_run: bool = False,
        drivers: tuple[str, ...] = (DEFAULT_DRIVER_NAME,),
        parallelism: int = 10,
        page_size: int = 500,
        report: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self.api = api
        self.dry_run = dry_run
        self.drivers = drivers
        self.parallelism = parallelism
        self.page_size = page_size
        self.report = report

    async def run(self, *, names: list[str] | None = None, selector: str = "") -> PruneResult:
        """Raises ApiError when the Nodes cannot be listed; a Node that fails is named in
        ``errors`` and the others go on."""
        out = PruneResult()
        gate = asyncio.Semaphore(self.parallelism)
        pruned: set[str] = set()

        async def one(name: str, node: dict[str, Any] | None) -> None:
            async with gate:
                try:
                    p = await self._node(name, node)
                except NotFound:
                    if names is not None:  # named, so expected
                        out.errors.append(f"node {name}: no such Node")
                    return
                except ApiError as e:
                    out.errors.append(f"node {name}: {e}")
                    return
            pruned.add(name)
            if p.items():
                out.nodes.append(p)

        if names is not None:
            await asyncio.gather(*(one(n, None) for n in dict.fromkeys(names)))
        else:
            res = Resource("nodes", label_selector=selector)
            async for page in self.api.pages(res, limit=self.page_size):
                items = [n for n in page.get("items") or [] if (n.get("metadata") or {}).get("name")]
                await asyncio.gather(*(one(n["metadata"]["name"], n) for n in items))
        scope = None if names is None and not selector else pruned
        await self._nodefeatures(scope, out)
        await self._resourceslices(scope, out)
        out.nodes.sort(key=lambda p: p.name)
        return out

    async def _node(self, name: str, node: dict[str, Any] | None) -> NodePlan:
        """Extended resources first, then the Node's metadata and taints: the ownership
        annotations go last, so a prune cut short can be run again. Answers what was
        removed (would be, in a dry run)."""
        ers: set[str] = set()  # what status patches removed, over the attempts
        for attempt in range(ATTEMPTS):
            if node is None:
                node = await self.api.get_node(name)
            p = plan(node)
            try:
                if p.status_ops and not self.dry_run:
                    node = await self.api.patch_node_status(name, list(p.status_ops), dict)
                    ers.update(p.extended_resources)
                    p = replace(plan(node), extended_resources=p.extended_resources)
                if p.node_ops and not self.dry_run:
                    await self.api.patch_node(name, list(p.node_ops), _nothing)
            except (Conflict, Invalid) as e:
                # Changed under us (a test or remove no longer applies): read it again.
                log.info("node %s changed while pruning (%s); reading it again", name, e)
                node = None
                if attempt + 1 < ATTEMPTS:
                    continue
                raise
            done = replace(p, extended_resources=tuple(sorted(ers | set(p.extended_resources))))
            verb = "would remove" if self.dry_run else "removed"
            for item in done.items():
                self.report(f"{verb} from node {name}: {item}")
            return done
        raise AssertionError("unreachable")  # the last attempt returns or raises

    async def _nodefeatures(self, nodes: set[str] | None, out: PruneResult) -> None:
        """Delete the workers' NodeFeature objects of ``nodes`` (None: of every node, gone
        ones too). No NodeFeature API (its CRD deleted with the install): nothing to do."""
        res = Resource(PLURAL, GROUP, VERSION, label_selector=NODE_NAME_LABEL)
        found: list[tuple[str, str]] = []
        try:
            async for page in self.api.pages(res, limit=self.page_size):
                for obj in page.get("items") or []:
                    meta = obj.get("metadata") or {}
                    node = (meta.get("labels") or {}).get(NODE_NAME_LABEL)
                    if is_workers(obj) and (nodes is None or node in nodes):
                        found.append((str(meta.get("namespace") or ""), str(meta.get("name") or "")))
        except NotFound:
            log.info("no NodeFeature API in the cluster: no NodeFeature objects to delete")
            return
        except ApiError as e:
            out.errors.append(f"cannot list NodeFeature objects: {e}")
            return
        verb = "would delete" if self.dry_run else "deleted"
        for ns, name in sorted(found):
            if not self.dry_run:
                try:
                    await self.api.delete_custom(GROUP, VERSION, ns, PLURAL, name)
                except NotFound:
                    continue
                except ApiError as e:
                    out.errors.append(f"NodeFeature {ns}/{name}: {e}")
                    continue
            out.nodefeatures.append(f"{ns}/{name}")
            self.report(f"{verb} NodeFeature {ns}/{name}")

    async def _resourceslices(self, nodes: set[str] | None, out: PruneResult) -> None:
        """Delete the ResourceSlices the DRA drivers published for ``nodes`` (None: every
        slice of the drivers, gone nodes' too). A driver name is the driver's alone, so
        whatever carries it is nfd's. No ResourceSlice API (an older cluster): nothing to
        do."""
        found: list[str] = []
        for driver in self.drivers:
            res = Resource(SLICE_PLURAL, SLICE_GROUP, SLICE_VERSION, field_selector=f"spec.driver={driver}")
            try:
                async for page in self.api.pages(res, limit=self.page_size):
                    for obj in page.get("items") or []:
                        node = (obj.get("spec") or {}).get("nodeName")
                        if nodes is None or node in nodes:
                            found.append(str((obj.get("metadata") or {}).get("name") or ""))
            except NotFound:
                log.info(
                    "no %s/%s API in the cluster: no ResourceSlices to delete", SLICE_GROUP, SLICE_VERSION
                )
                return
            except ApiError as e:
                out.errors.append(f"cannot list the ResourceSlices of driver {driver}: {e}")
        verb = "would delete" if self.dry_run else "deleted"
        for name in sorted(set(found)):
            if not self.dry_run:
                try:
                    await self.api.delete_custom(SLICE_GROUP, SLICE_VERSION, "", SLICE_PLURAL, name)
                except NotFound:
                    continue
                except ApiError as e:
                    out.errors.append(f"ResourceSlice {name}: {e}")
                    continue
            out.resourceslices.append(name)
            self.report(f"{verb} ResourceSlice {name}")
