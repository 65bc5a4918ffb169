"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection
does it: the holder renews every retry period and steps down when it could not renew
within the renew deadline; others take over once the lease has not changed for a whole
lease duration (measured on their own clock, so clock skew does not matter).

The holder also writes the address it serves workers on into an annotation of the
Lease, so that followers can hand the requests they receive to it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from nfd.kube.errors import ApiError, Conflict, NotFound
from nfd.master.core.kube import KubeApi
from nfd.master.core.settings import LeaderSettings

log = logging.getLogger(__name__)

# Where the holder serves (``https://10.1.2.3:8080``); followers forward to it.
URL_ANNOTATION = "nfd.node.kubernetes.io/master-url"
# How long a stopping leader tries to release the Lease: an API server that does not
# answer must not hold up the shutdown (the Lease then expires, as a crashed leader's).
RELEASE_TIMEOUT_S = 2.0


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        *,
        api: KubeApi,
        settings: LeaderSettings,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
    ) -> None:
        self.api = api
        self.s = settings
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.leader = False
        self.holder = ""
        self.holder_url = ""  # the holder's URL_ANNOTATION, as last read
        self.advertise_url = ""  # ours, written while we hold the lease
        self.last_error = ""  # why the last attempt to read or renew failed; "" when it did not
        self.tried = False  # the Lease was tried at least once (the holder is known, or unknowable)
        self._last_renew = 0.0  # monotonic time of our last successful renew
        self._seen: tuple[str, str] | None = None  # (holder, renewTime) last observed
        self._seen_at = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="leader-election")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.leader:
            self._set(False, why="")
            try:
                await asyncio.wait_for(self._release(), RELEASE_TIMEOUT_S)
            except TimeoutError:
                log.info(
                    "leader election: could not release the lease within %gs; it expires instead",
                    RELEASE_TIMEOUT_S,
                )

    def status(self) -> str:
        """This instance's part, as /readyz says it; never claims a lease it cannot renew."""
        since = time.monotonic() - self._last_renew
        if self.leader and self.last_error:
            return (
                f"leader, but the lease could not be renewed for {since:.0f}s ({self.last_error}); "
                f"steps down after {self.s.renew_deadline_s:.0f}s"
            )
        if self.leader:
            return "leader"
        if self.last_error:
            return f"follower; the leader is unknown (cannot read the lease: {self.last_error})"
        return f"follower; the leader is {self.holder or 'unknown'}"

    def _set(self, leader: bool, *, why: str) -> None:
        if leader == self.leader:
            return
        self.leader = leader
        if leader:
            log.info("leader election: %s is now the leader", self.s.identity)
            self.on_started()
        else:
            if why:
                log.warning("leader election: %s lost the lease: %s", self.s.identity, why)
            else:
                log.info("leader election: %s steps down and releases the lease", self.s.identity)
            self.on_stopped()

    async def _run(self) -> None:
        while True:
            try:
                ok = await self._try_acquire_or_renew()
                self.last_error = ""
            except ApiError as e:
                log.info("leader election: %s", e)
                self.last_error = str(e)
                ok = False
            if ok:
                self._last_renew = time.monotonic()
                self._set(True, why="")
            elif self.leader and time.monotonic() - self._last_renew > self.s.renew_deadline_s:
                self._set(False, why=f"not renewed within {self.s.renew_deadline_s:.0f}s")
            self.tried = True
            await asyncio.sleep(self.s.retry_period_s)

    def _spec(self, *, transitions: int, acquire: str | None) -> dict[str, Any]:
        t = _micro_time()
        return {
            "holderIdentity": self.s.identity,
            "leaseDurationSeconds": int(self.s.lease_duration_s),
            "acquireTime": acquire or t,
            "renewTime": t,
            "leaseTransitions": transitions,
        }

    async def _try_acquire_or_renew(self) -> bool:
        ns, name = self.s.namespace, self.s.lease_name
        try:
            lease = await self.api.get_lease(ns, name)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": ns, "annotations": self._annotations({})},
                "spec": self._spec(transitions=0, acquire=None),
            }
            try:
                await self.api.create_lease(ns, body)
            except Conflict:  # someone else created it first
                return False
            self.holder, self.holder_url = self.s.identity, self.advertise_url
            return True
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        renew = str(spec.get("renewTime") or "")
        meta = lease.setdefault("metadata", {})
        self.holder = holder
        self.holder_url = str((meta.get("annotations") or {}).get(URL_ANNOTATION) or "") if holder else ""
        if (holder, renew) != self._seen:
            self._seen, self._seen_at = (holder, renew), time.monotonic()
        duration = float(spec.get("leaseDurationSeconds") or self.s.lease_duration_s)
        mine = holder == self.s.identity
        expired = not holder or time.monotonic() - self._seen_at > duration
        if not mine and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        lease["spec"] = self._spec(
            transitions=transitions, acquire=str(spec.get("acquireTime") or "") if mine else None
        )
        meta["annotations"] = self._annotations(meta.get("annotations") or {})
        try:  # resourceVersion in the body: a concurrent writer makes this a 409
            await self.api.replace_lease(ns, name, lease)
        except Conflict:
            return False
        self.holder, self.holder_url = self.s.identity, self.advertise_url
        return True

    def _annotations(self, current: dict[str, str]) -> dict[str, str]:
        out = {k: v for k, v in current.items() if k != URL_ANNOTATION}
        if self.advertise_url:
            out[URL_ANNOTATION] = self.advertise_url
        return out

    async def _release(self) -> None:
        """Step down at shutdown so a standby takes over at once, not after 15 s."""
        ns, name = self.s.namespace, self.s.lease_name
        try:
            lease = await self.api.get_lease(ns, name)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.s.identity:
                return
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            lease.setdefault("metadata", {})["annotations"] = {
                k: v for k, v in (lease["metadata"].get("annotations") or {}).items() if k != URL_ANNOTATION
            }
            spec["renewTime"] = _micro_time()
            await self.api.replace_lease(ns, name, lease)
        except ApiError as e:
            log.info("leader election: could not release the lease: %s", e)
