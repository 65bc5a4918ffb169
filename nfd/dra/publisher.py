"""This node's ResourceSlices on the API server, and reading claims, with the real
``kubernetes`` client (plain JSON in and out: no model objects).

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

import json
import logging
from collections.abc import Sequence
from typing import Any

from urllib3.exceptions import HTTPError

from nfd.dra.prepare import ClaimError
from nfd.dra.slices import pool_slices

log = logging.getLogger("nfd.dra")


def unreachable_reason(e: BaseException) -> str:
    """urllib3 wraps the cause (connection refused, timeout) in a long retry message."""
    cause = getattr(e, "reason", None) or e
    return str(cause).splitlines()[0]


# Each call to the API server: one that does not answer fails, and is tried again at the
# next sync (slices) or by kubelet (a claim read in NodePrepareResources), instead of
# holding a thread for good.
REQUEST_TIMEOUT_S = 10.0


class PublishError(Exception):
    """A write the API server refused or could not take; retried by the caller."""


def api_message(e: Any) -> str:
    try:
        return str(json.loads(e.body).get("message") or e.reason)
    except (TypeError, ValueError, AttributeError):
        return str(getattr(e, "reason", None) or e)


class SlicePublisher:
    def __init__(
        self, api_client: Any, *, driver: str, node: str, timeout: float = REQUEST_TIMEOUT_S
    ) -> None:
        from kubernetes import client

        self.api: Any = client.ResourceV1Api(api_client)  # plain JSON in and out, not its models
        self.driver = driver
        self.node = node
        self.timeout = timeout
        self.writes = 0  # creates, replaces and deletes made (benchmarks, tests)
        # Whether the API server keeps device taints: None until a tainted device was written.
        self.taints_served: bool | None = None
        self._synced: list[dict[str, Any]] | None = None
        # Our slices as last written (name -> resourceVersion) and their generation.
        self._written: dict[str, str] | None = None
        self._generation = 0

    def _existing(self) -> list[dict[str, Any]]:
        resp = self.api.list_resource_slice(
            field_selector=f"spec.nodeName={self.node},spec.driver={self.driver}",
            _preload_content=False,
            _request_timeout=self.timeout,
        )
        items: list[dict[str, Any]] = json.loads(resp.data).get("items") or []
        return items

    def sync(self, devices: Sequence[dict[str, Any]], *, force: bool = False) -> int:
        """Make the pool hold ``devices``; the number of writes it took. ``force``: look
        at the API server even when nothing changed here since the last sync (repairs
        slices someone else deleted or edited)."""
        wanted = self._servable(devices)
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
        tainted = {d["name"] for d in sent["spec"]["devices"] if d.get("taints")}
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
        from kubernetes.client.exceptions import ApiException

        try:
            if not force and self._written is not None:
                # What we wrote last is what is stored (a write by someone else makes ours
                # fail with a conflict, and the next try reads the server): no list.
                existing, generation = dict(self._written), self._generation
            else:
                listed = self._existing()
                existing = {x["metadata"]["name"]: x["metadata"]["resourceVersion"] for x in listed}
                generation = max((int(x["spec"]["pool"].get("generation", 0)) for x in listed), default=0)
                same = pool_slices(wanted, driver=self.driver, node=self.node, generation=generation)
                if listed and self._equal(same, {x["metadata"]["name"]: x for x in listed}):
                    self._synced, self._written, self._generation = wanted, existing, generation
                    return 0
            self._written = None  # unknown until every write below went through
            slices = pool_slices(wanted, driver=self.driver, node=self.node, generation=generation + 1)
            written: dict[str, str] = {}
            writes = 0
            for s in slices:
                name = s["metadata"]["name"]
                rv = existing.pop(name, None)
                if rv is None:
                    resp = self.api.create_resource_slice(
                        s, _preload_content=False, _request_timeout=self.timeout
                    )
                else:
                    s["metadata"]["resourceVersion"] = rv
                    resp = self.api.replace_resource_slice(
                        name, s, _preload_content=False, _request_timeout=self.timeout
                    )
                stored = json.loads(resp.data)
                written[name] = stored["metadata"]["resourceVersion"]
                self._learn_taints(s, stored)
                writes += 1
            for name in existing:  # left over from a larger pool or an older run
                try:
                    self.api.delete_resource_slice(
                        name, _preload_content=False, _request_timeout=self.timeout
                    )
                except ApiException as e:
                    if e.status != 404:
                        raise
                writes += 1
        except ApiException as e:
            raise PublishError(
                f"ResourceSlices for node {self.node}: HTTP {e.status}: {api_message(e)}"
            ) from None
        except (OSError, HTTPError) as e:
            raise PublishError(
                f"ResourceSlices for node {self.node}: API server unreachable: {unreachable_reason(e)}"
            ) from None
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
            if got.get("pool") != spec["pool"] or (got.get("devices") or []) != spec["devices"]:
                return False
        return True


class ClaimReaderApi:
    """Reads a ResourceClaim (the DRA plugin's ClaimReader)."""

    def __init__(self, api_client: Any, *, timeout: float = REQUEST_TIMEOUT_S) -> None:
        from kubernetes import client

        self.timeout = timeout
        self.api: Any = client.ResourceV1Api(api_client)  # plain JSON in and out, not its models

    def __call__(self, namespace: str, name: str) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self.api.read_namespaced_resource_claim(
                name, namespace, _preload_content=False, _request_timeout=self.timeout
            )
        except ApiException as e:
            raise ClaimError(f"claim {namespace}/{name}: HTTP {e.status}: {api_message(e)}") from None
        except (OSError, HTTPError) as e:
            raise ClaimError(
                f"claim {namespace}/{name}: API server unreachable: {unreachable_reason(e)}"
            ) from None
        claim: dict[str, Any] = json.loads(resp.data)
        return claim
