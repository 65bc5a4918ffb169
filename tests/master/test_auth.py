"""Worker authentication: TokenReview answers (from a stand-in for the client wrapper)
mapped to 401 / 403 / 200, node binding by node-name or by pod, and the cache."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import httpx
import pytest

from nfd.kube.errors import ApiError
from nfd.master.api.app import create_app
from nfd.master.runtime import build_runtime
from nfd.master.security.auth import Authenticator

from .conftest import memory_settings
from .helpers import FixtureSource, features_with, serve

SA = "system:serviceaccount:node-feature-discovery:nfd-worker"


class ReviewApi:
    """Answers TokenReviews and pod reads the way the API server would."""

    def __init__(self) -> None:
        self.reviews = 0
        self.audiences: list[list[str]] = []
        self.tokens: dict[str, dict[str, Any]] = {
            "node-a": {"username": SA, "extra": {"authentication.kubernetes.io/node-name": ["a"]}},
            "pod-b": {"username": SA, "extra": {
                "authentication.kubernetes.io/pod-name": ["w-b"], "authentication.kubernetes.io/pod-uid": ["u1"]}},
            "pod-stale": {"username": SA, "extra": {
                "authentication.kubernetes.io/pod-name": ["w-b"], "authentication.kubernetes.io/pod-uid": ["old"]}},
            "someone": {"username": "system:serviceaccount:default:app", "extra": {}},
        }  # fmt: skip

    async def token_review(self, token: str, audiences: list[str]) -> dict[str, Any]:
        self.reviews += 1
        self.audiences.append(audiences)
        if token == "down":
            raise ApiError(None, "connection refused")
        user = self.tokens.get(token)
        if user is None:
            return {"status": {"authenticated": False, "error": "token expired"}}
        return {"status": {"authenticated": True, "user": user}}

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        assert namespace == "node-feature-discovery"
        if name != "w-b":
            raise ApiError(404, "not found")
        return {"metadata": {"uid": "u1"}, "spec": {"nodeName": "b"}}


@pytest.fixture
def authed():
    s = memory_settings(auth__enabled=True, auth__audience="nfd-master")
    s.auth.enabled = False  # build without an API client, then plug in the authenticator
    rt = build_runtime(s, sources=[FixtureSource()])
    s.auth.enabled = True
    api = ReviewApi()
    rt.authenticator = Authenticator(api=api, settings=s.auth, metrics=rt.metrics)  # type: ignore[arg-type]
    with serve(create_app(runtime=rt)) as url, httpx.Client(base_url=url) as c:
        c.app_runtime = rt  # type: ignore[attr-defined]
        yield c, api


def put(c, node, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return c.put(
        f"/api/v1/nodes/{node}/features", json={"features": features_with({"a": "1"})}, headers=headers
    )


def test_no_token_401(authed):
    c, _ = authed
    r = put(c, "a")
    assert r.status_code == 401 and "token" in r.json()["detail"]
    assert r.headers["www-authenticate"] == "Bearer"
    assert c.put("/api/v1/nodes/a/features", headers={"Authorization": "Basic x"}, json={}).status_code == 401


def test_invalid_token_401(authed):
    c, _ = authed
    r = put(c, "a", "garbage")
    assert r.status_code == 401 and "token expired" in r.json()["detail"]


def test_node_bound_token(authed):
    c, api = authed
    assert put(c, "a", "node-a").status_code == 200
    assert api.audiences[0] == ["nfd-master"]
    r = put(c, "b", "node-a")
    assert r.status_code == 403 and "'a'" in r.json()["detail"]
    r = c.post("/api/v1/nodes/b/heartbeat", json={"digest": "x"}, headers={"Authorization": "Bearer node-a"})
    assert r.status_code == 403


def test_pod_bound_token_resolved_through_the_pod(authed):
    c, _ = authed
    assert put(c, "b", "pod-b").status_code == 200
    assert put(c, "a", "pod-b").status_code == 403
    r = put(c, "b", "pod-stale")
    assert r.status_code == 403 and "replaced" in r.json()["detail"]


def test_other_service_account_403(authed):
    c, _ = authed
    r = put(c, "a", "someone")
    assert r.status_code == 403 and "not the worker service account" in r.json()["detail"]


def test_reviews_are_cached(authed):
    c, api = authed
    for _ in range(5):
        assert put(c, "a", "node-a").status_code == 200
    assert api.reviews == 1


def test_api_server_down_is_503_not_cached(authed):
    c, api = authed
    r = put(c, "a", "down")
    assert r.status_code == 503 and r.headers["retry-after"]
    put(c, "a", "down")
    assert api.reviews == 2
    assert 'nfd_master_auth_failures_total{reason="503"} 2.0' in c.get("/metrics").text


class Watch:
    """The pod watch as the authenticator sees it: which pods it can vouch for."""

    def __init__(self) -> None:
        self.known: set[str] = set()

    def vouches(self, uid: str) -> bool:
        return uid in self.known

    def deleted(self, uid: str) -> bool:
        return False

    def node_of(self, name: str, uid: str) -> str | None:
        return None


def test_cached_answers_outlive_the_window_only_for_pods_the_watch_holds(authed):
    c, api = authed
    authn = c.app_runtime.authenticator
    authn.settings.revocation_window_s = 0.2
    authn.pods = watch = Watch()
    assert put(c, "b", "pod-b").status_code == 200
    time.sleep(0.3)
    assert put(c, "b", "pod-b").status_code == 200
    assert api.reviews == 2  # the watch does not hold pod u1 (not listed yet, say): asked again
    watch.known.add("u1")
    time.sleep(0.3)
    for _ in range(3):
        assert put(c, "b", "pod-b").status_code == 200
    assert api.reviews == 2  # now it vouches: no review however old the answer
    authn.forget_pod("u1")  # what the watch calls when the pod is deleted
    assert put(c, "b", "pod-b").status_code == 200
    assert api.reviews == 3


def jwt(claims: dict[str, Any]) -> str:
    def part(d: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def test_an_answer_is_not_trusted_past_the_tokens_end(authed):
    c, api = authed
    short = jwt({"exp": int(time.time()) + 2, "sub": "w"})
    api.tokens[short] = api.tokens["node-a"]
    assert put(c, "a", short).status_code == 200
    assert put(c, "a", short).status_code == 200
    assert api.reviews == 1
    time.sleep(2.1)
    put(c, "a", short)  # the stand-in still accepts it; what counts is that it was asked
    assert api.reviews == 2
