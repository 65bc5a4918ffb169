"""Every bad request to the worker endpoints gets a 4xx that says why, in one shape, and
costs bounded work: nesting, encodings, node names, methods, the token before the body."""

from __future__ import annotations

import logging

import pytest

from nfd.master.api.jsonbody import MAX_DEPTH

from .helpers import features_with
from .test_auth import authed  # noqa: F401  (fixture)

NAMES = ["a..b", "a.-b", "a-.b", "-a", "a-", ".a", "a.", "A", "a_b", "a" * 254, "a\nb", "a/b", ""]


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("kind", ["features", "heartbeat"])
def test_nesting_up_to_the_limit_is_json_beyond_it_422(master, kind):
    c = master()
    method = c.put if kind == "features" else c.post
    for opener, closer in ((b"[", b"]"), (b'{"a":', b"}")):
        ok = b'{"digest": "x", "x": ' + opener * (MAX_DEPTH - 1) + b"1" + closer * (MAX_DEPTH - 1) + b"}"
        r = method(f"/api/v1/nodes/n1/{kind}", content=ok)
        assert r.status_code in (200, 409, 422) and "json_too_deep" not in r.text  # parsed
        deep = opener * (MAX_DEPTH + 2) + b"1" + closer * (MAX_DEPTH + 2)
        r = method(f"/api/v1/nodes/n1/{kind}", content=deep)
        assert r.status_code == 422 and r.json()["detail"][0]["type"] == "json_too_deep"


@pytest.mark.parametrize("kind", ["features", "heartbeat"])
def test_deeply_nested_body_is_422_and_logs_no_error(master, caplog, kind):
    c = master()
    method = c.put if kind == "features" else c.post
    caplog.set_level(logging.WARNING)
    for body in (nested(1000), b'{"digest": "x", "features": ' + nested(100_000) + b"}"):
        r = method(f"/api/v1/nodes/n1/{kind}", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0] == {
            "loc": ["body"], "msg": f"JSON nests deeper than {MAX_DEPTH} levels", "type": "json_too_deep"
        }  # fmt: skip
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert c.get("/api/v1/nodes").json()["items"] == []


@pytest.mark.parametrize("kind", ["features", "heartbeat"])
def test_body_not_utf8_is_422_in_the_documented_shape(master, kind):
    c = master()
    method = c.put if kind == "features" else c.post
    r = method(f"/api/v1/nodes/n1/{kind}", content=b'{"digest": "\xff\xfe"}')
    assert r.status_code == 422
    assert r.json()["detail"] == [
        {"loc": ["body"], "msg": "the body is not UTF-8 (byte 12)", "type": "utf8_invalid"}
    ]
    spec = c.get("/openapi.json").json()
    op = spec["paths"][f"/api/v1/nodes/{{node}}/{kind}"]["put" if kind == "features" else "post"]
    assert op["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/HTTPValidationError"
    )
    assert {"200", "401", "403", "405", "413", "422", "503"} <= set(op["responses"])


def test_the_token_is_checked_before_the_body(authed):  # noqa: F811
    c, _ = authed
    for path in ("/api/v1/nodes/a/heartbeat", "/api/v1/nodes/a/features"):
        method = c.post if path.endswith("heartbeat") else c.put
        for body in (b"\xff\xfe", nested(1000), b"{not json"):
            assert method(path, content=body).status_code == 401
            r = method(path, content=body, headers={"Authorization": "Bearer someone"})
            assert r.status_code == 403
            r = method(path, content=body, headers={"Authorization": "Bearer node-a"})
            assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body"]


@pytest.mark.parametrize("name", NAMES)
def test_node_names_are_dns_subdomains_on_every_path(master, name):
    c = master()
    from urllib.parse import quote

    q = quote(name, safe="")
    body = {"features": features_with({"a": "1"})}
    r = c.put(f"/api/v1/nodes/{q}/features", json=body)
    assert r.status_code == 422, (name, r.status_code)
    assert c.post(f"/api/v1/nodes/{q}/heartbeat", json={"digest": "x"}).status_code == 422
    if name and "/" not in name:
        r = c.get(f"/api/v1/nodes/{q}")
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["path", "node"]
    assert c.get("/api/v1/nodes").json()["items"] == []


def test_valid_names_are_taken(master):
    c = master()
    for name in ("a", "a.b", "a-b.c-d", "0", "a" * 63 + "." + "b" * 63, "x" * 253):
        assert c.put(f"/api/v1/nodes/{name}/features", json={"features": {}}).status_code == 200, name
        assert c.get(f"/api/v1/nodes/{name}").status_code == 200


def test_a_newline_after_the_path_is_not_the_endpoint(master):
    c = master()
    body = {"features": features_with({"a": "1"})}
    r = c.put("/api/v1/nodes/n9/features%0A", json=body)
    assert r.status_code == 404
    r = c.post("/api/v1/nodes/n9/heartbeat%0A", json={"digest": "x"})
    assert r.status_code == 404
    assert c.get("/api/v1/nodes").json()["items"] == []


def test_wrong_method_is_405_with_allow(master):
    c = master()
    r = c.get("/api/v1/nodes/n1/features")
    assert r.status_code == 405 and r.headers["allow"] == "PUT" and "PUT" in r.json()["detail"]
    r = c.put("/api/v1/nodes/n1/heartbeat", json={"digest": "x"})
    assert r.status_code == 405 and r.headers["allow"] == "POST"
