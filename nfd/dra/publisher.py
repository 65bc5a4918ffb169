"""This node's ResourceSlices on the API server, and reading claims, through the light
transport of ``nfd.kube`` (plain JSON in and out).

:meth:`SlicePublisher.sync` makes the stored slices equal the wanted pool: nothing is
written when they already are; otherwise the pool's generation goes up and every slice
is written under its fixed name, and slices this driver left for the node before (a
smaller pool, an older naming) are deleted. A restart therefore replaces, never
duplicates.

Device taints need the API server's DRADeviceTaints feature; without it the server drops
``taints`` from what it stores, silently. So the first write of a tainted device is read
back (the write's answer is the stored object): when its taints are gone, the server
does not serve them, and from then on a tainted device is withdrawn instead, as it was
before taints (until a restart asks again).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from nfd.dra.prepare import ClaimError
from nfd.dra.resourceapi import RESOURCE_API, api_failure, claim_path
from nfd.dra.slices import pool_slices
from nfd.kube.errors import ApiError, NotFound
from nfd.kube.transport import Transport, path

log = logging.getLogger("nfd.dra")

# Each call to the API server: one that does not answer fails, and is tried again at the
# next sync (slices) or by kubelet (a claim read in NodePrepareResources), instead of
# holding a thread for good.
REQUEST_TIMEOUT_S = 10.0


class PublishError(Exception):
    """A write the API server refused or could not take; retried by the caller."""


class SlicePublisher:
    def __init__(self, api: Transport, *, driver: str, node: str, timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.api = api
        self.driver = driver
        self.node = node
        self.timeout = timeout
        self.writes = 0  # creates, replaces and deletes made (benchmarks, tests)
        # Whether the API server keeps device taints: None until a tainted device was written.
        self.taints_served: bool | None = None
        self._synced: list[dict[str, Any]] | None = None
        self._counter_sets: list[dict[str, Any]] = []  # the pool's, as last asked
        # Our slices as last written (name -> resourceVersion) and their generation.
        self._written: dict[str, str] | None = None
        self._generation = 0

    def _existing(self) -> list[dict[str, Any]]:
        selector = f"spec.nodeName={self.node},spec.driver={self.driver}"
        got = self.api.request(
            "GET", path(*RESOURCE_API, "resourceslices", fieldSelector=selector), timeout=self.timeout
        )
        items: list[dict[str, Any]] = got.get("items") or []
        return items

    def sync(
        self,
        devices: Sequence[dict[str, Any]],
        *,
        force: bool = False,
        counter_sets: Sequence[dict[str, Any]] = (),
    ) -> int:
        """Make the pool hold ``devices`` (and the ``counter_sets`` they consume from); the
        number of writes it took. ``force``: look at the API server even when nothing
        changed here since the last sync (repairs slices someone else deleted or edited)."""
        wanted = self._servable(devices)
        if list(counter_sets) != self._counter_sets:
            self._counter_sets, self._synced = list(counter_sets), None
        if not force and self._synced == wanted:
            return 0
        writes = self._write(wanted, force=force)
        if self.taints_served is False and self._servable(wanted) != wanted:
            # This very write found that taints are dropped: withdraw the tainted ones now.
            wanted = self._servable(wanted)
            writes += self._write(wanted, force=False)
        return writes

    def _servable(self, devices: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.taints_served is False:
            return [d for d in devices if not d.get("taints")]
        return list(devices)

    def _learn_taints(self, sent: dict[str, Any], stored: dict[str, Any]) -> None:
        if self.taints_served is not None:
            return
        tainted = {d["name"] for d in sent["spec"].get("devices") or [] if d.get("taints")}
        if not tainted:
            return
        kept = {d.get("name") for d in (stored.get("spec") or {}).get("devices") or [] if d.get("taints")}
        self.taints_served = tainted <= kept
        if not self.taints_served:
            log.warning(
                "the API server dropped the device taints we wrote (DRADeviceTaints off?):"
                " unhealthy devices are withdrawn from the slices instead"
            )

    def _write(self, wanted: list[dict[str, Any]], *, force: bool) -> int:
        try:
            if not force and self._written is not None:
                # What we wrote last is what is stored (a write by someone else makes ours
                # fail with a conflict, and the next try reads the server): no list.
                existing, generation = dict(self._written), self._generation
            else:
                listed = self._existing()
                existing = {x["metadata"]["name"]: x["metadata"]["resourceVersion"] for x in listed}
                generation = max((int(x["spec"]["pool"].get("generation", 0)) for x in listed), default=0)
                same = pool_slices(
                    wanted,
                    driver=self.driver,
                    node=self.node,
                    generation=generation,
                    counter_sets=self._counter_sets,
                )
                if listed and self._equal(same, {x["metadata"]["name"]: x for x in listed}):
                    self._synced, self._written, self._generation = wanted, existing, generation
                    return 0
            self._written = None  # unknown until every write below went through
            slices = pool_slices(
                wanted,
                driver=self.driver,
                node=self.node,
                generation=generation + 1,
                counter_sets=self._counter_sets,
            )
            written: dict[str, str] = {}
            writes = 0
            for s in slices:
                name = s["metadata"]["name"]
                rv = existing.pop(name, None)
                if rv is None:
                    stored = self.api.request(
                        "POST", path(*RESOURCE_API, "resourceslices"), body=s, timeout=self.timeout
                    )
                else:
                    s["metadata"]["resourceVersion"] = rv
                    stored = self.api.request(
                        "PUT", path(*RESOURCE_API, "resourceslices", name), body=s, timeout=self.timeout
                    )
                written[name] = stored["metadata"]["resourceVersion"]
                self._learn_taints(s, stored)
                writes += 1
            for name in existing:  # left over from a larger pool or an older run
                try:
                    self.api.request(
                        "DELETE", path(*RESOURCE_API, "resourceslices", name), timeout=self.timeout
                    )
                except NotFound:
                    pass
                writes += 1
        except ApiError as e:
            raise PublishError(f"ResourceSlices for node {self.node}: {api_failure(e)}") from None
        self._written, self._generation = written, generation + 1
        self.writes += writes
        self._synced = wanted
        log.info(
            "published %d device(s) for node %s in %d slice(s), generation %d",
            len(wanted),
            self.node,
            len(slices),
            generation + 1,
        )
        return writes

    @staticmethod
    def _equal(wanted: list[dict[str, Any]], existing: dict[str, dict[str, Any]]) -> bool:
        if len(wanted) != len(existing):
            return False
        for s in wanted:
            have = existing.get(s["metadata"]["name"])
            if have is None:
                return False
            spec, got = s["spec"], have.get("spec") or {}
            if (
                got.get("pool") != spec["pool"]
                or (got.get("devices") or []) != (spec.get("devices") or [])
                or (got.get("sharedCounters") or []) != (spec.get("sharedCounters") or [])
            ):
                return False
        return True


class ClaimReaderApi:
    """Reads a ResourceClaim (the DRA plugin's ClaimReader)."""

    def __init__(self, api: Transport, *, timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.timeout = timeout
        self.api = api

    def __call__(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return self.api.request("GET", claim_path(namespace, name), timeout=self.timeout)
        except ApiError as e:
            raise ClaimError(f"claim {namespace}/{name}: {api_failure(e)}") from None
