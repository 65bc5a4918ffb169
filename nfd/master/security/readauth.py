"""Readers of the master's API (``GET /api/v1/nodes*``, ``/metrics``): a bearer token the
API server authenticates (TokenReview, for the API server's own audiences) whose user
the API server allows what the route stands for (SubjectAccessReview), as
kube-rbac-proxy checks its callers. Answers are cached briefly, so a scraper or a
dashboard costs a review every few seconds at most, not one per request."""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from nfd.kube.errors import ApiError
from nfd.master.core.kube import KubeApi
from nfd.master.core.metrics import Metrics
from nfd.master.core.settings import AuthSettings
from nfd.master.security.auth import AuthError, bearer_token

log = logging.getLogger(__name__)

MAX_CACHED = 10_000


@dataclass(frozen=True)
class Access:
    """What a request needs: a verb on a resource (cluster-wide), or on a URL path."""

    verb: str
    resource: str = ""
    group: str = ""
    path: str = ""

    def attributes(self) -> dict[str, Any]:
        if self.path:
            return {"nonResourceAttributes": {"verb": self.verb, "path": self.path}}
        return {"resourceAttributes": {"verb": self.verb, "group": self.group, "resource": self.resource}}

    def describe(self) -> str:
        if self.path:
            return f"{self.verb} {self.path}"
        return f"{self.verb} {self.resource}{'.' + self.group if self.group else ''}"


NODES_LIST = Access("list", "nodes")
NODES_GET = Access("get", "nodes")
METRICS = Access("get", path="/metrics")


class ReadAuthorizer:
    def __init__(self, *, api: KubeApi, settings: AuthSettings, metrics: Metrics) -> None:
        self.api = api
        self.settings = settings
        self.metrics = metrics
        # sha256(token) -> (expiry, user info or the AuthError to repeat)
        self._users: dict[str, tuple[float, dict[str, Any] | AuthError]] = {}
        # (sha256(token), access) -> (expiry, None when allowed, else the AuthError)
        self._decisions: dict[tuple[str, Access], tuple[float, AuthError | None]] = {}

    async def check(self, authorization: str | None, access: Access) -> None:
        """Returns when the caller may; raises AuthError 401 (no or bad token), 403 (not
        allowed) or 503 (the API server cannot tell now)."""
        try:
            await self._check(authorization, access)
        except AuthError as e:
            self.metrics.auth_failures.labels(reason=str(e.status)).inc()
            raise

    async def _check(self, authorization: str | None, access: Access) -> None:
        token = bearer_token(authorization)
        key = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        hit = self._decisions.get((key, access))
        if hit is not None and hit[0] > now:
            if hit[1] is not None:
                raise hit[1]
            return
        try:
            user = await self._user(key, token, now)
            await self._allowed(user, access)
            verdict: AuthError | None = None
        except AuthError as e:
            verdict = e
        if verdict is None or verdict.status < 500:
            _prune(self._decisions, now)
            self._decisions[(key, access)] = (now + self.settings.read_cache_ttl_s, verdict)
        if verdict is not None:
            raise verdict

    async def _user(self, key: str, token: str, now: float) -> dict[str, Any]:
        hit = self._users.get(key)
        if hit is not None and hit[0] > now:
            if isinstance(hit[1], AuthError):
                raise hit[1]
            return hit[1]
        try:
            review = await self.api.token_review(token, [])
        except ApiError as e:
            log.warning("TokenReview failed: %s", e)
            raise AuthError(503, "cannot verify the token now") from None
        status = review.get("status") or {}
        result: dict[str, Any] | AuthError
        if status.get("authenticated"):
            result = dict(status.get("user") or {})
        else:
            result = AuthError(401, f"invalid token: {status.get('error') or 'not authenticated'}")
        _prune(self._users, now)
        self._users[key] = (now + self.settings.read_cache_ttl_s, result)
        if isinstance(result, AuthError):
            raise result
        return result

    async def _allowed(self, user: dict[str, Any], access: Access) -> None:
        spec: dict[str, Any] = {"user": user.get("username") or "", **access.attributes()}
        for field in ("groups", "uid", "extra"):
            if user.get(field):
                spec[field] = user[field]
        try:
            review = await self.api.subject_access_review(spec)
        except ApiError as e:
            log.warning("SubjectAccessReview failed: %s", e)
            raise AuthError(503, "cannot check the caller's rights now") from None
        status = review.get("status") or {}
        if not status.get("allowed") or status.get("denied"):
            why = status.get("reason") or status.get("evaluationError") or ""
            raise AuthError(
                403, f"{spec['user']!r} may not {access.describe()}" + (f": {why}" if why else "")
            )


def _prune(cache: dict[Any, tuple[float, Any]], now: float) -> None:
    """Expired entries go once the cache is full; a flood of distinct tokens is bounded."""
    if len(cache) < MAX_CACHED:
        return
    for k in [k for k, v in cache.items() if v[0] <= now]:
        del cache[k]
    if len(cache) >= MAX_CACHED:
        cache.clear()
