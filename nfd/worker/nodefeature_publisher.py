"""The worker's NodeFeature publisher: instead of, or beside, posting to the master, the
worker writes its features as the NodeFeature object upstream's nfd-worker writes (see
``nfd.nodefeature.for_worker``), so upstream's nfd-master can consume nfd's worker.

It answers the master client's two calls (``put_features``, ``heartbeat``) so the pass
loop does not know which it talks to. It talks through ``nfd.kube``'s light transport:
a worker never loads ``kubernetes``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from nfd.features import Features
from nfd.kube.errors import ApiError, NotFound, Unreachable
from nfd.kube.transport import Transport, path
from nfd.nodefeature import GROUP, PLURAL, VERSION, for_worker
from nfd.worker.client import MasterUnreachable, Reply

log = logging.getLogger(__name__)


class NodeFeaturePublisher:
    takes_refs = False  # the object holds every group whole

    def __init__(
        self,
        api: Transport,
        *,
        namespace: str,
        labels_of: Callable[[Features], Mapping[str, str]],
        pod_name: str = "",
        pod_uid: str = "",
    ) -> None:
        # The transport's timeout is the master client's: an API server that does not
        # answer costs the pass a timeout (the worker backs off and tries again), never a
        # pass that does not end.
        self.api = api
        self.namespace = namespace
        self.labels_of = labels_of
        self.pod_name, self.pod_uid = pod_name, pod_uid
        self.base_url = f"NodeFeature API ({namespace})"
        self._written: str = ""  # the spec last written, as canonical JSON

    def _path(self, *name: str) -> str:
        return path("apis", GROUP, VERSION, "namespaces", self.namespace, PLURAL, *name)

    def _get(self, node: str) -> dict[str, Any] | None:
        try:
            return self.api.request("GET", self._path(node))
        except NotFound:
            return None

    def put_features(self, node: str, body: dict[str, Any]) -> Reply:
        features = Features.from_dict(body.get("features") or {})
        obj = for_worker(
            node=node,
            namespace=self.namespace,
            features=features,
            labels=self.labels_of(features),
            pod_name=self.pod_name,
            pod_uid=self.pod_uid,
        )
        spec = json.dumps(obj["spec"], sort_keys=True)
        try:
            current = self._get(node)
            if current is None:
                self.api.request("POST", self._path(), body=obj)
            else:
                # A replace, not a merge patch: a merge would keep features that are gone.
                obj["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
                self.api.request("PUT", self._path(node), body=obj)
        except Unreachable as e:  # connection refused, TLS, timeouts
            raise MasterUnreachable(str(e)) from None
        except ApiError as e:
            # 409: changed under us; the next pass writes again. Others: as the master's.
            return Reply(e.status or 500, {"detail": f"NodeFeature {self.namespace}/{node}: {e.message}"})
        self._written = spec
        return Reply(200, {"labels": obj["spec"]["labels"]})

    def heartbeat(self, node: str, digest: str) -> Reply:
        """Known while the object still holds what this worker wrote (someone may have
        deleted or edited it)."""
        try:
            current = self._get(node)
        except Unreachable as e:
            raise MasterUnreachable(str(e)) from None
        except ApiError as e:
            return Reply(e.status or 500, {"detail": e.message})
        spec = json.dumps((current or {}).get("spec"), sort_keys=True)
        return Reply(200, {"known": current is not None and spec == self._written})

    def close(self) -> None:
        self.api.close()


class Both:
    """Posts to the master and writes the NodeFeature object; the master's answer
    counts, a failed object write is logged and retried at the next pass."""

    takes_refs = False  # the object holds every group whole

    def __init__(self, master: Any, nodefeature: NodeFeaturePublisher) -> None:
        self.master = master
        self.nodefeature = nodefeature
        self.base_url = master.base_url

    def put_features(self, node: str, body: dict[str, Any]) -> Reply:
        reply: Reply = self.master.put_features(node, body)
        try:
            extra = self.nodefeature.put_features(node, body)
            if not extra.ok:
                log.warning("NodeFeature not written: %s", extra.reason())
        except MasterUnreachable as e:
            log.warning("NodeFeature not written: %s", e)
        return reply

    def heartbeat(self, node: str, digest: str) -> Reply:
        reply: Reply = self.master.heartbeat(node, digest)
        if reply.ok and isinstance(reply.body, dict) and reply.body.get("known") is True:
            try:
                mine = self.nodefeature.heartbeat(node, digest)
            except MasterUnreachable:
                return reply
            if not (isinstance(mine.body, dict) and mine.body.get("known")):
                return Reply(200, {"known": False})
        return reply

    def close(self) -> None:
        self.master.close()
        self.nodefeature.close()
