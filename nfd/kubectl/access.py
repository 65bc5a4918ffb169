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

Whatever fails is said with ``nfd.kube``'s errors, the master's answers too (its status,
its detail), each message naming what could not be read, so that a command catches one
family and prints ``str(e)`` (the status, then the message): one line.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from nfd.kube.errors import ApiError, Unauthorized, Unreachable, make
from nfd.kube.transport import Transport

DEFAULT_NAMESPACE = "node-feature-discovery"
SERVICE = "https:nfd-master:8080"
CA_CONFIGMAP = "nfd-master-ca"
LEASE = "nfd-master.nfd.kubernetes.io"
TIMEOUT_S = 30.0


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
        except Unreachable as e:
            raise Unreachable(None, f"cannot reach the API server: {e.message}") from None

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
        except ApiError:
            return ""
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    # -- the master -------------------------------------------------------------------
    def _master_token(self) -> str:
        if self.token:
            return self.token
        # What the transport itself sends (a token file read again, a plugin's current one).
        return self.api.creds.bearer() or ""

    def master(self, path: str, query: dict[str, str] | None = None) -> Any:
        """GET ``path`` from the master's read API; the JSON answer. The ApiError says
        what to do when there is no token, or which way the master refused or could not be
        reached (Unauthorized without a token; NotFound for the master's 404, or the
        proxy's when the Service is missing)."""
        token = self._master_token()
        if not token:
            raise Unauthorized(
                401,
                "the master's reads need a bearer token and the kubeconfig has none "
                "(pass --token, e.g. $(kubectl create token SA -n NS) for an account that may list nodes)",
            )
        if self.master_url is None:
            proxy = f"/api/v1/namespaces/{quote(self.namespace)}/services/{SERVICE}/proxy{path}"
            try:
                return self.get(proxy, query, {"X-Nfd-Authorization": f"Bearer {token}"})
            except ApiError as e:
                raise make(
                    e.status,
                    f"from the master, through the service proxy: {e.message}",
                    e.retry_after,
                    e.details,
                ) from None
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
            said = _said(e.read())
            raise make(e.code, f"from the master: {said}" if said else "from the master") from None
        except (OSError, ValueError) as e:
            raise Unreachable(None, f"cannot reach the master at {self.master_url}: {e}") from None

    def _cluster_ca(self) -> ssl.SSLContext:
        try:
            cm = self.get(f"/api/v1/namespaces/{quote(self.namespace)}/configmaps/{CA_CONFIGMAP}")
        except ApiError as e:  # the ConfigMap's 404 is not the master's (no node of that name)
            raise Unreachable(None, f"cannot verify the master without its CA: {e}") from None
        pem = (cm.get("data") or {}).get("ca.crt") or ""
        if not pem:  # no way to trust the master's certificate: as good as no answer
            raise Unreachable(None, f"ConfigMap {self.namespace}/{CA_CONFIGMAP} has no ca.crt")
        ctx = ssl.create_default_context(cadata=pem)
        return ctx


def _said(data: bytes) -> str:
    """One line from the master's error answer: a Status' message, the master's detail,
    else the body's first line ("" when it says nothing)."""
    try:
        body = json.loads(data)
    except ValueError:
        text = data.decode("utf-8", "replace").strip().splitlines()
        return text[0][:200] if text else ""
    if isinstance(body, dict):
        msg = body.get("message") or body.get("detail")
        lines = msg.strip().splitlines() if isinstance(msg, str) else []
        if lines:
            return lines[0][:200]
    return ""
