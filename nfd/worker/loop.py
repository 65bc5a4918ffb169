"""One worker pass: discover, then send the full features or only a heartbeat.

The steady state is cheap: the full features go out only when their digest (or the
device-plugin resource list) differs from what the master last accepted; otherwise a
heartbeat carries the digest alone, and a master that does not know it (restarted, new
leader) answers 409, upon which the full features go out in the same pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nfd import __version__
from nfd.backoff import Backoff
from nfd.canonical import Encoded, GroupCache
from nfd.config import SourcesConfig
from nfd.discovery import discover
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.sources import FeatureSource
from nfd.worker.client import MasterClient, MasterUnreachable, Reply

if TYPE_CHECKING:  # --oneshot runs without metrics: no prometheus_client import then
    from datetime import datetime

    from nfd.worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)

# While nothing takes the connection (the master restarting, not Ready yet), a try costs
# the master nothing, and the first one after it is back should come soon: the delay
# grows to this at most (to the backoff's cap when that is lower).
DOWN_CAP_S = 2.0

# Answers that mean "come back later": the master is busy, not the leader, or broken.
# 401 is here too: the kubelet may rotate a bad token file soon (see the wire contract).
_RETRY_STATUSES = frozenset({401, 408, 429})

# A group whose canonical JSON is this long or longer goes by its hash when the master
# holds it (``kernel.config``: some 45 kB, the same on every node of a kind); smaller
# ones cost less sent than a second request would when the master lacks them.
REF_MIN_BYTES = 4096


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    sent: str  # "features", "heartbeat", or "" when nothing got through
    reason: str  # why not delivered, or what was delivered; one line
    retry_in: float | None = None  # seconds until a retry; None: wait for the interval


class Worker:
    """Holds what lives as long as the process: the source instances (a CPU source keeps
    its CPUID reading), the master client and its connection, and what the master last
    accepted."""

    def __init__(
        self,
        *,
        node: str,
        sources: Sequence[FeatureSource],
        host: HostRoot,
        config: SourcesConfig,
        client: MasterClient,
        metrics: WorkerMetrics | None = None,
        backoff: Backoff | None = None,
        device_plugin_resources: Sequence[str] | Callable[[Features], Sequence[str]] = (),
        oneshot: bool = False,
        next_change: Callable[[Features], datetime | None] | None = None,
    ) -> None:
        self.node = node
        self.sources = list(sources)
        self.host = host
        self.config = config
        self.client = client
        self.metrics = metrics
        self.backoff = backoff or Backoff()
        # A fixed list, or a function of this pass's features (the device plugin serves a
        # resource only while a matching device is present).
        self._plugin_resources = device_plugin_resources
        self.device_plugin_resources: list[str] = (
            [] if callable(device_plugin_resources) else sorted(set(device_plugin_resources))
        )
        self.oneshot = oneshot  # no retries will follow: the caller reports the outcome
        # When the features of the last pass change by themselves (a features.d line's
        # expiry time): the scheduler runs a pass then, whatever the interval.
        self._next_change = next_change
        self.changes_at: datetime | None = None
        # (digest, resources) the master last answered 200 to a full PUT for.
        self._accepted: tuple[str, tuple[str, ...]] | None = None
        # The last pass's groups: an unchanged group (most are) is not serialised again.
        self._groups = GroupCache(per_name=1)
        # Big groups go by their hash (``_put``) until the master shows it takes no refs.
        self._send_refs = True
        self._lock = threading.Lock()  # passes never overlap, whoever calls them
        self.passes = 0
        self._unreachable_reason = ""  # the last "unreachable" logged at WARNING, until a success
        self.last_pass_end: float | None = None  # time.monotonic()
        self.pass_started: float | None = None

    # -- the pass -------------------------------------------------------------------
    def run_pass(self) -> Outcome:
        with self._lock:
            self.pass_started = time.monotonic()
            try:
                return self._pass()
            finally:
                self.passes += 1
                self.pass_started = None
                self.last_pass_end = time.monotonic()

    def discover(self) -> Features:
        t0 = time.perf_counter()
        result = discover(self.sources, self.host, self.config)
        if self._next_change is not None:
            try:
                self.changes_at = self._next_change(result.features)
            except Exception as e:  # a broken hook must not cost the pass
                log.warning("cannot tell when the features change next: %s: %s", type(e).__name__, e)
                self.changes_at = None
        if self.metrics is not None:
            self.metrics.discovery_took(time.perf_counter() - t0)
            for name in result.errors:
                self.metrics.source_failed(name)
        return result.features

    def _pass(self) -> Outcome:
        features = self.discover()
        enc = features.encoded(self._groups)
        digest = enc.digest
        self._refresh_plugin_resources(features)
        key = (digest, tuple(self.device_plugin_resources))
        try:
            if key == self._accepted:
                reply = self.client.heartbeat(self.node, digest)
                if reply.ok and isinstance(reply.body, dict) and reply.body.get("known") is True:
                    self._count("heartbeat", "ok")
                    return self._success("heartbeat", f"master knows digest {digest[:12]}")
                if reply.status in (200, 404, 409):
                    self._count("heartbeat", "unknown")
                    log.info(
                        "the master does not hold our features (%s); sending them in full", reply.reason()
                    )
                    self._accepted = None
                else:
                    return self._failure("heartbeat", reply)
            reply = self._put(features, enc)
        except MasterUnreachable as e:
            return self._unreachable(e)
        if not reply.ok:
            return self._failure("features", reply)
        self._accepted = key
        self._count("features", "ok")
        self._report_applied(reply)
        return self._success("features", f"features {digest[:12]} delivered")

    def _put(self, features: Features, enc: Encoded) -> Reply:
        """The features PUT, big groups named by their hash (``ref``) where the client
        takes that; sent whole when the master does not hold one of them (409) or takes
        no refs (422: an older master, which refuses a group's null elements)."""
        refs = {
            (kind, name): h for kind, name, h, gj in enc.parts if len(gj) >= REF_MIN_BYTES
        } if self._send_refs and getattr(self.client, "takes_refs", False) else {}  # fmt: skip
        if not refs:
            return self.client.put_features(self.node, self._body(features, enc.digest))
        first = self.client.put_features(self.node, self._body(features, enc.digest, refs))
        if first.status not in (409, 422):
            return first
        self._count("features", "unknown")
        log.debug("sending the features whole: %s", first.reason())
        reply = self.client.put_features(self.node, self._body(features, enc.digest))
        if first.status == 422 and reply.ok:
            self._send_refs = False
            log.info(
                "master %s takes no group refs (an older version?): sending the features whole from now on",
                self.client.base_url,
            )
        return reply

    def _refresh_plugin_resources(self, features: Features) -> None:
        if not callable(self._plugin_resources):
            return
        try:
            self.device_plugin_resources = sorted(set(self._plugin_resources(features)))
        except Exception as e:  # keep the last list rather than lose the pass
            log.warning("cannot tell which device-plugin resources are served: %s: %s", type(e).__name__, e)

    def _body(
        self, features: Features, digest: str, refs: Mapping[tuple[str, str], str] | None = None
    ) -> dict[str, Any]:
        raw = features.to_dict()
        for (kind, name), h in (refs or {}).items():
            raw[kind][name] = {"elements": None, "ref": h}
        return {
            "nfdVersion": __version__,
            "digest": digest,
            "features": raw,
            "devicePluginResources": self.device_plugin_resources,
        }

    # -- outcomes -------------------------------------------------------------------
    def _success(self, sent: str, what: str) -> Outcome:
        self._unreachable_reason = ""
        if self.backoff.failures:
            log.warning(
                "master %s answers again after %d failed attempt(s)",
                self.client.base_url,
                self.backoff.failures,
            )
        self.backoff.reset()
        return Outcome(True, sent, what)

    def _unreachable(self, e: MasterUnreachable) -> Outcome:
        self._count("any", "unreachable")
        delay = self.backoff.next_delay(cap=DOWN_CAP_S if e.down else None)
        reason = f"master {self.client.base_url} unreachable: {e}"
        if not self.oneshot:
            # Said when it starts or changes; a master away for long is retried every
            # few seconds, and its return is logged (_success).
            level = logging.WARNING if reason != self._unreachable_reason else logging.DEBUG
            log.log(level, "%s; retrying in %.1fs", reason, delay)
        self._unreachable_reason = reason
        return Outcome(False, "", reason, retry_in=delay)

    def _failure(self, kind: str, reply: Reply) -> Outcome:
        self._unreachable_reason = ""
        reason = f"master refused the {kind}: {reply.reason()}"
        if reply.status in _RETRY_STATUSES or reply.status >= 500:
            self._count(kind, "retry")
            delay = self.backoff.next_delay(reply.retry_after)
            if not self.oneshot:
                log.warning("%s; retrying in %.1fs", reason, delay)
            return Outcome(False, "", reason, retry_in=delay)
        # 403, 413, 422 ...: sending the same again would get the same answer. Wait for
        # the next interval or a change on the node.
        self._count(kind, "rejected")
        if not self.oneshot:
            log.error("%s; not retrying until the next interval or a change", reason)
        return Outcome(False, "", reason)

    def _count(self, kind: str, result: str) -> None:
        if self.metrics is not None:
            self.metrics.request(kind, result)

    def _report_applied(self, reply: Reply) -> None:
        body = reply.body
        if not isinstance(body, dict):
            return
        labels = body.get("labels") or {}
        count = len(labels) if isinstance(labels, dict) else 0
        log.info("features of node %s delivered: %s", self.node, reply.outcome_text(count))
        rejected = body.get("rejected")
        if isinstance(rejected, dict):
            for what, items in rejected.items():
                if isinstance(items, dict):
                    for name, why in items.items():
                        log.warning("master rejected %s %s: %s", what.rstrip("s"), name, why)
