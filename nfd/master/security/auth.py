"""Worker authentication: a projected ServiceAccount token, checked with a TokenReview,
must belong to the worker's service account and be bound to the node whose features it
sends.

Answers are cached so that the steady state (a request a minute per worker, the same
token for most of its life) costs no review. A token bound to a pod is dropped from the
cache as soon as the pod watch sees the pod deleted; while the watch cannot vouch for
that (not listed yet, broken), cached answers older than ``revocation_window_s`` are
checked again."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Protocol

from nfd.kube.errors import ApiError, NotFound
from nfd.master.core.kube import KubeApi
from nfd.master.core.metrics import Metrics
from nfd.master.core.settings import AuthSettings

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
    pod_uid: str = ""  # the pod the token is bound to, if any


@dataclass(frozen=True, slots=True)
class _Entry:
    expiry: float
    reviewed: float
    result: Identity | AuthError


class PodView(Protocol):
    """What the authenticator asks of the pod watch (nfd.master.watches.podwatch.PodWatch)."""

    def vouches(self, uid: str) -> bool:
        """The watch is current and holds this pod: were it deleted, it would know."""
        ...

    def deleted(self, uid: str) -> bool:
        """The pod with this uid was seen deleted."""
        ...

    def node_of(self, name: str, uid: str) -> str | None:
        """The node of the live pod ``name`` with ``uid``; None when the watch does not
        know it (or it is not on a node yet)."""
        ...


def _expires_in(token: str) -> float | None:
    """Seconds until the ``exp`` claim of a JWT (ServiceAccount tokens are), read without
    checking the signature: only after the API server accepted this very token, so as
    not to trust its answer longer than the token lives. None for other tokens."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        exp = claims.get("exp")
    except (ValueError, TypeError, AttributeError):
        return None
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return None
    return float(exp) - time.time()


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer`` header; AuthError 401 otherwise."""
    if not authorization:
        raise AuthError(401, "missing bearer token")
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise AuthError(401, "the Authorization header must be 'Bearer <token>'")
    return token


def _first(extra: dict[str, list[str]], key: str) -> str:
    v = extra.get(key) or []
    return v[0] if v else ""


class Authenticator:
    def __init__(self, *, api: KubeApi, settings: AuthSettings, metrics: Metrics) -> None:
        self.api = api
        self.settings = settings
        self.metrics = metrics
        self.pods: PodView | None = None  # set when the workers' pods are watched
        # sha256(token) -> the review's answer (an identity, or the AuthError to repeat)
        self._cache: dict[str, _Entry] = {}
        # pod uid -> the cache keys of tokens bound to it
        self._by_pod: dict[str, set[str]] = {}

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
            and isinstance(hit.result, Identity)
            and hit.result.node == node
            and self._fresh(hit, time.monotonic())
        )

    def forget_pod(self, uid: str) -> None:
        """The pod is gone: tokens bound to it need a new review (which refuses them)."""
        for key in self._by_pod.pop(uid, ()):
            self._cache.pop(key, None)

    def _fresh(self, e: _Entry, now: float) -> bool:
        if e.expiry <= now:
            return False
        if now - e.reviewed < self.settings.revocation_window_s:
            return True
        r = e.result
        return (
            isinstance(r, Identity)
            and bool(r.pod_uid)
            and self.pods is not None
            and self.pods.vouches(r.pod_uid)
        )

    async def _identity(self, authorization: str | None) -> Identity:
        token = bearer_token(authorization)
        key = hashlib.sha256(token.encode()).hexdigest()
        t = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and self._fresh(hit, t):
            if isinstance(hit.result, AuthError):
                raise hit.result
            return hit.result
        try:
            result: Identity | AuthError = await self._review(token)
        except AuthError as e:
            result = e
        pods = self.pods
        if (
            isinstance(result, Identity)
            and result.pod_uid
            and pods is not None
            and pods.deleted(result.pod_uid)
        ):
            # deleted while the review was under way
            result = AuthError(401, "invalid token: its pod was deleted")
        if not (isinstance(result, AuthError) and result.status >= 500):
            self._remember(key, result, t, _expires_in(token))
        if isinstance(result, AuthError):
            raise result
        return result

    def _remember(self, key: str, result: Identity | AuthError, t: float, lives: float | None) -> None:
        if len(self._cache) > 50_000:  # expired tokens pile up only this far
            self._cache = {k: v for k, v in self._cache.items() if v.expiry > t}
            live = set(self._cache)
            self._by_pod = {u: ks & live for u, ks in self._by_pod.items() if ks & live}
        # A refusal is repeated only briefly: the pod or binding it lacked may appear.
        ttl = self.settings.cache_ttl_s if isinstance(result, Identity) else self.settings.revocation_window_s
        if lives is not None:  # never trusted past the token's own end
            ttl = min(ttl, lives)
        self._cache[key] = _Entry(t + ttl, t, result)
        if isinstance(result, Identity) and result.pod_uid:
            self._by_pod.setdefault(result.pod_uid, set()).add(key)

    async def _review(self, token: str) -> Identity:
        audiences = [self.settings.audience] if self.settings.audience else []
        try:
            review = await self.api.token_review(token, audiences)
        except ApiError as e:
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
        pod_name, pod_uid = _first(extra, POD_NAME_EXTRA), _first(extra, POD_UID_EXTRA)
        if node:
            return Identity(username, node, pod_uid if pod_name else "")
        if not pod_name or not pod_uid:
            raise AuthError(403, "the token is not bound to a pod or node")
        known = self.pods.node_of(pod_name, pod_uid) if self.pods is not None else None
        if known:
            return Identity(username, known, pod_uid)
        ns = self.settings.worker_service_account.partition(":")[0]
        try:
            pod = await self.api.get_pod(ns, pod_name)
        except NotFound:
            raise AuthError(403, f"the token's pod {ns}/{pod_name} does not exist") from None
        except ApiError:
            raise AuthError(503, "cannot verify the token's pod now") from None
        if (pod.get("metadata") or {}).get("uid") != pod_uid:
            raise AuthError(403, f"the token's pod {ns}/{pod_name} was replaced")
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if not node:
            raise AuthError(403, f"the token's pod {ns}/{pod_name} is not on a node")
        return Identity(username, node, pod_uid)
