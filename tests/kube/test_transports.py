"""Both transports of ``nfd.kube`` against the fake API server, with the same cases:
the typed errors, Retry-After, pagination, the token read again, the request counter,
and the list-then-watch loop's relist on 410 Gone and on a broken stream."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nfd.backoff import Backoff
from nfd.kube import errors
from nfd.kube.config import Credentials
from nfd.kube.heavy import HeavyTransport, api_client
from nfd.kube.light import LightTransport
from nfd.kube.listwatch import WatchLoop, pages, watch_path
from nfd.kube.transport import Transport, path
from tests.fakeapi import FakeApiServer

NRT = ("apis", "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies")


def make(kind: str, creds: Credentials, **kw: Any) -> Transport:
    if kind == "light":
        return LightTransport(creds, timeout=5.0, **kw)
    return HeavyTransport(api_client(creds, 4), creds, timeout=5.0, **kw)


@pytest.fixture(params=["light", "heavy"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def api(fake_api: FakeApiServer, kind: str) -> Iterator[Transport]:
    t = make(kind, Credentials(fake_api.url, token=fake_api.admin_token()))
    yield t
    t.close()


def test_answers_are_decoded_json(fake_api: FakeApiServer, api: Transport) -> None:
    fake_api.create_node("n1")
    assert api.request("GET", path("api", "v1", "nodes", "n1"))["metadata"]["name"] == "n1"
    patched = api.request(
        "PATCH",
        path("api", "v1", "nodes", "n1"),
        body=[{"op": "add", "path": "/metadata/labels/a", "value": "b"}],
        content_type="application/json-patch+json",
    )
    assert patched["metadata"]["labels"]["a"] == "b"


def test_errors_are_typed_and_carry_the_servers_message(fake_api: FakeApiServer, api: Transport) -> None:
    with pytest.raises(errors.NotFound) as nf:
        api.request("GET", path("api", "v1", "nodes", "missing"))
    assert nf.value.status == 404 and 'nodes "missing" not found' in nf.value.message
    bad = {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
           "metadata": {"name": "n"}, "zones": [{"name": "node-0"}]}  # fmt: skip
    with pytest.raises(errors.Invalid) as inv:
        api.request("POST", path(*NRT), body=bad)
    assert "'type' is a required property" in inv.value.message
    fake_api.create_node("n1")
    for status, cls in [(409, errors.Conflict), (500, errors.ServerError), (503, errors.ServerError)]:
        fake_api.faults.fail(status, method="GET", path=r"/nodes/n1$")
        with pytest.raises(cls) as e:
            api.request("GET", path("api", "v1", "nodes", "n1"))
        assert e.value.status == status


def test_too_many_requests_carries_retry_after(fake_api: FakeApiServer, api: Transport) -> None:
    fake_api.create_node("n1")
    fake_api.faults.fail(429, method="GET", path=r"/nodes/n1$", retry_after=7)
    with pytest.raises(errors.TooManyRequests) as e:
        api.request("GET", path("api", "v1", "nodes", "n1"))
    assert e.value.retry_after == 7.0
    assert api.request("GET", path("api", "v1", "nodes", "n1"))["metadata"]["name"] == "n1"


def test_unauthorized_and_forbidden(fake_api: FakeApiServer, kind: str) -> None:
    fake_api.require_auth = True
    anonymous = make(kind, Credentials(fake_api.url, token="nobody-knows-me"))
    with pytest.raises(errors.Unauthorized):
        anonymous.request("GET", path("api", "v1", "nodes"))


def test_no_answer_is_unreachable(fake_api: FakeApiServer, kind: str) -> None:
    api = make(kind, Credentials(fake_api.url, token=fake_api.admin_token()))
    fake_api.faults.down(mode="reset")
    with pytest.raises(errors.Unreachable) as e:
        api.request("GET", path("api", "v1", "nodes"))
    assert e.value.status is None and e.value.reason == "unreachable"


def test_a_list_is_read_page_by_page(fake_api: FakeApiServer, api: Transport) -> None:
    for i in range(5):
        fake_api.create_node(f"n{i}")
    got = list(pages(api, path("api", "v1", "nodes"), limit=2))
    assert [len(p["items"]) for p in got] == [2, 2, 1]
    assert sorted(o["metadata"]["name"] for p in got for o in p["items"]) == [f"n{i}" for i in range(5)]


def test_a_rotated_token_file_is_read_at_the_next_request(
    fake_api: FakeApiServer, kind: str, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("not-yet-valid")
    api = make(kind, Credentials(fake_api.url, token_file=str(token)))
    fake_api.create_node("n1")
    fake_api.require_auth = True
    with pytest.raises(errors.Unauthorized):
        api.request("GET", path("api", "v1", "nodes", "n1"))
    token.write_text(fake_api.admin_token())  # the kubelet rotated it
    assert api.request("GET", path("api", "v1", "nodes", "n1"))["metadata"]["name"] == "n1"


def test_each_request_is_counted_by_verb_resource_and_code(fake_api: FakeApiServer, kind: str) -> None:
    seen: list[tuple[str, str, str]] = []
    api = make(kind, Credentials(fake_api.url, token=fake_api.admin_token()), count=lambda *k: seen.append(k))
    fake_api.create_node("n1")
    api.request("GET", path("api", "v1", "nodes", "n1"))
    with pytest.raises(errors.NotFound):
        api.request("DELETE", path("api", "v1", "nodes", "n2"))
    api.request("GET", path("api", "v1", "nodes", labelSelector="a=b"))
    assert seen == [("get", "nodes", "200"), ("delete", "nodes", "404"), ("list", "nodes", "200")]


class Follower:
    """A WatchLoop over nodes in a thread, counting its LISTs and recording events."""

    def __init__(self, api: Transport) -> None:
        self.api = api
        self.lists = 0
        self.events: list[tuple[str, str]] = []
        self.stop = threading.Event()
        self.loop = WatchLoop(
            name="nodes",
            relist=self.relist,
            open_watch=lambda rv: api.watch(watch_path(path("api", "v1", "nodes"), rv, 5), timeout=10),
            on_event=lambda kind, obj: self.events.append((kind, obj["metadata"]["name"])),
            backoff=Backoff(initial=0.05, cap=0.2, jitter=0),
            stop=self.stop,
        )
        self.thread = threading.Thread(target=self.loop.run, kwargs={"resource_version": "1"}, daemon=True)

    def relist(self) -> str:
        self.lists += 1
        rv = ""
        for page in pages(self.api, path("api", "v1", "nodes"), limit=2):
            rv = rv or page["metadata"]["resourceVersion"]
        return rv

    def close(self) -> None:
        self.stop.set()
        self.api.abort()
        self.thread.join(5)


def test_an_expired_resource_version_lists_again(kind: str) -> None:
    with FakeApiServer(watch_history=2) as fake:
        for i in range(5):
            fake.create_node(f"old{i}")  # resourceVersion 1 is long gone from the history
        f = Follower(make(kind, Credentials(fake.url, token=fake.admin_token())))
        f.thread.start()
        try:
            fake.wait_for(lambda: f.lists == 1, what="a LIST after 410 Gone")
            fake.wait_for(lambda: f.loop.resource_version not in ("", "1"), what="the LIST's resourceVersion")
            fake.create_node("new")
            fake.wait_for(lambda: ("ADDED", "new") in f.events, what="the watch resumed after the LIST")
        finally:
            f.close()
        assert f.lists == 1


def test_a_broken_stream_resumes_from_the_last_resource_version(fake_api: FakeApiServer, kind: str) -> None:
    fake_api.create_node("a")
    f = Follower(make(kind, Credentials(fake_api.url, token=fake_api.admin_token())))
    f.loop.resource_version = ""
    f.thread = threading.Thread(target=f.loop.run, daemon=True)  # lists first
    f.thread.start()
    try:
        fake_api.wait_for(lambda: f.lists == 1 and f.loop.resource_version, what="the first LIST")
        fake_api.create_node("b")
        fake_api.wait_for(lambda: ("ADDED", "b") in f.events, what="b's event")
        fake_api.faults.down(0.3, mode="reset")  # the stream ends, and the next tries fail
        fake_api.create_node("c")
        fake_api.wait_for(lambda: ("ADDED", "c") in f.events, timeout=15, what="c's event after the break")
    finally:
        f.close()
    assert f.lists == 1  # resumed, not listed again
    assert f.events.count(("ADDED", "b")) == 1


def test_abort_ends_a_request_waiting_for_its_answer(fake_api: FakeApiServer) -> None:
    # The light transport's own: an agent stopping must not sit out a request's timeout
    # (the master's calls run on daemon threads it leaves behind).
    api = make("light", Credentials(fake_api.url, token=fake_api.admin_token()))
    fake_api.create_node("n1")
    late = fake_api.faults.delay(30, method="GET", path=r"/nodes/n1$")
    failed: list[BaseException] = []

    def ask() -> None:
        try:
            api.request("GET", path("api", "v1", "nodes", "n1"), timeout=20)
        except errors.ApiError as e:
            failed.append(e)

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    fake_api.wait_for(lambda: late.hits, what="the GET at the server")
    api.abort()
    t.join(5)
    assert not t.is_alive() and isinstance(failed[0], errors.Unreachable)
    with pytest.raises(errors.Unreachable, match="stopping"):
        api.request("GET", path("api", "v1", "nodes", "n1"))


def test_path_parts_and_query_values_are_quoted() -> None:
    assert path("api", "v1", "namespaces", "a b/c", "x.y-z_~") == "/api/v1/namespaces/a%20b%2Fc/x.y-z_~"
    assert path("api", "v1", "nodes", fieldSelector="metadata.name=n 1", limit="") == (
        "/api/v1/nodes?fieldSelector=metadata.name%3Dn%201"
    )
