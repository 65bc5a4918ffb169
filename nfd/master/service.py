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

from nfd.decision import Decision
from nfd.features import Features
from nfd.master.decide import Decider
from nfd.master.featurestore import GroupCache, encode
from nfd.master.metrics import Metrics
from nfd.master.publisher import MemoryPublisher, Publisher
from nfd.master.state import NodeRecord, NodeStore, now
from nfd.rules import RuleSet

log = logging.getLogger(__name__)


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
    ]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


class MasterService:
    def __init__(self, *, decider: Decider, metrics: Metrics, publisher: Publisher | None = None) -> None:
        self.store = NodeStore()
        self.decider = decider
        self.metrics = metrics
        self.publisher: Publisher = publisher or MemoryPublisher(self.store)
        # (rules generation, relevant features, device-plugin resources) -> decision:
        # nodes that differ only in what no label function or rule reads share one
        # decision; a decision made under older rules is never found again.
        self._decisions: dict[tuple[int, str, frozenset[str]], Decision] = {}
        self.rules_generation = 0
        self._groups = GroupCache()
        # Equal decisions are one object, whatever features led to them.
        self._interned: weakref.WeakValueDictionary[str, Decision] = weakref.WeakValueDictionary()
        self._reeval_task: asyncio.Task[None] | None = None
        self._reeval_pending = False
        self._last_reeval = 0.0
        self.min_reeval_interval = 1.0
        self.rules_synced = True

    # -- decisions --------------------------------------------------------------------
    def _projection(self, parts: Iterable[tuple[str, str, str]]) -> str:
        """A key over the feature groups that can change this node's decision."""
        relevant = "|".join(f"{k}/{n}/{h}" for k, n, h in parts if self.decider.relevant(n))
        return hashlib.sha256(relevant.encode()).hexdigest()

    def _decision(
        self, parts: Iterable[tuple[str, str, str]], features: Callable[[], Features], dpr: frozenset[str]
    ) -> Decision:
        parts = list(parts)
        generation = self.rules_generation
        d = self._decisions.get((generation, self._projection(parts), dpr))
        if d is None:
            d = self.decider.decide(features(), dpr)
            if d.rule_errors:
                self.metrics.rule_errors.inc(len(d.rule_errors))
            d = self._interned.setdefault(_decision_key(d), d)
            if len(self._decisions) > 2 * len(self.store) + 1000:
                self._decisions.clear()  # keys of nodes long changed: start afresh
            # Keyed by what this decision read (the decider knows it now).
            self._decisions[(generation, self._projection(parts), dpr)] = d
        return d

    def _release(self, digest: str) -> None:
        self.store.features.release(digest)

    # -- worker input -----------------------------------------------------------------
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
        dpr = frozenset(device_plugin_resources)
        rec = self.store.get(name)
        if rec is not None:
            rec.last_seen = time.monotonic()
        enc = encode(features, self._groups)
        digest = enc.digest
        # A worker re-sending what it sent before (it restarted, or heartbeats are off)
        # costs no decision and no write.
        if rec is not None and digest == rec.digest and dpr == rec.device_plugin_resources:
            return Submitted(rec, False)
        self.store.features.put(enc)
        parts = [(k, n, h) for k, n, h, _ in enc.parts]
        decision = self._decision(parts, lambda: Features.from_dict(features), dpr)
        if rec is None:
            rec = NodeRecord(name, digest, dpr, nfd_version, decision, now(), last_seen=time.monotonic())
            self.store.nodes[name] = rec
            self.metrics.nodes.set(len(self.store))
        else:
            old = rec.digest
            rec.digest, rec.device_plugin_resources, rec.nfd_version = digest, dpr, nfd_version
            self._release(old)
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
        return rec.digest == digest

    def forget(self, name: str) -> None:
        """The Node is gone and its worker silent: drop what the master holds for it
        (a cluster that replaces nodes must not grow the master, upstream #1841)."""
        rec = self.store.nodes.pop(name, None)
        if rec is not None:
            self._release(rec.digest)
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
            cached: list[Features] = []

            def features(digest: str = digest, cached: list[Features] = cached) -> Features:
                if not cached:
                    cached.append(self.store.features.get(digest))
                return cached[0]

            parts = self.store.features.parts(digest)
            for rec in recs:
                d = self._decision(parts, features, rec.device_plugin_resources)
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
