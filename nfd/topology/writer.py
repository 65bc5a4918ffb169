"""Writes the node's NodeResourceTopology object: create it, then replace it only when
its content changed.

The last object the API server returned is kept, so an unchanged pass costs no request
and a changed one costs one PUT carrying that resourceVersion. A conflict (someone else
wrote in between) costs one GET and the PUT again. Nothing else is read.
"""

from __future__ import annotations

import logging
from typing import Any

from nfd.kube.errors import ApiError, Conflict, NotFound
from nfd.kube.transport import Transport, path
from nfd.topology import nrt

log = logging.getLogger("nfd.topology")

_BASE = ("apis", nrt.GROUP, nrt.VERSION, nrt.PLURAL)


class WriteError(Exception):
    pass


class NrtWriter:
    def __init__(self, api: Transport) -> None:
        self.api = api
        self._stored: dict[str, Any] | None = None
        self._known = False  # whether _stored reflects the server
        self.writes = 0

    def node_uid(self, name: str) -> str | None:
        """The Node's uid (for the owner reference); None when it cannot be read."""
        try:
            node = self.api.request("GET", path("api", "v1", "nodes", name))
        except ApiError as e:
            log.warning("cannot read Node %s for the owner reference: %s", name, e.message)
            return None
        uid = (node.get("metadata") or {}).get("uid")
        return str(uid) if uid else None

    def _get(self, name: str) -> dict[str, Any] | None:
        try:
            return self.api.request("GET", path(*_BASE, name))
        except NotFound:
            return None
        except ApiError as e:
            raise WriteError(f"reading NodeResourceTopology {name}: {e.message}") from None

    def write(self, obj: dict[str, Any]) -> bool:
        """Makes the stored object carry ``obj``'s content; True when it wrote."""
        name = obj["metadata"]["name"]
        if not self._known:
            self._stored, self._known = self._get(name), True
        for _ in range(3):
            if self._stored is not None and nrt.content(self._stored) == nrt.content(obj):
                return False
            try:
                if self._stored is None:
                    self._stored = self.api.request("POST", path(*_BASE), body=obj)
                else:
                    meta = {**(self._stored.get("metadata") or {}), **obj["metadata"]}
                    # Keeps resourceVersion (optimistic concurrency) and what others set.
                    self._stored = self.api.request("PUT", path(*_BASE, name), body={**obj, "metadata": meta})
                self.writes += 1
                return True
            except (NotFound, Conflict):  # someone else created, changed or deleted it
                self._stored = self._get(name)
                continue
            except ApiError as e:
                self._known = False  # it may or may not have landed: read again next time
                raise WriteError(f"writing NodeResourceTopology {name}: {e.message}") from None
        raise WriteError(f"writing NodeResourceTopology {name}: kept conflicting")
