"""The worker-facing API over real HTTP, master in memory mode."""

from __future__ import annotations

import json

from nfd.features import Features

from .helpers import features_with

FNS = "feature.node.kubernetes.io"


def put(c, node, labels, **kw):
    body = {"nfdVersion": "t", "features": features_with(labels), **kw}
    return c.put(f"/api/v1/nodes/{node}/features", json=body)


def test_put_features_answers_the_decision(master):
    c = master()
    r = put(c, "n1", {"cpu-x": "true", "kubernetes.io/evil": "1", "bad": "not ok!"})
    assert r.status_code == 200
    body = r.json()
    assert body["node"] == "n1"
    assert body["labels"] == {f"{FNS}/fixture-cpu-x": "true"}
    # Namespace policy and value checks: rejected with the reason, never applied.
    assert "kubernetes.io/evil" in body["rejected"]["labels"]
    assert "not allowed" in body["rejected"]["labels"]["kubernetes.io/evil"]
    assert f"{FNS}/fixture-bad" in body["rejected"]["labels"]
    f = Features.from_dict(features_with({"cpu-x": "true", "kubernetes.io/evil": "1", "bad": "not ok!"}))
    assert body["digest"] == f.digest()
    metrics = c.get("/metrics").text
    assert "nfd_master_node_labels_rejected_total 2.0" in metrics
    assert "nfd_master_node_update_requests_total 1.0" in metrics


def test_get_node_and_list(master):
    c = master()
    put(c, "n1", {"a": "1"})
    put(c, "n2", {"b": "2"})
    one = c.get("/api/v1/nodes/n1").json()
    assert one["labels"] == {f"{FNS}/fixture-a": "1"} and one["inSync"] is True
    assert one["nfdVersion"] == "t" and one["published"] is not None
    assert [n["node"] for n in c.get("/api/v1/nodes").json()["items"]] == ["n1", "n2"]
    r = c.get("/api/v1/nodes/nope")
    assert r.status_code == 404 and "nope" in r.json()["detail"]


def test_heartbeat_known_and_unknown(master):
    c = master()
    digest = put(c, "n1", {"a": "1"}).json()["digest"]
    assert c.post("/api/v1/nodes/n1/heartbeat", json={"digest": digest}).json() == {"known": True}
    r = c.post("/api/v1/nodes/n1/heartbeat", json={"digest": "0" * 64})
    assert r.status_code == 409 and r.json()["known"] is False and r.json()["detail"]
    r = c.post("/api/v1/nodes/other/heartbeat", json={"digest": digest})
    assert r.status_code == 409


def test_unchanged_features_keep_the_decision(master):
    c = master()
    first = put(c, "n1", {"a": "1"}).json()
    again = put(c, "n1", {"a": "1"}, digest=first["digest"]).json()
    assert again == first  # same `updated`: nothing was re-decided
    changed = put(c, "n1", {"a": "2"}).json()
    assert changed["labels"] == {f"{FNS}/fixture-a": "2"} and changed["updated"] > first["updated"]


def test_malformed_body_is_422_naming_the_field(master):
    c = master()
    r = c.put("/api/v1/nodes/n1/features", json={"features": {"attributes": {"x.y": {"elements": {"k": 5}}}}})
    assert r.status_code == 422
    locs = [d["loc"] for d in r.json()["detail"]]
    assert ["body", "features", "attributes", "x.y", "elements", "k"] in locs
    r = c.put("/api/v1/nodes/n1/features", json={"nfdVersion": "1"})
    assert r.status_code == 422 and ["body", "features"] in [d["loc"] for d in r.json()["detail"]]
    r = c.put("/api/v1/nodes/n1/features", json={"features": {"bogus": {}}})
    assert r.status_code == 422 and ["body", "features", "bogus"] in [d["loc"] for d in r.json()["detail"]]
    r = c.put("/api/v1/nodes/n1/features", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    r = c.put("/api/v1/nodes/Bad_Name/features", json={"features": {}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["path", "node"]
    assert c.get("/api/v1/nodes").json()["items"] == []  # nothing half-stored


def test_oversize_body_is_413_by_length_and_by_stream(master):
    c = master(server__max_body_bytes=1000)
    big = {"features": features_with({f"l{i}": "x" * 40 for i in range(50)})}
    r = c.put("/api/v1/nodes/n1/features", json=big)
    assert r.status_code == 413 and "1000" in r.json()["detail"]

    def chunks():  # no Content-Length: the limit is enforced while the body streams in
        data = json.dumps(big).encode()
        for i in range(0, len(data), 256):
            yield data[i : i + 256]

    r = c.put("/api/v1/nodes/n1/features", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert put(c, "n1", {"a": "1"}).status_code == 200  # small bodies still pass


def test_probes_and_openapi(master):
    c = master()
    assert c.get("/healthz").json() == {"status": "ok"}
    ready = c.get("/readyz")
    assert ready.status_code == 200 and ready.json()["mode"] == "memory"
    spec = c.get("/openapi.json").json()
    assert "/api/v1/nodes/{node}/features" in spec["paths"]
    put_op = spec["paths"]["/api/v1/nodes/{node}/features"]["put"]
    assert {"401", "403", "413", "422"} <= set(put_op["responses"])
    body_ref = put_op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert body_ref == "#/components/schemas/FeaturesRequest"
    assert "devicePluginResources" in spec["components"]["schemas"]["FeaturesRequest"]["properties"]
    assert "RawFeatures" in spec["components"]["schemas"]
    assert "nfd_master_build_info" in c.get("/metrics").text


def test_label_whitelist_and_extra_namespace(master):
    c = master(policy__label_whitelist="^fixture-keep", policy__extra_label_ns=["vendor.example.com"])
    body = put(c, "n1", {"keep": "1", "drop": "1", "vendor.example.com/x": "1"}).json()
    assert body["labels"] == {f"{FNS}/fixture-keep": "1"}
    assert set(body["rejected"]["labels"]) == {f"{FNS}/fixture-drop", "vendor.example.com/x"}


def test_repeated_body_answered_alike_without_a_new_decision(master):
    """The steady-state fast path (a body identical to the last one) answers exactly
    what the full path answered."""
    c = master()
    first = put(c, "n1", {"a": "1"})
    rec = c.runtime.service.store.get("n1")
    decision = rec.decision
    again = put(c, "n1", {"a": "1"})
    assert again.status_code == 200 and again.json() == first.json()
    assert c.runtime.service.store.get("n1").decision is decision
    assert "nfd_master_node_update_requests_total 2.0" in c.get("/metrics").text
    # Malformed heartbeats are never answered by the fast path: the full path's 422.
    r = c.post("/api/v1/nodes/n1/heartbeat", json={"digest": 5})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "digest"]


def test_features_answer_is_the_record_serialised(master):
    """New features are taken in front of the routes; the answer is, byte for byte,
    the record as the route serialises it (the decision's part is serialised once and
    shared by every node with that decision)."""
    from nfd.master.api.views import response_dict

    c = master()
    for node, labels in (
        ("n1", {"a": "1", "bad": "no way!"}),
        ("n2", {"a": "1", "bad": "no way!"}),
        ("n1", {"b": "2"}),
    ):
        r = put(c, node, labels)
        rec = c.runtime.service.store.get(node)
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        assert r.content == json.dumps(response_dict(rec)).encode()
        assert r.json()["node"] == node and r.json()["labels"] == {
            f"{FNS}/fixture-{k}": v for k, v in labels.items() if k != "bad"
        }
    assert c.runtime.service.store.get("n1").decision is not c.runtime.service.store.get("n2").decision
    assert "nfd_master_node_update_requests_total 3.0" in c.get("/metrics").text
