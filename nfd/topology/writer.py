"""Writes the node's NodeResourceTopology object: create it, then replace it only when
its content changed.

The last object the API server returned is kept, so an unchanged pass costs no request
and a changed one costs one PUT carrying that resourceVersion. A conflict (someone else
wrote in between) costs one GET and the PUT again. Nothing else is read.
"""

from __future__ import annotations

import logging
from typing import Any

from nfd.topology import nrt

log = logging.getLogger("nfd.topology")


class WriteError(Exception):
    pass


def load_api_client(kubeconfig: str | None) -> Any:
    """An ApiClient from ``kubeconfig``, else the in-cluster service account, else
    ``$KUBECONFIG`` / ``~/.kube/config``."""
    from kubernetes import client, config

    conf = client.Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=conf)  # type: ignore[no-untyped-call]
    else:
        try:
            config.load_incluster_config(client_configuration=conf)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config(client_configuration=conf)  # type: ignore[no-untyped-call]
    return client.ApiClient(conf)


def _status(e: BaseException) -> int | None:
    status = getattr(e, "status", None)
    return status if isinstance(status, int) else None


def _message(e: BaseException) -> str:
    import json

    body = getattr(e, "body", None)
    try:
        return str(json.loads(body)["message"]) if body else str(e)
    except (ValueError, KeyError, TypeError):
        return str(e)


class NrtWriter:
    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        # Any: the calls below pass _preload_content=False or answer plain dicts.
        self.core: Any = client.CoreV1Api(api_client)
        self.custom: Any = client.CustomObjectsApi(api_client)
        self._stored: dict[str, Any] | None = None
        self.writes = 0

    def node_uid(self, name: str) -> str | None:
        """The Node's uid (for the owner reference); None when it cannot be read."""
        from kubernetes.client.exceptions import ApiException

        try:
            node = self.core.read_node(name, _preload_content=False)
        except ApiException as e:
            log.warning("cannot read Node %s for the owner reference: %s", name, _message(e))
            return None
        import json

        try:
            return str(json.loads(node.data)["metadata"]["uid"])
        finally:
            node.release_conn()

    def _get(self, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            got: dict[str, Any] = self.custom.get_cluster_custom_object(
                nrt.GROUP, nrt.VERSION, nrt.PLURAL, name
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise WriteError(f"reading NodeResourceTopology {name}: {_message(e)}") from None
        return got

    def write(self, obj: dict[str, Any]) -> bool:
        """Makes the stored object carry ``obj``'s content; True when it wrote."""
        from kubernetes.client.exceptions import ApiException

        name = obj["metadata"]["name"]
        if self._stored is None:
            self._stored = self._get(name)
        for _ in range(3):
            if self._stored is not None and nrt.content(self._stored) == nrt.content(obj):
                return False
            try:
                if self._stored is None:
                    self._stored = self.custom.create_cluster_custom_object(
                        nrt.GROUP, nrt.VERSION, nrt.PLURAL, obj
                    )
                else:
                    body = dict(obj)
                    meta = dict(self._stored.get("metadata") or {})
                    meta.update(obj["metadata"])
                    body["metadata"] = meta  # keeps resourceVersion, labels others set
                    self._stored = self.custom.replace_cluster_custom_object(
                        nrt.GROUP, nrt.VERSION, nrt.PLURAL, name, body
                    )
                self.writes += 1
                return True
            except ApiException as e:
                if _status(e) == 409 or _status(e) == 404:
                    self._stored = self._get(name)  # someone else created, changed or deleted it
                    continue
                self._stored = None  # read again next time: the write may or may not have landed
                raise WriteError(f"writing NodeResourceTopology {name}: {_message(e)}") from None
        raise WriteError(f"writing NodeResourceTopology {name}: kept conflicting")
