"""The worker's NodeFeature publisher: instead of, or beside, posting to the master, the
worker writes its features as the NodeFeature object upstream's nfd-worker writes (see
``nfd.nodefeature.for_worker``), so upstream's nfd-master can consume nfd's worker.

It answers the master client's two calls (``put_features``, ``heartbeat``) so the pass
loop does not know which it talks to. Imported only when the mode is on: the default
worker never loads ``kubernetes``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from nfd.features import Features
from nfd.nodefeature import GROUP, PLURAL, VERSION, for_worker
from nfd.worker.client import DEFAULT_TIMEOUT, MasterUnreachable, Reply

log = logging.getLogger(__name__)


class NodeFeaturePublisher:
    def __init__(
        self,
        *,
        namespace: str,
        labels_of: Callable[[Features], Mapping[str, str]],
        pod_name: str = "",
        pod_uid: str = "",
        kubeconfig: str | None = None,
        api_client: Any = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        from kubernetes import client, config

        if api_client is None:
            try:
                config.load_incluster_config()  # type: ignore[no-untyped-call]
                api_client = client.ApiClient()
            except config.ConfigException:
                api_client = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        self.api_client = api_client
        self.custom = client.CustomObjectsApi(api_client)
        self.namespace = namespace
        self.labels_of = labels_of
        self.pod_name, self.pod_uid = pod_name, pod_uid
        self.base_url = f"NodeFeature API ({namespace})"
        # As the master client's: an API server that does not answer costs the pass a
        # timeout (the worker backs off and tries again), never a pass that does not end.
        self.timeout = timeout
        self._written: str = ""  # the spec last written, as canonical JSON

    def _get(self, node: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            got = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, node, _request_timeout=self.timeout
            )
            return got if isinstance(got, dict) else None
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def put_features(self, node: str, body: dict[str, Any]) -> Reply:
        from kubernetes.client.exceptions import ApiException

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
                self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, PLURAL, obj, _request_timeout=self.timeout
                )
            else:
                # A replace, not a merge patch: a merge would keep features that are gone.
                obj["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
                self.custom.replace_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, PLURAL, node, obj, _request_timeout=self.timeout
                )
        except ApiException as e:
            # 409: changed under us; the next pass writes again. Others: as the master's.
            return Reply(e.status or 500, {"detail": f"NodeFeature {self.namespace}/{node}: {e.reason}"})
        except Exception as e:  # connection refused, TLS, timeouts
            raise MasterUnreachable(f"{type(e).__name__}: {e}") from None
        self._written = spec
        return Reply(200, {"labels": obj["spec"]["labels"]})

    def heartbeat(self, node: str, digest: str) -> Reply:
        """Known while the object still holds what this worker wrote (someone may have
        deleted or edited it)."""
        from kubernetes.client.exceptions import ApiException

        try:
            current = self._get(node)
        except ApiException as e:
            return Reply(e.status or 500, {"detail": str(e.reason)})
        except Exception as e:
            raise MasterUnreachable(f"{type(e).__name__}: {e}") from None
        spec = json.dumps((current or {}).get("spec"), sort_keys=True)
        return Reply(200, {"known": current is not None and spec == self._written})

    def close(self) -> None:
        self.api_client.close()


class Both:
    """Posts to the master and writes the NodeFeature object; the master's answer
    counts, a failed object write is logged and retried at the next pass."""

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
