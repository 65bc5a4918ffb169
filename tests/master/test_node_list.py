"""GET /api/v1/nodes pages as the Kubernetes API does: limit, continue, a default and a
maximum page size."""

from __future__ import annotations

from nfd.master.api.nodes import DEFAULT_LIMIT, MAX_LIMIT

from .helpers import features_with


def fill(c, n):
    for i in range(n):
        r = c.put(f"/api/v1/nodes/node-{i:03d}/features", json={"features": features_with({"i": str(i)})})
        assert r.status_code == 200


def test_pages_follow_continue_to_the_end_in_name_order(master):
    c = master()
    fill(c, 7)
    seen, pages, cont = [], [], ""
    while True:
        r = c.get("/api/v1/nodes", params={"limit": 3, **({"continue": cont} if cont else {})})
        assert r.status_code == 200
        page = r.json()
        pages.append(len(page["items"]))
        seen += [i["node"] for i in page["items"]]
        assert page["metadata"]["remainingItemCount"] == 7 - len(seen)
        cont = page["metadata"]["continue"]
        if not cont:
            break
    assert pages == [3, 3, 1]
    assert seen == [f"node-{i:03d}" for i in range(7)]
    # Each item is the one-node answer.
    assert (
        c.get("/api/v1/nodes", params={"limit": 1}).json()["items"][0]
        == c.get("/api/v1/nodes/node-000").json()
    )


def test_nodes_removed_between_pages_do_not_break_the_walk(master):
    c = master()
    fill(c, 5)
    first = c.get("/api/v1/nodes", params={"limit": 2}).json()
    c.runtime.service.forget("node-001")  # the last one of the page
    c.runtime.service.forget("node-002")
    rest = c.get("/api/v1/nodes", params={"continue": first["metadata"]["continue"]}).json()
    assert [i["node"] for i in rest["items"]] == ["node-003", "node-004"]


def test_default_and_maximum_page_size(master):
    c = master()
    fill(c, DEFAULT_LIMIT + 1)
    page = c.get("/api/v1/nodes").json()
    assert len(page["items"]) == DEFAULT_LIMIT and page["metadata"]["remainingItemCount"] == 1
    assert c.get("/api/v1/nodes", params={"limit": MAX_LIMIT}).status_code == 200
    for bad in (MAX_LIMIT + 1, 0, -1, "x"):
        r = c.get("/api/v1/nodes", params={"limit": bad})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "limit"]


def test_a_bad_continue_token_is_422(master):
    c = master()
    fill(c, 2)
    for bad in ("!!!", "abc", "AB", "aa" * 254):  # not hex pairs, upper case, too long
        r = c.get("/api/v1/nodes", params={"continue": bad})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "continue"], bad


def test_any_token_the_schema_allows_is_a_place_in_name_order(master):
    c = master()
    fill(c, 3)
    for token, first in (("ff", None), ("00", "node-000"), ("6e6f64652d303030", "node-001")):
        items = c.get("/api/v1/nodes", params={"continue": token}).json()["items"]
        assert (items[0]["node"] if items else None) == first, token


def test_empty_list(master):
    c = master()
    assert c.get("/api/v1/nodes").json() == {
        "items": [],
        "metadata": {"continue": "", "remainingItemCount": 0},
    }
