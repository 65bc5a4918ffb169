"""The master's core, independent of HTTP: takes features, keeps decisions current
(also when rules change), and hands nodes to the publisher."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nfd.canonical import Encoded, GroupCache, instance_bodies
from nfd.decision import Decision
from nfd.features import Features
from nfd.master.core.featurestore import encode
from nfd.master.core.metrics import Metrics
from nfd.master.core.objects import Kept, ObjectKeeper
from nfd.master.core.state import NodeRecord, NodeStore, now, shared
from nfd.master.decisions.decide import Decider
from nfd.master.publishing.publisher import MemoryPublisher, Publisher
from nfd.nodefeature import NodeFeatureObject, merge
from nfd.rules import RuleSet

log = logging.getLogger(__name__)

_NO_RESOURCES: frozenset[str] = frozenset()  # most nodes' device-plugin resources: one object


@dataclass(frozen=True)
class Submitted:
    record: NodeRecord
    changed: bool


def _decision_key(d: Decision) -> str:
    doc = [
        d.labels,
        d.annotations,
        d.extended_resources,
        [str(t) for t in d.taints],
        d.rejected,
        d.rule_errors,
        d.origins,
    ]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


class MasterService:
    def __init__(self, *, decider: Decider, metrics: Metrics, publisher: Publisher | None = None) -> None:
        self.store = NodeStore()
        self.decider = decider
        self.metrics = metrics
        self.publisher: Publisher = publisher or MemoryPublisher(self.store)
        # (rules generation, relevant features, device-plugin resources, NodeFeature
        # labels) -> decision: nodes that differ only in what no label function or rule
        # reads share one decision; a decision made under older rules is never found again.
        self._decisions: dict[tuple[int, str, frozenset[str], str], Decision] = {}
        self.rules_generation = 0
        self._groups = GroupCache()
        # Equal decisions are one object, whatever features led to them.
        self._interned: weakref.WeakValueDictionary[str, Decision] = weakref.WeakValueDictionary()
        self._reeval_task: asyncio.Task[None] | None = None
        self._reeval_pending = False
        self._last_reeval = 0.0
        self.min_reeval_interval = 1.0
        self.rules_synced = True
        # Per node, from its NodeFeature objects (nfd.master.watches.nodefeatures): the objects
        # (their features in the store), and the labels they ask for (qualified name ->
        # value).
        self.objects = ObjectKeeper(self.store.features)
        self.node_objects: dict[str, list[Kept]] = {}
        self._node_labels: dict[str, dict[str, str]] = {}
        self.own_namespace = ""
        # Called with a node's name when its (merged) features change or it goes.
        self.feature_listeners: list[Callable[[str], None]] = []

    def node_labels(self, name: str) -> dict[str, str]:
        """What the node's NodeFeature objects ask for (qualified name -> value)."""
        return dict(self._node_labels.get(name) or {})

    # -- decisions --------------------------------------------------------------------
    def _projection(self, parts: Iterable[tuple[str, str, str]]) -> str:
        """A key over the feature groups that can change this node's decision."""
        relevant = "|".join(f"{k}/{n}/{h}" for k, n, h in parts if self.decider.relevant(n))
        return hashlib.sha256(relevant.encode()).hexdigest()

    def _decision(
        self,
        parts: Iterable[tuple[str, str, str]],
        features: Callable[[], Features],
        dpr: frozenset[str],
        node_labels: Mapping[str, str] | None = None,
    ) -> Decision:
        parts = list(parts)
        nl = node_labels or {}
        generation = self.rules_generation
        lkey = hashlib.sha256(json.dumps(sorted(nl.items())).encode()).hexdigest() if nl else ""
        d = self._decisions.get((generation, self._projection(parts), dpr, lkey))
        if d is None:
            d = self.decider.decide(features(), dpr, nl)
            if d.rule_errors:
                self.metrics.rule_errors.inc(len(d.rule_errors))
            d = self._interned.setdefault(_decision_key(d), d)
            if len(self._decisions) > 2 * len(self.store) + 1000:
                self._decisions.clear()  # keys of nodes long changed: start afresh
            # Keyed by what this decision read (the decider knows it now).
            self._decisions[(generation, self._projection(parts), dpr, lkey)] = d
        return d

    def _release(self, digest: str) -> None:
        self.store.features.release(digest)

    def _features_changed(self, name: str) -> None:
        for listener in self.feature_listeners:
            listener(name)

    def _merged(
        self, objs: list[NodeFeatureObject], own: Features, own_enc: Encoded | None = None
    ) -> tuple[Encoded, Callable[[], Features]]:
        if own_enc is not None and not any(o.features.names() for o in objs):
            # Labels only (GPU feature discovery's objects): the features are the worker's.
            return own_enc, lambda: own
        merged = merge(objs, self.own_namespace, base=own)
        return encode(merged.features.to_dict(), self._groups), lambda: merged.features

    def _own_encoded(self, digest: str) -> Encoded:
        parts = self.store.features.parts(digest)
        return Encoded(digest, tuple((k, n, h, "") for k, n, h in parts))

    # -- NodeFeature objects ----------------------------------------------------------
    def set_node_objects(self, name: str, objs: Sequence[NodeFeatureObject]) -> bool:
        """The NodeFeature objects of node ``name`` changed (``objs``: all of them now).
        Re-decides the node; True if its decision changed. A node known only from
        objects (no worker of ours posts for it) gets a record of its own."""
        objs = list(objs)
        merged = merge(objs, self.own_namespace)
        before = self.node_objects.pop(name, [])
        self._node_labels.pop(name, None)
        if objs:
            self.node_objects[name] = [self.objects.keep(o) for o in objs]
            self._node_labels[name] = merged.labels
        self.objects.release(before)  # after: what the new objects share stays stored
        rec = self.store.get(name)
        if rec is None:
            if not objs:
                return False
            empty = encode({}, self._groups)
            self.store.features.put(empty)  # as its own features
            self.store.features.put(empty)  # as the effective ones, released below
            rec = NodeRecord(name, empty.digest, frozenset(), "", Decision(), now(), has_worker=False)
            self.store.nodes[name] = rec
            self.metrics.nodes.set(len(self.store))
        rec.label_objects = merged.origins
        own_digest = rec.own_digest
        own = self.store.features.get(own_digest)
        if objs and any(o.features.names() for o in objs):
            eff, load = self._merged(objs, own)
        else:  # the worker's own features, as stored
            eff, load = self._own_encoded(own_digest), lambda: own
        self.store.features.put(eff)
        old = rec.digest
        rec.digest = eff.digest
        rec.worker_digest = own_digest if eff.digest != own_digest else ""
        self._release(old)
        if old != eff.digest:
            self._features_changed(name)
        parts = [(k, n, h) for k, n, h, _ in eff.parts]
        decision = self._decision(parts, load, rec.device_plugin_resources, self._node_labels.get(name))
        if rec.decision == decision:
            rec.decision = decision
            return False
        rec.decision, rec.updated = decision, now()
        rec.generation += 1
        self.metrics.count_rejected(decision.rejected)
        self.publisher.enqueue(name)
        return True

    # -- worker input -----------------------------------------------------------------
    def resolve_refs(self, features: dict[str, Any]) -> list[str]:
        """Put in ``features`` (the wire shape, validated) each group a worker named by
        its hash (``ref``) in place of its elements, from the groups the master holds:
        the recent variants of that group, else any stored group with that hash. Answers
        the groups it holds none of ("kind/name"), for the worker to send whole."""
        missing: list[str] = []
        for kind, groups in features.items():
            for name, body in groups.items():
                ref = body.get("ref")
                if ref is None or body.get("elements") is not None:
                    continue
                elements = self._groups.held(kind, name, ref)
                if elements is not None:
                    groups[name] = {
                        "elements": instance_bodies(elements) if kind == "instances" else elements
                    }
                    continue
                try:
                    groups[name] = json.loads(self.store.features.group_json(ref))
                except KeyError:
                    missing.append(f"{kind}/{name}")
        return missing

    def submit(
        self,
        name: str,
        *,
        features: Mapping[str, Any],
        device_plugin_resources: Sequence[str] = (),
        nfd_version: str = "",
    ) -> Submitted:
        """``features``: the wire shape, already validated."""
        self.metrics.update_requests.inc()
        dpr = frozenset(device_plugin_resources) or _NO_RESOURCES
        nfd_version = shared(nfd_version)
        rec = self.store.get(name)
        if rec is not None:
            rec.last_seen = time.monotonic()
            # The worker endpoint sets it again for its body; features from another
            # replica must not leave an older body's hash answering for them.
            rec.body_hash = b""
        enc = encode(features, self._groups)
        digest = enc.digest
        # A worker re-sending what it sent before (it restarted, or heartbeats are off)
        # costs no decision and no write.
        if (
            rec is not None
            and rec.has_worker
            and digest == rec.own_digest
            and dpr == rec.device_plugin_resources
        ):
            return Submitted(rec, False)
        self.store.features.put(enc)
        kept = self.node_objects.get(name)
        if kept:
            eff, load = self._merged(self.objects.load(kept), Features.from_dict(features), enc)
        else:
            eff, load = enc, lambda: Features.from_dict(features)
        self.store.features.put(eff)
        parts = [(k, n, h) for k, n, h, _ in eff.parts]
        decision = self._decision(parts, load, dpr, self._node_labels.get(name))
        worker_digest = digest if eff.digest != digest else ""
        if rec is None:
            rec = NodeRecord(name, eff.digest, dpr, nfd_version, decision, now(), last_seen=time.monotonic())
            rec.worker_digest = worker_digest
            self.store.nodes[name] = rec
            self.metrics.nodes.set(len(self.store))
            self._features_changed(name)
        else:
            old, old_own = rec.digest, rec.own_digest
            rec.digest, rec.device_plugin_resources, rec.nfd_version = eff.digest, dpr, nfd_version
            rec.worker_digest, rec.has_worker = worker_digest, True
            self._release(old)
            self._release(old_own)
            if old != eff.digest:
                self._features_changed(name)
            if rec.decision == decision:
                rec.decision = decision
                return Submitted(rec, False)
            rec.decision, rec.updated = decision, now()
        rec.generation += 1
        self.metrics.count_rejected(decision.rejected)
        self.publisher.enqueue(name)
        return Submitted(rec, True)

    def heartbeat(self, name: str, digest: str) -> bool:
        self.metrics.heartbeats.inc()
        rec = self.store.get(name)
        if rec is None:
            return False
        rec.last_seen = time.monotonic()
        return rec.has_worker and rec.own_digest == digest

    def forget(self, name: str) -> None:
        """The Node is gone and its worker silent: drop what the master holds for it
        (a cluster that replaces nodes must not grow the master, upstream #1841)."""
        # The node's NodeFeature objects stay known (they go when the objects do, by
        # garbage collection): a worker that comes back gets them merged again.
        rec = self.store.nodes.pop(name, None)
        if rec is not None:
            self._release(rec.digest)
            self._release(rec.own_digest)
            self._features_changed(name)
            self.metrics.nodes.set(len(self.store))
            log.info("node %s: gone from the cluster; forgotten", name)

    # -- rules ------------------------------------------------------------------------
    def set_rules(self, rulesets: Sequence[RuleSet]) -> None:
        """New rules: re-evaluate every node, coalescing bursts of changes and at most
        once per ``min_reeval_interval``."""
        self.decider = self.decider.with_rules(rulesets)
        self.rules_generation += 1
        self._decisions.clear()  # the old generation's entries can never match again
        self._reeval_pending = True
        if self._reeval_task is None or self._reeval_task.done():
            self._reeval_task = asyncio.get_running_loop().create_task(self._reeval_loop())

    async def _reeval_loop(self) -> None:
        while self._reeval_pending:
            wait = self._last_reeval + self.min_reeval_interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._reeval_pending = False
            self._last_reeval = time.monotonic()
            await self.reevaluate_all()

    async def reevaluate_all(self) -> int:
        """Decide every distinct feature set again; queue nodes whose decision changed."""
        t0 = time.perf_counter()
        self._decisions.clear()
        changed = 0
        by_digest: dict[str, list[NodeRecord]] = {}
        for rec in self.store:
            by_digest.setdefault(rec.digest, []).append(rec)
        for i, (digest, recs) in enumerate(by_digest.items()):
            # Between the pauses below, workers change features and nodes go: a node no
            # longer on this digest was decided anew by its own change (with these rules).
            recs = [r for r in recs if r.digest == digest and self.store.nodes.get(r.name) is r]
            if not recs:
                continue
            cached: list[Features] = []

            def features(digest: str = digest, cached: list[Features] = cached) -> Features:
                if not cached:
                    cached.append(self.store.features.get(digest))
                return cached[0]

            parts = self.store.features.parts(digest)
            for rec in recs:
                d = self._decision(
                    parts, features, rec.device_plugin_resources, self._node_labels.get(rec.name)
                )
                if d != rec.decision:
                    rec.decision, rec.updated = d, now()
                    rec.generation += 1
                    self.metrics.count_rejected(d.rejected)
                    self.publisher.enqueue(rec.name)
                    changed += 1
                else:
                    rec.decision = d
            if i % 50 == 49:
                await asyncio.sleep(0)  # stay responsive to workers meanwhile
        self.metrics.rule_duration.observe(time.perf_counter() - t0)
        log.info("rules changed: %d of %d nodes re-labelled", changed, len(self.store))
        return changed
