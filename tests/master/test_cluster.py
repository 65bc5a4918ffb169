"""NodeFeatureRules watched in the cluster, and worker tokens checked by TokenReview,
against the fake API server (leader election: test_ha.py)."""

from __future__ import annotations

import httpx

from .helpers import features_with
from .kubehelpers import kube_master, wait_for

FNS = "feature.node.kubernetes.io"


def test_rules_watched_in_the_cluster_relabel_every_node(fake_api):
    for n in ("n1", "n2"):
        fake_api.create_node(n)
    with kube_master(fake_api, rules__watch=True) as m:
        wait_for(lambda: m.client.get("/readyz").status_code == 200, what="rules listed")
        for n in ("n1", "n2"):
            m.put(n, {"gpu": "1"})
        wait_for(m.settled, what="publish")
        fake_api.create_rule(
            "gpu",
            [{"name": "gpu", "labels": {"gpu-node": "true"},
              "matchFeatures": [{"feature": "fixture.labels", "matchExpressions": {"gpu": {"op": "Exists"}}}]}],
        )  # fmt: skip
        for n in ("n1", "n2"):
            wait_for(
                lambda n=n: fake_api.labels(n).get(f"{FNS}/gpu-node") == "true", what=f"rule label on {n}"
            )
        fake_api.objects.delete("nodefeaturerules", "gpu")
        for n in ("n1", "n2"):
            wait_for(
                lambda n=n: f"{FNS}/gpu-node" not in fake_api.labels(n), what=f"rule label gone from {n}"
            )
        assert fake_api.labels("n1")[f"{FNS}/fixture-gpu"] == "1"
        # Watched, not polled; the nodes were listed once, at the start.
        assert fake_api.log.count(verb="list", resource="nodes") == 1
        assert fake_api.log.count(verb="watch") >= 1


def test_a_dropped_rule_watch_resumes_without_listing(fake_api):
    fake_api.create_node("n1")
    with kube_master(fake_api, rules__watch=True) as m:
        wait_for(lambda: m.client.get("/readyz").status_code == 200, what="rules listed")
        m.put("n1", {"gpu": "1"})
        wait_for(m.settled, what="publish")
        lists = fake_api.log.count(verb="list", resource="nodefeaturerules.nfd.k8s-sigs.io")
        fake_api.drop_connections()  # the watch breaks; the rule below comes while it is away
        fake_api.create_rule(
            "gpu",
            [{"name": "gpu", "labels": {"gpu-node": "true"},
              "matchFeatures": [{"feature": "fixture.labels", "matchExpressions": {"gpu": {"op": "Exists"}}}]}],
        )  # fmt: skip
        wait_for(lambda: fake_api.labels("n1").get(f"{FNS}/gpu-node") == "true", what="rule label")
        assert fake_api.log.count(verb="list", resource="nodefeaturerules.nfd.k8s-sigs.io") == lists


def test_worker_tokens_checked_with_tokenreview(fake_api):
    for n in ("n1", "n2", "n3"):
        fake_api.create_node(n)
    t1 = fake_api.issue_worker_token("n1", audiences=("nfd-master",))
    t3 = fake_api.issue_worker_token("n3", bind_node=False, audiences=("nfd-master",))
    other = fake_api.tokens.issue_service_account("default", "app", audiences=("nfd-master",))
    with kube_master(fake_api, auth__enabled=True, auth__audience="nfd-master") as m:
        assert m.put("n1", {"a": "1"}, token=t1).status_code == 200
        assert m.put("n2", {"a": "1"}, token=t1).status_code == 403
        assert m.put("n3", {"a": "1"}, token=t3).status_code == 200  # via the pod's nodeName
        assert m.put("n1", {"a": "1"}, token=t3).status_code == 403
        assert m.put("n1", {"a": "1"}, token=other).status_code == 403
        assert m.put("n1", {"a": "1"}, token="forged").status_code == 401
        assert m.put("n1", {"a": "1"}).status_code == 401
        wait_for(m.settled, what="publish")
        assert f"{FNS}/fixture-a" in fake_api.labels("n3")
        assert f"{FNS}/fixture-a" not in fake_api.labels("n2")
        # Answers are cached: repeated requests with one token cost one review.
        before = fake_api.log.count(verb="create", resource="tokenreviews.authentication.k8s.io")
        for _ in range(5):
            m.put("n1", {"a": "1"}, token=t1)
        after = fake_api.log.count(verb="create", resource="tokenreviews.authentication.k8s.io")
        assert before >= 1 and after == before


def test_wrong_audience_is_401(fake_api):
    fake_api.create_node("n1")
    t = fake_api.issue_worker_token("n1", audiences=("something-else",))
    with kube_master(fake_api, auth__enabled=True, auth__audience="nfd-master") as m:
        r = m.put("n1", {"a": "1"}, token=t)
        assert r.status_code == 401 and "audience" in r.json()["detail"]


def test_node_selector_label_is_there(fake_api):
    """A Pod with nodeSelector {feature.node.kubernetes.io/fixture-gpu: "1"} fits n1 only."""
    fake_api.create_node("n1")
    fake_api.create_node("n2")
    with kube_master(fake_api) as m:
        m.put("n1", {"gpu": "1"})
        m.put("n2", {"cpu": "1"})
        wait_for(m.settled, what="publish")
    selector = {f"{FNS}/fixture-gpu": "1"}
    fits = [
        n["metadata"]["name"]
        for n in fake_api.nodes()
        if all(n["metadata"]["labels"].get(k) == v for k, v in selector.items())
    ]
    assert fits == ["n1"]
    # The same through the API server's own label selector.
    from kubernetes import client

    v1 = client.CoreV1Api(fake_api.api_client())
    got = v1.list_node(label_selector=f"{FNS}/fixture-gpu=1")
    assert [n.metadata.name for n in got.items] == ["n1"]


def test_features_in_the_body_shape_workers_send(fake_api):
    """Round trip with httpx the way a worker sends it (digest included)."""
    from nfd.features import Features

    fake_api.create_node("n1")
    with kube_master(fake_api) as m:
        raw = features_with({"a": "1"})
        body = {"nfdVersion": "0.1.0", "digest": Features.from_dict(raw).digest(), "features": raw}
        r = httpx.put(m.client.base_url.join("/api/v1/nodes/n1/features"), json=body)
        assert r.status_code == 200 and r.json()["digest"] == body["digest"]
