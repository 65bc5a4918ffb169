"""Reaching the cluster and the master's read API as the caller.

The master's reads need a bearer token the API server can review. By default they go
through the API server's service proxy
(``/api/v1/namespaces/NS/services/https:nfd-master:8080/proxy/...``) with the caller's
kubeconfig credentials: the API server checks that the caller may proxy to the Service,
then drops the caller's Authorization header before passing the request on, so the
token travels again in ``X-Nfd-Authorization``, which the master reviews the same way.
``--master-url`` talks to the master directly instead (after ``kubectl port-forward``,
or from inside the cluster), verifying its certificate against ``--master-ca`` or the
``nfd-master-ca`` ConfigMap.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from nfd.kube.errors import ApiError
from nfd.kube.transport import Transport

DEFAULT_NAMESPACE = "node-feature-discovery"
SERVICE = "https:nfd-master:8080"
CA_CONFIGMAP = "nfd-master-ca"
LEASE = "nfd-master.nfd.kubernetes.io"
TIMEOUT_S = 30.0


class AccessError(Exception):
    """The master cannot be read, or the API server's answer (an ``nfd.kube`` ApiError)
    said in a line for a terminal; ``status`` is the HTTP status if any."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Cluster:
    """The caller's transport to the API server (``nfd.kube``, with the caller's
    credentials) and where nfd runs."""

    api: Transport
    namespace: str
    master_url: str | None = None
    master_ca: str | None = None
    token: str | None = None

    def close(self) -> None:
        self.api.close()

    # -- the API server ---------------------------------------------------------------
    def get(
        self, path: str, query: dict[str, str] | None = None, headers: dict[str, str] | None = None
    ) -> Any:
        """GET ``path`` from the API server as the caller; the JSON answer."""
        url = path + ("?" + urlencode(query) if query else "")
        try:
            return self.api.request("GET", url, timeout=TIMEOUT_S, headers=headers)
        except ApiError as e:
            if e.status is None:
                raise AccessError(f"cannot reach the API server: {e}") from None
            raise AccessError(f"HTTP {e.status}: {e.message}", e.status) from None

    def pages(self, path: str, query: dict[str, str] | None = None, limit: int = 500) -> Any:
        """Every item of a paginated list, a page at a time (the API server's paging)."""
        cont = ""
        while True:
            page = self.get(
                path, {**(query or {}), "limit": str(limit), **({"continue": cont} if cont else {})}
            )
            yield from page.get("items") or []
            cont = (page.get("metadata") or {}).get("continue") or ""
            if not cont:
                return

    def node_names(self, selector: str) -> set[str] | None:
        """The names of the Nodes ``selector`` selects; None (every node) when it is empty."""
        if not selector:
            return None
        return {str(n["metadata"]["name"]) for n in self.pages("/api/v1/nodes", {"labelSelector": selector})}

    def leader(self) -> str:
        """The master replica holding the lease ("" when none is known)."""
        try:
            lease = self.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{quote(self.namespace)}/leases/{LEASE}"
            )
        except AccessError:
            return ""
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    # -- the master -------------------------------------------------------------------
    def _master_token(self) -> str:
        if self.token:
            return self.token
        # What the transport itself sends (a token file read again, a plugin's current one).
        try:
            return self.api.creds.bearer() or ""
        except ApiError as e:
            raise AccessError(str(e)) from None

    def master(self, path: str, query: dict[str, str] | None = None) -> Any:
        """GET ``path`` from the master's read API; the JSON answer. AccessError names
        what to do when there is no token or the master refuses or cannot be reached."""
        token = self._master_token()
        if not token:
            raise AccessError(
                "the master's reads need a bearer token and the kubeconfig has none "
                "(pass --token, e.g. $(kubectl create token SA -n NS) for an account that may list nodes)",
                401,
            )
        if self.master_url is None:
            proxy = f"/api/v1/namespaces/{quote(self.namespace)}/services/{SERVICE}/proxy{path}"
            try:
                return self.get(proxy, query, {"X-Nfd-Authorization": f"Bearer {token}"})
            except AccessError as e:
                raise AccessError(f"the master (through the service proxy): {e}", e.status) from None
        return self._direct(path, query, token)

    def master_pages(self, path: str, limit: int = 500) -> Any:
        """Every page of a paginated list of the master's (``metadata.continue``)."""
        cont = ""
        while True:
            page = self.master(path, {"limit": str(limit), **({"continue": cont} if cont else {})})
            yield page
            cont = (page.get("metadata") or {}).get("continue") or ""
            if not cont:
                return

    def _direct(self, path: str, query: dict[str, str] | None, token: str) -> Any:
        url = self.master_url.rstrip("/") + path + ("?" + urlencode(query) if query else "")  # type: ignore[union-attr]
        req = urllib.request.Request(
            url, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"}
        )
        ctx = None
        if url.startswith("https:"):
            ctx = ssl.create_default_context(cafile=self.master_ca) if self.master_ca else self._cluster_ca()
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S, context=ctx) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise AccessError(f"the master: {_reason(e.read(), e.code)}", e.code) from None
        except (OSError, ValueError) as e:
            raise AccessError(f"cannot reach the master at {self.master_url}: {e}") from None

    def _cluster_ca(self) -> ssl.SSLContext:
        cm = self.get(f"/api/v1/namespaces/{quote(self.namespace)}/configmaps/{CA_CONFIGMAP}")
        pem = (cm.get("data") or {}).get("ca.crt") or ""
        if not pem:
            raise AccessError(f"ConfigMap {self.namespace}/{CA_CONFIGMAP} has no ca.crt")
        ctx = ssl.create_default_context(cadata=pem)
        return ctx


def _reason(data: bytes, status: int) -> str:
    """One line from an error answer: a Status' message, the master's detail, or the status."""
    try:
        body = json.loads(data)
    except ValueError:
        text = data.decode("utf-8", "replace").strip().splitlines()
        return f"HTTP {status}" + (f": {text[0][:200]}" if text else "")
    if isinstance(body, dict):
        msg = body.get("message") or body.get("detail")
        if isinstance(msg, str):
            return f"HTTP {status}: {msg}"
    return f"HTTP {status}"
