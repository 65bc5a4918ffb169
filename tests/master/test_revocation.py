"""A worker token whose pod is deleted is refused within seconds, while the steady state
(the same token every minute) costs no TokenReview: the master watches the workers'
pods and drops the cached answers of tokens bound to pods that are gone. Against the
fake API server over real HTTP (its TokenReview refuses tokens of deleted pods, as the
API server does)."""

from __future__ import annotations

import time

from kubernetes import client

from .kubehelpers import kube_master, wait_for

NS = "node-feature-discovery"
TOKEN_REVIEWS = "tokenreviews.authentication.k8s.io"


def heartbeat(m, node, digest, token):
    return m.client.post(
        f"/api/v1/nodes/{node}/heartbeat",
        json={"digest": digest},
        headers={"Authorization": f"Bearer {token}"},
    )


def refused_after_delete(fake_api, m, token, digest) -> float:
    """Delete the token's pod through the API; seconds until the master refuses it."""
    core = client.CoreV1Api(fake_api.api_client(fake_api.admin_token()))
    t0 = time.monotonic()
    core.delete_namespaced_pod("nfd-worker-n1", NS, _preload_content=False)
    while True:
        r = heartbeat(m, "n1", digest, token)
        if r.status_code != 200:
            assert r.status_code == 401, r.text
            return time.monotonic() - t0
        assert time.monotonic() - t0 < 30, "still accepted after 30 s"
        time.sleep(0.02)


def test_deleted_pod_token_refused_at_once_without_reviews_per_request(fake_api):
    fake_api.create_node("n1")
    token = fake_api.issue_worker_token("n1", audiences=("nfd-master",))
    with kube_master(fake_api, auth__enabled=True, auth__audience="nfd-master") as m:
        digest = m.put("n1", {"a": "1"}, token=token).json()["digest"]
        wait_for(m.runtime.pods.live, what="the pod watch")
        reviews = fake_api.log.count(resource=TOKEN_REVIEWS)
        # Longer than the revocation window: the watch vouches for the cached answer.
        deadline = time.monotonic() + m.runtime.settings.auth.revocation_window_s + 1
        beats = 0
        while time.monotonic() < deadline:
            assert heartbeat(m, "n1", digest, token).status_code == 200
            beats += 1
            time.sleep(0.05)
        assert beats > 20 and fake_api.log.count(resource=TOKEN_REVIEWS) == reviews
        window = refused_after_delete(fake_api, m, token, digest)
        print(f"revoked-token window with the pod watch: {window * 1000:.0f} ms")
        assert window <= 5.0
        r = m.put("n1", {"a": "1"}, token=token)
        assert r.status_code == 401 and "invalid" in r.json()["detail"]


def test_without_the_pod_watch_cached_answers_expire_in_the_window(fake_api):
    fake_api.create_node("n1")
    token = fake_api.issue_worker_token("n1", audiences=("nfd-master",))
    with kube_master(
        fake_api, auth__enabled=True, auth__audience="nfd-master", auth__watch_pods=False,
        auth__revocation_window_s=1.0,
    ) as m:  # fmt: skip
        digest = m.put("n1", {"a": "1"}, token=token).json()["digest"]
        reviews = fake_api.log.count(resource=TOKEN_REVIEWS)
        for _ in range(10):
            assert heartbeat(m, "n1", digest, token).status_code == 200
        assert fake_api.log.count(resource=TOKEN_REVIEWS) == reviews  # within the window: cached
        window = refused_after_delete(fake_api, m, token, digest)
        print(f"revoked-token window without the pod watch (window 1 s): {window * 1000:.0f} ms")
        assert window <= 1.0 + 0.5


def test_a_broken_pod_watch_falls_back_to_the_window(fake_api):
    fake_api.create_node("n1")
    token = fake_api.issue_worker_token("n1", audiences=("nfd-master",))
    with kube_master(
        fake_api, auth__enabled=True, auth__audience="nfd-master", auth__revocation_window_s=1.0
    ) as m:
        digest = m.put("n1", {"a": "1"}, token=token).json()["digest"]
        wait_for(m.runtime.pods.live, what="the pod watch")
        # The API server stops serving pod watches and lists: the master can no longer
        # see deletions, so its cached answers are re-checked after the window.
        fake_api.faults.fail(500, resource="pods", times=None)
        fake_api.stop()  # a restart of the API server ends the watch under way
        fake_api.start()
        wait_for(lambda: not m.runtime.pods.live(), what="the pod watch to break")
        time.sleep(1.1)
        reviews = fake_api.log.count(resource=TOKEN_REVIEWS)
        assert heartbeat(m, "n1", digest, token).status_code == 200
        assert fake_api.log.count(resource=TOKEN_REVIEWS) == reviews + 1
        fake_api.faults.clear()
        wait_for(m.runtime.pods.live, what="the pod watch to recover")
        fake_api.objects.delete("pods", "nfd-worker-n1", NS)
        wait_for(lambda: heartbeat(m, "n1", digest, token).status_code == 401, what="refused", timeout=5)
