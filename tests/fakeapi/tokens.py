"""The token registry behind TokenReview (authentication.k8s.io/v1).

Tests register tokens as a cluster would issue them (bound service-account tokens carry
the pod and node they were issued for as ``extra``); a review answers as the API server's
token authenticator does, audiences included.
"""

from __future__ import annotations

import secrets
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DEFAULT_AUDIENCES = ("https://kubernetes.default.svc.cluster.local",)
EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name"
EXTRA_NODE_UID = "authentication.kubernetes.io/node-uid"
EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID = "authentication.kubernetes.io/pod-uid"
EXTRA_CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


@dataclass(frozen=True)
class TokenUser:
    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)
    audiences: tuple[str, ...] = ()  # empty: the API server's own audiences

    def as_user_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"username": self.username}
        if self.uid:
            info["uid"] = self.uid
        if self.groups:
            info["groups"] = list(self.groups)
        if self.extra:
            info["extra"] = {k: list(v) for k, v in self.extra.items()}
        return info


class TokenRegistry:
    def __init__(self, api_audiences: tuple[str, ...] = DEFAULT_AUDIENCES) -> None:
        self.api_audiences = api_audiences
        self._tokens: dict[str, TokenUser] = {}
        self._lock = threading.Lock()
        # (namespace, pod name, pod uid) -> whether that pod exists; set by the server
        self.pod_alive: Callable[[str, str, str], bool] | None = None

    def add(self, token: str, user: TokenUser) -> str:
        with self._lock:
            self._tokens[token] = user
        return token

    def revoke(self, token: str) -> None:
        with self._lock:
            self._tokens.pop(token, None)

    def lookup(self, token: str) -> TokenUser | None:
        with self._lock:
            return self._tokens.get(token)

    def issue_service_account(
        self,
        namespace: str,
        name: str,
        *,
        pod_name: str | None = None,
        pod_uid: str | None = None,
        node_name: str | None = None,
        node_uid: str | None = None,
        audiences: tuple[str, ...] = (),
        token: str | None = None,
    ) -> str:
        """A bound service-account token, as kubelet gets for a pod: its user is
        ``system:serviceaccount:<ns>:<name>``; ``extra`` names the pod and, on clusters
        that bind tokens to nodes (1.30+), the node."""
        extra: dict[str, tuple[str, ...]] = {EXTRA_CREDENTIAL_ID: (f"JTI={uuid.uuid4()}",)}
        if pod_name:
            extra[EXTRA_POD_NAME] = (pod_name,)
            extra[EXTRA_POD_UID] = (pod_uid or str(uuid.uuid4()),)
        if node_name:
            extra[EXTRA_NODE_NAME] = (node_name,)
            extra[EXTRA_NODE_UID] = (node_uid or str(uuid.uuid4()),)
        user = TokenUser(
            username=f"system:serviceaccount:{namespace}:{name}",
            uid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"sa/{namespace}/{name}")),
            groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
            extra=extra,
            audiences=audiences,
        )
        return self.add(token or "fake." + secrets.token_urlsafe(24), user)

    def review(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The ``status`` of a TokenReview. A false ``authenticated`` is left out, as the
        API server's JSON does (``omitempty``)."""
        token = spec.get("token") or ""
        wanted = tuple(spec.get("audiences") or ()) or self.api_audiences
        user = self.lookup(token)
        if user is None:
            return {"user": {}, "error": "[invalid bearer token, token lookup failed]"}
        pod = user.extra.get(EXTRA_POD_NAME)
        if pod and self.pod_alive is not None and user.username.startswith("system:serviceaccount:"):
            namespace = user.username.split(":")[2]
            if not self.pod_alive(namespace, pod[0], (user.extra.get(EXTRA_POD_UID) or ("",))[0]):
                return {
                    "user": {},
                    "error": "[invalid bearer token, service account token has been invalidated]",
                }
        granted = user.audiences or self.api_audiences
        common = [a for a in wanted if a in granted]
        if not common:
            return {
                "user": {},
                "error": f"[invalid bearer token, token audiences {list(granted)} is invalid for the target audiences {list(wanted)}]",
            }
        return {"authenticated": True, "user": user.as_user_info(), "audiences": common}
