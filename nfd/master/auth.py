"""Worker authentication: a projected ServiceAccount token, checked with a TokenReview
(answers cached briefly), must belong to the worker's service account and be bound to
the node whose features it sends."""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass

from nfd.master.kube import KubeApi, KubeError
from nfd.master.metrics import Metrics
from nfd.master.settings import AuthSettings

log = logging.getLogger(__name__)

NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"


class AuthError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Identity:
    username: str
    node: str


def _first(extra: dict[str, list[str]], key: str) -> str:
    v = extra.get(key) or []
    return v[0] if v else ""


class Authenticator:
    def __init__(self, *, api: KubeApi, settings: AuthSettings, metrics: Metrics) -> None:
        self.api = api
        self.settings = settings
        self.metrics = metrics
        # sha256(token) -> (expiry, identity or the AuthError to repeat)
        self._cache: dict[str, tuple[float, Identity | AuthError]] = {}

    async def authorize(self, authorization: str | None, node: str) -> Identity:
        """The caller's identity if it may send features for ``node``; raises AuthError
        (401 no/bad token, 403 not a worker or another node, 503 cannot check)."""
        try:
            ident = await self._identity(authorization)
        except AuthError as e:
            self.metrics.auth_failures.labels(reason=str(e.status)).inc()
            raise
        if ident.node != node:
            self.metrics.auth_failures.labels(reason="403").inc()
            raise AuthError(403, f"the token is bound to node {ident.node!r}, not {node!r}")
        return ident

    def cached_for(self, authorization: str | None, node: str) -> bool:
        """True when a still-fresh review already showed this token to be ``node``'s
        worker (the steady-state fast path asks; anything else takes the full path)."""
        if not authorization or not authorization.startswith("Bearer "):
            return False
        key = hashlib.sha256(authorization[7:].strip().encode()).hexdigest()
        hit = self._cache.get(key)
        return (
            hit is not None
            and hit[0] > time.monotonic()
            and isinstance(hit[1], Identity)
            and hit[1].node == node
        )

    async def _identity(self, authorization: str | None) -> Identity:
        if not authorization:
            raise AuthError(401, "missing bearer token")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError(401, "the Authorization header must be 'Bearer <token>'")
        key = hashlib.sha256(token.encode()).hexdigest()
        t = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > t:
            if isinstance(hit[1], AuthError):
                raise hit[1]
            return hit[1]
        try:
            result: Identity | AuthError = await self._review(token)
        except AuthError as e:
            result = e
        if not (isinstance(result, AuthError) and result.status >= 500):
            if len(self._cache) > 50_000:  # expired tokens pile up only this far
                self._cache = {k: v for k, v in self._cache.items() if v[0] > t}
            self._cache[key] = (t + self.settings.cache_ttl_s, result)
        if isinstance(result, AuthError):
            raise result
        return result

    async def _review(self, token: str) -> Identity:
        audiences = [self.settings.audience] if self.settings.audience else []
        try:
            review = await self.api.token_review(token, audiences)
        except KubeError as e:
            log.warning("TokenReview failed: %s", e)
            raise AuthError(503, "cannot verify the token now") from None
        status = review.get("status") or {}
        if not status.get("authenticated"):
            raise AuthError(401, f"invalid token: {status.get('error') or 'not authenticated'}")
        user = status.get("user") or {}
        username = str(user.get("username") or "")
        if username != self.settings.worker_username:
            raise AuthError(403, f"{username!r} is not the worker service account")
        extra: dict[str, list[str]] = user.get("extra") or {}
        node = _first(extra, NODE_NAME_EXTRA)
        if node:
            return Identity(username, node)
        pod_name, pod_uid = _first(extra, POD_NAME_EXTRA), _first(extra, POD_UID_EXTRA)
        if not pod_name or not pod_uid:
            raise AuthError(403, "the token is not bound to a pod or node")
        ns = self.settings.worker_service_account.partition(":")[0]
        try:
            pod = await self.api.get_pod(ns, pod_name)
        except KubeError as e:
            if e.status == 404:
                raise AuthError(403, f"the token's pod {ns}/{pod_name} does not exist") from None
            raise AuthError(503, "cannot verify the token's pod now") from None
        if (pod.get("metadata") or {}).get("uid") != pod_uid:
            raise AuthError(403, f"the token's pod {ns}/{pod_name} was replaced")
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if not node:
            raise AuthError(403, f"the token's pod {ns}/{pod_name} is not on a node")
        return Identity(username, node)
