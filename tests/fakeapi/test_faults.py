"""Fault injection and the request log, seen through the real client."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.fakeapi import FakeApiServer


def test_next_n_matching_requests_fail(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n")
    rule = fake_api.faults.fail(409, times=2, method="PATCH", path=r"^/api/v1/nodes/n$")
    patch = [{"op": "add", "path": "/metadata/labels/a", "value": "1"}]
    for _ in range(2):
        with pytest.raises(ApiException) as e:
            core_v1.patch_node("n", patch)
        assert e.value.status == 409 and json.loads(e.value.body)["reason"] == "Conflict"
    core_v1.read_node("n")  # other methods were never affected
    assert core_v1.patch_node("n", patch).metadata.labels["a"] == "1"
    assert rule.hits == 2
    assert [r.status for r in fake_api.log.records(verb="patch")] == [409, 409, 200]


@pytest.mark.parametrize(
    ("code", "reason"), [(422, "Invalid"), (500, "InternalError"), (503, "ServiceUnavailable")]
)
def test_failure_codes(fake_api: FakeApiServer, core_v1: Any, code: int, reason: str) -> None:
    fake_api.create_node("n")
    fake_api.faults.fail(code, verb="patch", resource="nodes/status")
    with pytest.raises(ApiException) as e:
        core_v1.patch_node_status("n", {"status": {"capacity": {"example.com/x": "1"}}})
    body = json.loads(e.value.body)
    assert e.value.status == code and body["code"] == code and body["reason"] == reason
    assert "example.com/x" not in fake_api.capacity("n")


def test_too_many_requests_has_retry_after(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n")
    fake_api.faults.fail(429, verb="patch", resource="nodes", retry_after=3)
    with pytest.raises(ApiException) as e:
        core_v1.patch_node("n", {"metadata": {"labels": {"a": "1"}}})
    assert e.value.status == 429
    assert e.value.headers["Retry-After"] == "3"
    body = json.loads(e.value.body)
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 3


def test_client_retries_get_after_retry_after_by_itself(fake_api: FakeApiServer, core_v1: Any) -> None:
    """What the real client does with a 429 on a GET: urllib3 waits Retry-After and
    tries again, so the caller sees success and the log shows both answers."""
    fake_api.create_node("n")
    fake_api.faults.fail(429, verb="get", resource="nodes", retry_after=0)
    assert core_v1.read_node("n").metadata.name == "n"
    assert [r.status for r in fake_api.log.records(verb="get")] == [429, 200]


def test_latency(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n")
    rule = fake_api.faults.delay(0.3, times=1, verb="get")
    start = time.monotonic()
    core_v1.read_node("n")
    assert time.monotonic() - start >= 0.3  # the delay happened (a lower bound, not a speed check)
    assert rule.hits == 1
    assert fake_api.log.records(verb="get")[-1].duration >= 0.3


def test_down_with_503_then_back(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n")
    fake_api.faults.down()
    with pytest.raises(ApiException) as e:
        core_v1.list_node()
    assert e.value.status == 503
    fake_api.faults.up()
    assert len(core_v1.list_node().items) == 1


def test_down_for_a_while_comes_back_by_itself(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n")
    fake_api.faults.down(0.3)
    with pytest.raises(ApiException):
        core_v1.read_node("n")
    time.sleep(0.35)
    assert core_v1.read_node("n").metadata.name == "n"


def test_down_reset_drops_connections(fake_api: FakeApiServer) -> None:
    fake_api.create_node("n")
    conf = fake_api.configuration()
    conf.retries = 0  # see the failure itself, not urllib3's retries of it
    with client.ApiClient(conf) as api_client:
        v1 = client.CoreV1Api(api_client)
        v1.read_node("n")  # a kept-alive connection exists
        fake_api.faults.down(mode="reset")
        with pytest.raises(urllib3.exceptions.HTTPError):
            v1.read_node("n")
        fake_api.faults.up()
        assert v1.read_node("n").metadata.name == "n"
    assert fake_api.log.records(status=0)  # the dropped request is in the log


def test_request_log_counts(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n")
    core_v1.list_node()
    mark = fake_api.log.mark()
    core_v1.read_node("n")
    core_v1.read_node("n")
    core_v1.patch_node("n", {"metadata": {"labels": {"a": "1"}}})
    core_v1.patch_node_status("n", {"status": {"capacity": {"example.com/x": "1"}}})
    counts = fake_api.log.counts(since=mark)
    assert counts == {("get", "nodes"): 2, ("patch", "nodes"): 1, ("patch", "nodes/status"): 1}
    assert fake_api.log.count(since=mark, verb="list") == 0
    assert fake_api.log.count(since=mark, resource="nodes") == 4  # "nodes" includes its subresources
    assert fake_api.log.count(since=mark, resource="nodes/status") == 1
    assert len(fake_api.log.writes(since=mark)) == 2
    assert fake_api.log.count(verb="list", resource="nodes") == 1
    rec = fake_api.log.records(since=mark, verb="patch", resource="nodes/status")[0]
    assert (rec.method, rec.path, rec.name, rec.status) == ("PATCH", "/api/v1/nodes/n/status", "n", 200)


def test_many_concurrent_clients(fake_api: FakeApiServer) -> None:
    """Threads with their own connections patch different nodes at once; every write lands."""
    for i in range(20):
        fake_api.create_node(f"n{i}")
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            with fake_api.api_client() as api_client:
                v1 = client.CoreV1Api(api_client)
                for j in range(10):
                    v1.patch_node(f"n{i}", [{"op": "add", "path": f"/metadata/labels/l{j}", "value": str(j)}])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(20):
        labels = fake_api.labels(f"n{i}")
        assert all(labels[f"l{j}"] == str(j) for j in range(10))
    assert fake_api.log.count(verb="patch", status=200) == 200


def test_wait_for_sees_changes_from_other_threads(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n")

    def later() -> None:
        time.sleep(0.1)
        core_v1.patch_node("n", {"metadata": {"labels": {"ready": "yes"}}})

    t = threading.Thread(target=later)
    t.start()
    labels = fake_api.wait_for(lambda: fake_api.labels("n").get("ready"), timeout=10, what="label ready")
    t.join()
    assert labels == "yes"
    with pytest.raises(TimeoutError, match="never"):
        fake_api.wait_for(lambda: False, timeout=0.1, what="never")


def test_stop_start_is_a_restart_with_refused_connections(fake_api: FakeApiServer) -> None:
    fake_api.create_node("n")
    conf = fake_api.configuration()
    conf.retries = 0
    with client.ApiClient(conf) as api_client:
        v1 = client.CoreV1Api(api_client)
        rv = v1.read_node("n").metadata.resource_version
        port = fake_api.port
        fake_api.stop()
        with pytest.raises(urllib3.exceptions.HTTPError):
            v1.read_node("n")
        fake_api.start()
        assert fake_api.port == port
        node = v1.read_node("n")  # same state after the restart
        assert node.metadata.resource_version == rv


def test_overload_answers_429_with_retry_after_beyond_its_rate(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n")
    o = fake_api.faults.overload(5, burst=3, retry_after=2, verb="patch")
    statuses = []
    for i in range(10):
        try:
            core_v1.patch_node("n", {"metadata": {"labels": {"a": str(i)}}})
            statuses.append(200)
        except ApiException as e:
            assert e.headers["Retry-After"] == "2"
            assert json.loads(e.body)["reason"] == "TooManyRequests"
            statuses.append(e.status)
    assert statuses[:3] == [200, 200, 200] and 429 in statuses[3:]
    assert o.admitted + o.rejected == 10 and o.rejected >= 5
    core_v1.read_node("n")  # other verbs are not limited
    time.sleep(0.5)  # the rate refills
    core_v1.patch_node("n", {"metadata": {"labels": {"a": "again"}}})
