"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection
does it: the holder renews every retry period and steps down when it could not renew
within the renew deadline; others take over once the lease has not changed for a whole
lease duration (measured on their own clock, so clock skew does not matter)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from nfd.master.kube import KubeApi, KubeError
from nfd.master.settings import LeaderSettings

log = logging.getLogger(__name__)


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
            self._set(False)
            await self._release()

    def _set(self, leader: bool) -> None:
        if leader == self.leader:
            return
        self.leader = leader
        if leader:
            log.info("leader election: %s is now the leader", self.s.identity)
            self.on_started()
        else:
            log.warning("leader election: %s lost the lease", self.s.identity)
            self.on_stopped()

    async def _run(self) -> None:
        while True:
            try:
                ok = await self._try_acquire_or_renew()
            except KubeError as e:
                log.info("leader election: %s", e)
                ok = False
            if ok:
                self._last_renew = time.monotonic()
                self._set(True)
            elif self.leader and time.monotonic() - self._last_renew > self.s.renew_deadline_s:
                self._set(False)
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
        except KubeError as e:
            if e.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": ns},
                "spec": self._spec(transitions=0, acquire=None),
            }
            try:
                await self.api.create_lease(ns, body)
            except KubeError as e2:
                if e2.status == 409:  # someone else created it first
                    return False
                raise
            self.holder = self.s.identity
            return True
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        renew = str(spec.get("renewTime") or "")
        self.holder = holder
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
        try:  # resourceVersion in the body: a concurrent writer makes this a 409
            await self.api.replace_lease(ns, name, lease)
        except KubeError as e:
            if e.status == 409:
                return False
            raise
        self.holder = self.s.identity
        return True

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
            spec["renewTime"] = _micro_time()
            await self.api.replace_lease(ns, name, lease)
        except KubeError as e:
            log.info("leader election: could not release the lease: %s", e)
