"""The HTTP layer: keep-alive, HTTP/1.0, malformed requests, content types."""

from __future__ import annotations

import http.client
import json
import socket

from tests.fakeapi import FakeApiServer


def test_keep_alive_serves_many_requests_on_one_connection(fake_api: FakeApiServer) -> None:
    fake_api.create_node("n")
    conn = http.client.HTTPConnection("127.0.0.1", fake_api.port, timeout=10)
    for _ in range(20):
        conn.request("GET", "/api/v1/nodes/n", headers={"Accept": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.headers["Content-Type"] == "application/json"
        assert json.loads(resp.read())["metadata"]["name"] == "n"
    conn.close()
    # One connection, twenty requests: no reconnects were needed.
    assert fake_api.log.count(verb="get") == 20


def test_http10_and_malformed_requests(fake_api: FakeApiServer) -> None:
    with socket.create_connection(("127.0.0.1", fake_api.port), timeout=10) as s:
        s.sendall(b"GET /version HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):  # HTTP/1.0: the server closes after answering
            data += chunk
    assert data.startswith(b"HTTP/1.1 200") and b'"major":"1"' in data
    with socket.create_connection(("127.0.0.1", fake_api.port), timeout=10) as s:
        s.sendall(b"NONSENSE\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 400")
    with socket.create_connection(("127.0.0.1", fake_api.port), timeout=10) as s:
        s.sendall(b"GET /version HTTP/1.1\r\nno colon here\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 400")
    # Still serving.
    conn = http.client.HTTPConnection("127.0.0.1", fake_api.port, timeout=10)
    conn.request("GET", "/healthz")
    resp = conn.getresponse()
    assert (resp.status, resp.read()) == (200, b"ok")
    conn.close()


def test_bad_json_body_is_400(fake_api: FakeApiServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", fake_api.port, timeout=10)
    conn.request("POST", "/api/v1/nodes", body=b"{not json", headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    body = json.loads(resp.read())
    assert resp.status == 400 and body["reason"] == "BadRequest" and body["code"] == 400
    conn.request("DELETE", "/api/v1/nodes/n/status")
    resp = conn.getresponse()
    assert resp.status == 405 and json.loads(resp.read())["reason"] == "MethodNotAllowed"
    conn.close()


def test_dry_run_is_refused_not_written(fake_api: FakeApiServer) -> None:
    fake_api.create_node("n")
    conn = http.client.HTTPConnection("127.0.0.1", fake_api.port, timeout=10)
    body = json.dumps({"metadata": {"labels": {"a": "1"}}})
    conn.request(
        "PATCH",
        "/api/v1/nodes/n?dryRun=All",
        body=body,
        headers={"Content-Type": "application/merge-patch+json"},
    )
    resp = conn.getresponse()
    assert resp.status == 400 and "dryRun" in json.loads(resp.read())["message"]
    conn.close()
    assert "a" not in fake_api.labels("n")


def test_odd_bodies_get_status_answers(fake_api: FakeApiServer) -> None:
    fake_api.create_node("n")
    conn = http.client.HTTPConnection("127.0.0.1", fake_api.port, timeout=10)
    for method, path, body in [
        ("POST", "/api/v1/nodes", {"metadata": ["not", "an", "object"]}),
        ("PUT", "/api/v1/nodes/n", [1, 2]),
        ("DELETE", "/api/v1/nodes/n", "just a string"),
    ]:
        conn.request(method, path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        status = json.loads(resp.read())
        assert resp.status == 400 and status["kind"] == "Status" and status["code"] == 400, (method, status)
    conn.close()
    assert fake_api.node("n")["metadata"]["name"] == "n"
