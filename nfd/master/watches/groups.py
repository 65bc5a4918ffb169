"""NodeFeatureGroup objects: ``spec.featureGroupRules`` evaluated over every node the
master knows, ``status.nodes`` kept current.

- A node is in a group when any of its rules matches the node's (merged) features, as
  upstream's master evaluates them (rules in order, ``rule.matched`` holding the vars of
  rules before). Results are kept per feature set (digest): nodes of one hardware kind
  cost one evaluation, and a node that changes costs one evaluation per group.
- Only the leader writes, and only a status that changed, at most every
  ``min_interval_s`` per group (changes in between are coalesced): a JSON Patch on the
  status subresource.
- Size: etcd refuses objects over 1.5 MiB, which upstream's flat list outgrows at about
  5,800 nodes with 253-character names (upstream #2548). ``status.nodes`` keeps its
  upstream shape (``[{name}]``, sorted by name) but holds at most ``status_budget``
  bytes of entries (1 MiB by default, leaving room for the spec); ``status.nodeCount``
  always has the true number and ``status.nodesTruncated`` says the list was cut.
  Readers that know only upstream's fields still read a valid object.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nfd.kube.errors import ApiError
from nfd.master.core.kube import KubeApi, Resource
from nfd.master.core.watch import ListWatch, Pages, object_key
from nfd.master.decisions.service import MasterService
from nfd.rules.evaluate import FeatureView, execute
from nfd.rules.expressions import EvalError
from nfd.rules.model import Rule, RuleParseError, parse_rule

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "nfd.k8s-sigs.io", "v1alpha1", "nodefeaturegroups"
STATUS_BUDGET = 1024 * 1024

Key = tuple[str, str]  # (namespace, name)


@dataclass
class Group:
    key: Key
    rules: tuple[Rule, ...]
    errors: list[str] = field(default_factory=list)
    members: set[str] = field(default_factory=set)
    by_digest: dict[str, bool] = field(default_factory=dict)
    written: dict[str, Any] | None = None  # the status last written (or read back)


def parse_group(raw: dict[str, Any]) -> Group:
    key = object_key(raw)
    spec = raw.get("spec") or {}
    rules: list[Rule] = []
    errors: list[str] = []
    raw_rules = spec.get("featureGroupRules") if isinstance(spec, dict) else None
    for i, r in enumerate(raw_rules if isinstance(raw_rules, list) else []):
        try:
            rules.append(parse_rule(r, f"spec.featureGroupRules[{i}]"))
        except RuleParseError as e:
            errors.append(str(e))
    status = raw.get("status")
    return Group(key, tuple(rules), errors, written=status if isinstance(status, dict) else None)


def status_of(members: set[str], budget: int = STATUS_BUDGET) -> dict[str, Any]:
    """Upstream's ``status.nodes`` within ``budget`` bytes, plus the true count."""
    nodes: list[dict[str, str]] = []
    used = 2  # []
    for name in sorted(members):
        size = len(json.dumps(name)) + 11  # {"name":...}, and a comma
        if used + size > budget:
            break
        nodes.append({"name": name})
        used += size
    return {"nodes": nodes, "nodeCount": len(members), "nodesTruncated": len(nodes) < len(members)}


class GroupManager:
    def __init__(
        self,
        *,
        service: MasterService,
        api: KubeApi | None,
        page_size: int = 500,
        may_write: Callable[[], bool] = lambda: True,
        min_interval_s: float = 1.0,
        status_budget: int = STATUS_BUDGET,
    ) -> None:
        self.service = service
        self.api = api
        self.may_write = may_write
        self.min_interval_s = min_interval_s
        self.status_budget = status_budget
        self.groups: dict[Key, Group] = {}
        self.dirty: set[Key] = set()
        self.writes = 0
        self._last_write: dict[Key, float] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.watch = (
            ListWatch(
                api=api,
                resource=Resource(PLURAL, GROUP, VERSION),
                page_size=page_size,
                on_list=self._listed,
                on_event=self._event,
                absent=(403, 404),
            )
            if api is not None
            else None
        )
        service.feature_listeners.append(self.node_changed)

    # -- membership -------------------------------------------------------------------
    def _matches(self, g: Group, digest: str) -> bool:
        hit = g.by_digest.get(digest)
        if hit is None:
            view = FeatureView(self.service.store.features.get(digest))
            hit = False
            for rule in g.rules:
                try:
                    out = execute(rule, view)
                except EvalError as e:
                    log.warning("NodeFeatureGroup %s/%s rule %s: %s", *g.key, rule.name, e)
                    continue
                view.ensure_matched()
                view.add_matched(out.vars)
                hit = hit or out.matched
            if len(g.by_digest) > 4 * len(self.service.store) + 1000:
                g.by_digest.clear()
            g.by_digest[digest] = hit
        return hit

    def recompute(self, g: Group) -> None:
        members = {rec.name for rec in self.service.store if self._matches(g, rec.digest)}
        if members != g.members:
            g.members = members
        self._mark(g.key)

    def node_changed(self, name: str) -> None:
        rec = self.service.store.get(name)
        for g in self.groups.values():
            now_in = rec is not None and self._matches(g, rec.digest)
            if now_in != (name in g.members):
                if now_in:
                    g.members.add(name)
                else:
                    g.members.discard(name)
                self._mark(g.key)

    def _mark(self, key: Key) -> None:
        self.dirty.add(key)
        self._wake.set()

    # -- objects ----------------------------------------------------------------------
    def set_group(self, raw: dict[str, Any]) -> None:
        g = parse_group(raw)
        old = self.groups.get(g.key)
        if old is not None and old.rules == g.rules:
            old.written = g.written  # our own status write coming back
            if g.written != status_of(old.members, self.status_budget):
                self._mark(g.key)
            return
        for e in g.errors:
            log.warning("NodeFeatureGroup %s/%s: %s", *g.key, e)
        self.groups[g.key] = g
        self.recompute(g)

    async def _listed(self, pages: Pages) -> None:
        keys = set()
        async for page in pages:
            for raw in page:
                self.set_group(raw)
                keys.add(object_key(raw))
        for k in [k for k in self.groups if k not in keys]:
            del self.groups[k]

    def _event(self, kind: str, raw: dict[str, Any]) -> None:
        if kind == "DELETED":
            self.groups.pop(object_key(raw), None)
        elif kind in ("ADDED", "MODIFIED"):
            self.set_group(raw)

    # -- writing ----------------------------------------------------------------------
    async def flush(self) -> int:
        """Write the changed statuses that are due; the number written."""
        if self.api is None or not self.may_write():
            return 0
        done = 0
        now = time.monotonic()
        for key in sorted(self.dirty):
            g = self.groups.get(key)
            if g is None:
                self.dirty.discard(key)
                continue
            if now - self._last_write.get(key, -1e9) < self.min_interval_s:
                continue
            self.dirty.discard(key)
            status = status_of(g.members, self.status_budget)
            if status == g.written:
                continue
            try:
                await self.api.patch_custom_status(
                    GROUP,
                    VERSION,
                    key[0],
                    PLURAL,
                    key[1],
                    [{"op": "add", "path": "/status", "value": status}],
                )
            except ApiError as e:
                if e.status != 404:
                    log.warning("NodeFeatureGroup %s/%s: status not written: %s", *key, e)
                    self.dirty.add(key)
                continue
            g.written = status
            self._last_write[key] = time.monotonic()
            self.writes += 1
            done += 1
        return done

    async def _writer(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.flush()
            if self.dirty:  # some not yet due, or not the leader yet: look again soon
                await asyncio.sleep(min(self.min_interval_s, 1.0) or 0.05)
                self._wake.set()

    async def start(self) -> None:
        if self.watch is not None:
            await self.watch.start()
        self._task = asyncio.get_running_loop().create_task(self._writer())

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        if self._task is not None:
            self._task.cancel()
