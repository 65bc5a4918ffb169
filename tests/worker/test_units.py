"""The worker's parts on their own: client, error handling, debounce, watcher,
device-plugin resource names."""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from worker.worker_helpers import free_port, wait_until

from nfd.backoff import Backoff
from nfd.config import SourcesConfig
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.worker.client import MasterClient, MasterUnreachable, Reply, parse_retry_after
from nfd.worker.debounce import Debouncer
from nfd.worker.hotplug import MonitorUnavailable, UdevMonitor
from nfd.worker.loop import Worker
from nfd.worker.watch import DirWatcher


class Scripted:
    """A loopback HTTP server answering from a script of (status, body, headers), recording
    what it was sent. Used for the answers a well-behaved master gives rarely (403, 422,
    503 with Retry-After) and for the headers a worker sends."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, Any, dict[str, str]]] = []
        self.hang_up = False  # close each connection after answering, without saying so
        self.seen: list[dict[str, Any]] = []
        script = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                script.seen.append(
                    {"method": self.command, "path": self.path, "auth": self.headers.get("Authorization"),
                     "body": json.loads(self.rfile.read(n) or b"null")}
                )  # fmt: skip
                status, body, headers = (
                    script.answers.pop(0) if script.answers else (200, {"known": True}, {})
                )
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                if script.hang_up:
                    self.close_connection = True

            do_PUT = do_POST = _any

            def log_message(self, *a: object) -> None:
                pass

        # Threads per connection, as daemons: a worker's kept-alive connection must not
        # hold up the server's shutdown.
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    s = Scripted()
    yield s
    s.close()


class OneFeature:
    name = "system"

    def __init__(self) -> None:
        self.value = "1"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        f = Features()
        f.set_attributes("system.test", {"v": self.value})
        return f

    def labels(self, features: Features, config: SourcesConfig) -> dict[str, str]:
        return {}


def make_worker(url: str, tmp_path: Path, **kw: Any) -> Worker:
    return Worker(
        node="n/1", sources=[OneFeature()], host=HostRoot.under(tmp_path), config=SourcesConfig(),
        client=MasterClient(url, token_file=kw.pop("token_file", None)),
        backoff=Backoff(rng=random.Random(1)), **kw,
    )  # fmt: skip


# -- client ---------------------------------------------------------------------------


def test_a_rotated_token_is_sent_and_a_missing_one_is_left_out(scripted: Scripted, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    client = MasterClient(scripted.url, token_file=token)
    client.heartbeat("n", "d")
    token.write_text("rotated")
    client.heartbeat("n", "d")
    token.unlink()
    client.heartbeat("n", "d")
    assert [s["auth"] for s in scripted.seen] == ["Bearer first", "Bearer rotated", None]
    assert scripted.seen[0]["path"] == "/api/v1/nodes/n/heartbeat"


def test_node_names_are_quoted_and_a_url_prefix_is_kept(scripted: Scripted) -> None:
    MasterClient(scripted.url + "/nfd/").put_features("a/b", {"x": 1})
    assert scripted.seen[0]["path"] == "/nfd/api/v1/nodes/a%2Fb/features"


def test_a_connection_the_master_dropped_is_replaced(scripted: Scripted) -> None:
    scripted.hang_up = True
    client = MasterClient(scripted.url)
    replies = []
    for _ in range(3):
        replies.append(client.heartbeat("n", "d").status)
        time.sleep(0.05)  # let the hang-up arrive
    assert replies == [200, 200, 200]


def test_unreachable_master_raises(tmp_path: Path) -> None:

    with pytest.raises(MasterUnreachable, match="connection refused"):
        MasterClient(f"http://127.0.0.1:{free_port()}").heartbeat("n", "d")


def test_retry_after_and_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    monkeypatch.setenv("TZ", "America/New_York")  # asctime's form is GMT whatever the local zone
    time.tzset()
    try:
        assert parse_retry_after("Wed Oct 21 07:28:10 2015", now=1445412480.0) == 10.0
    finally:
        monkeypatch.undo()
        time.tzset()
    assert parse_retry_after("soon") is None
    r422 = Reply(422, {"detail": [{"loc": ["body", "digest"], "msg": "Field required", "type": "missing"}]})
    assert r422.reason() == "HTTP 422: body.digest: Field required"
    assert (
        Reply(403, {"detail": "token is bound to node other"}).reason()
        == "HTTP 403: token is bound to node other"
    )
    assert Reply(502, None).reason() == "HTTP 502"


# -- the pass -------------------------------------------------------------------------


def test_full_then_heartbeat_then_full_again_on_409(scripted: Scripted, tmp_path: Path) -> None:
    w = make_worker(scripted.url, tmp_path, device_plugin_resources=["b.io/x", "a.io/y"])
    scripted.answers = [(200, {"labels": {}}, {}), (200, {"known": True}, {}),
                        (409, {"known": False, "detail": "restarted"}, {}), (200, {}, {})]  # fmt: skip
    outcomes = [w.run_pass() for _ in range(3)]
    assert [o.sent for o in outcomes] == ["features", "heartbeat", "features"]
    kinds = [(s["method"], s["path"].rsplit("/", 1)[1]) for s in scripted.seen]
    assert kinds == [("PUT", "features"), ("POST", "heartbeat"), ("POST", "heartbeat"), ("PUT", "features")]
    body = scripted.seen[0]["body"]
    assert body["digest"] == scripted.seen[1]["body"]["digest"] == w.discover().digest()
    assert body["devicePluginResources"] == ["a.io/y", "b.io/x"]
    assert body["features"]["attributes"]["system.test"] == {"elements": {"v": "1"}}
    assert scripted.seen[0]["path"] == "/api/v1/nodes/n%2F1/features"


@pytest.mark.parametrize("status", [403, 413, 422])
def test_client_errors_wait_for_the_interval(scripted: Scripted, tmp_path: Path, status: int) -> None:
    w = make_worker(scripted.url, tmp_path)
    scripted.answers = [(status, {"detail": "no, because"}, {})]
    o = w.run_pass()
    assert not o.delivered and o.retry_in is None
    assert o.reason == f"master refused the features: HTTP {status}: no, because"


@pytest.mark.parametrize("status", [401, 429, 500, 503])
def test_busy_or_broken_master_means_backoff(scripted: Scripted, tmp_path: Path, status: int) -> None:
    w = make_worker(scripted.url, tmp_path)
    scripted.answers = [(status, {"detail": "later"}, {"Retry-After": "30"})]
    o = w.run_pass()
    assert not o.delivered and o.retry_in is not None and o.retry_in >= 30  # Retry-After honoured


def test_the_newest_features_go_out_after_failures(scripted: Scripted, tmp_path: Path) -> None:
    w = make_worker(scripted.url, tmp_path)
    source = w.sources[0]
    scripted.answers = [(503, {}, {}), (503, {}, {}), (200, {}, {})]
    w.run_pass()
    source.value = "2"  # type: ignore[attr-defined]
    w.run_pass()
    source.value = "3"  # type: ignore[attr-defined]
    assert w.run_pass().delivered
    assert scripted.seen[-1]["body"]["features"]["attributes"]["system.test"]["elements"] == {"v": "3"}
    assert w.backoff.failures == 0


# -- master away, debounce ------------------------------------------------------------


def test_a_restarting_master_is_found_soon_and_a_busy_one_is_left_alone(
    scripted: Scripted, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Fails on main: while the master refused connections the waits grew 1, 2, 4, 8 ... s
    # (to 60), so a master Ready again was found up to a minute late.
    w = make_worker(f"http://127.0.0.1:{free_port()}", tmp_path)
    with caplog.at_level(logging.DEBUG, logger="nfd.worker.loop"):
        waits = [w.run_pass().retry_in for _ in range(12)]
    # Each retry comes within 2 s of the last: the labels are sent again within 2 s (and
    # a pass) of the master being back, however long it was away.
    assert all(wait is not None and 0.5 <= wait <= 2 for wait in waits), waits
    said = [r.levelname for r in caplog.records if "unreachable" in r.getMessage()]
    assert said == ["WARNING"] + ["DEBUG"] * 11  # once as it starts, not every 2 s
    # A master that answers 503 is busy: it gets the long backoff, as before.
    w.client = MasterClient(scripted.url)
    scripted.answers = [(503, {"detail": "busy"}, {})]
    assert (w.run_pass().retry_in or 0) > 2
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="nfd.worker.loop"):
        assert w.run_pass().delivered
    assert [r.getMessage() for r in caplog.records] == [
        f"master {scripted.url} answers again after 13 failed attempt(s)"
    ]


def test_only_a_connection_nobody_took_means_down(tmp_path: Path) -> None:
    with pytest.raises(MasterUnreachable) as refused:
        MasterClient(f"http://127.0.0.1:{free_port()}").heartbeat("n", "d")
    assert refused.value.down
    with socket.socket() as silent:  # listens, never answers: busy or stuck, not down
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        client = MasterClient(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.2)
        with pytest.raises(MasterUnreachable, match="timed out") as timed_out:
            client.heartbeat("n", "d")
    assert not timed_out.value.down


def test_debouncer_folds_a_burst_into_one_call() -> None:
    calls: list[str] = []
    d = Debouncer(0.1, calls.append)
    for i in range(20):
        d.event(f"e{i}")
    wait_until(lambda: calls, what="the call")
    time.sleep(0.3)
    assert calls == ["e19"]
    d.event("again")
    wait_until(lambda: len(calls) == 2, what="the second call")
    d.close()


# -- features.d watcher ---------------------------------------------------------------


@pytest.mark.parametrize("use_inotify", [True, False])
def test_watcher_sees_create_modify_delete_and_a_late_directory(tmp_path: Path, use_inotify: bool) -> None:
    d = tmp_path / "features.d"
    seen: list[str] = []
    w = DirWatcher(d, seen.append, use_inotify=use_inotify)
    w.start()
    try:
        wait_until(lambda: w.mode == "poll", what="polling for the missing directory")
        d.mkdir()
        wait_until(lambda: seen, what="the directory appearing")
        if use_inotify:
            wait_until(lambda: w.mode == "inotify", what="inotify once the directory exists")
        for step in (lambda: (d / "a").write_text("x=1\n"), lambda: (d / "a").write_text("x=22\n"),
                     lambda: (d / "a").unlink()):  # fmt: skip
            n = len(seen)
            step()
            wait_until(lambda n=n: len(seen) > n, what="a change")
        assert any("a" in s for s in seen[1:])
    finally:
        w.stop()


# -- hot-plug ---------------------------------------------------


def test_udev_monitor_starts_or_says_why_not() -> None:
    m = UdevMonitor()
    try:
        m.start(lambda reason: None)
    except MonitorUnavailable as e:
        assert str(e)  # a reason to log
    finally:
        m.stop()


class Broken:
    name = "kernel"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        raise OSError("unreadable")

    def labels(self, features: Features, config: SourcesConfig) -> dict[str, str]:
        return {}


def test_a_failing_source_costs_nothing_else(scripted: Scripted, tmp_path: Path) -> None:
    from nfd.worker.metrics import WorkerMetrics

    metrics = WorkerMetrics("n")
    w = Worker(
        node="n", sources=[Broken(), OneFeature()], host=HostRoot.under(tmp_path), config=SourcesConfig(),
        client=MasterClient(scripted.url), metrics=metrics,
    )  # fmt: skip
    assert w.run_pass().delivered
    assert "system.test" in scripted.seen[0]["body"]["features"]["attributes"]
    assert b'nfd_worker_source_errors_total{source="kernel"} 1.0' in metrics.exposition()
    w.client.close()


def test_healthz_fails_when_a_pass_is_stuck(tmp_path: Path) -> None:
    from nfd.worker.agent import STUCK_PASS, Agent

    w = make_worker("http://127.0.0.1:9", tmp_path)
    agent = Agent(w, interval=3600)
    assert agent.health() == (False, "scheduler not running")
    agent.scheduler._started = True  # as after start(), without running passes
    agent.scheduler._sched.start(paused=True)
    try:
        assert agent.health() == (True, "ok")
        w.pass_started = time.monotonic() - STUCK_PASS - 1
        ok, why = agent.health()
        assert not ok and why.startswith("a pass has been running for")
    finally:
        agent.scheduler._sched.shutdown(wait=False)


def test_status_server_answers_probes_while_a_client_holds_a_connection() -> None:
    import http.client
    import socket

    from nfd.worker.metrics import StatusServer, WorkerMetrics

    server = StatusServer(WorkerMetrics("n"), lambda: (True, "ok"), host="127.0.0.1", port=0)
    server.start()
    try:
        idle = socket.create_connection(("127.0.0.1", server.port))  # says nothing
        scraper = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        scraper.request("GET", "/metrics")
        assert scraper.getresponse().read().startswith(b"# HELP")
        probe = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        probe.request("GET", "/healthz")
        assert probe.getresponse().read() == b"ok\n"
        idle.close()
    finally:
        server.stop()


def test_status_server_answers_odd_requests_plainly() -> None:
    import http.client
    import socket

    from nfd.worker.metrics import StatusServer, WorkerMetrics

    server = StatusServer(WorkerMetrics("n"), lambda: (False, "master unreachable"), host="127.0.0.1", port=0)
    server.start()
    try:

        def ask(method: str, path: str) -> tuple[int, bytes]:
            c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
            c.request(method, path)
            r = c.getresponse()
            return r.status, r.read()

        assert ask("GET", "/healthz") == (503, b"master unreachable\n")
        assert ask("GET", "/nope") == (404, b"not found\n")
        assert ask("POST", "/metrics")[0] == 405
        assert ask("HEAD", "/metrics") == (200, b"")
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(b"garbage\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.0 400 ")
    finally:
        server.stop()


def test_nodefeature_publisher_gives_up_on_an_api_server_that_does_not_answer(fake_api: Any) -> None:
    # The pass fails as with a master that does not answer (the worker backs off),
    # instead of waiting on the API server for good.
    from nfd.kube.config import Credentials
    from nfd.kube.light import LightTransport
    from nfd.worker.nodefeature_publisher import NodeFeaturePublisher

    api = LightTransport(Credentials(fake_api.url, token=fake_api.admin_token()), timeout=0.3)
    pub = NodeFeaturePublisher(api, namespace="nfd", labels_of=lambda f: {})
    fake_api.faults.delay(60, method="GET", path=r"/nodefeatures/n1$")
    with pytest.raises(MasterUnreachable, match=r"timed out"):
        pub.heartbeat("n1", "digest")
    fake_api.faults.clear()
    assert pub.heartbeat("n1", "digest").body == {"known": False}


# -- big groups by ref ----------------------------------------------------------------


class BigFeature(OneFeature):
    """A group as big as a kernel config (past ``REF_MIN_BYTES``), and a small one."""

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        f = super().discover(host, config)
        f.set_attributes("kernel.config", {f"CONFIG_OPTION_{i:04d}": "y" for i in range(400)})
        return f


def big_worker(url: str, tmp_path: Path) -> Worker:
    return Worker(
        node="n1", sources=[BigFeature()], host=HostRoot.under(tmp_path), config=SourcesConfig(),
        client=MasterClient(url), backoff=Backoff(rng=random.Random(1)),
    )  # fmt: skip


def test_a_big_group_goes_by_its_hash_and_whole_when_the_master_lacks_it(
    scripted: Scripted, tmp_path: Path
) -> None:
    w = big_worker(scripted.url, tmp_path)
    enc = w.discover().encoded()
    ref = next(h for kind, name, h, _ in enc.parts if name == "kernel.config")
    missing = {"known": False, "missing": ["attributes/kernel.config"], "detail": "send them whole"}
    scripted.answers = [(409, missing, {}), (200, {"labels": {}}, {}), (200, {"labels": {}}, {})]
    assert w.run_pass().delivered
    first, second = (s["body"]["features"]["attributes"] for s in scripted.seen)
    assert first["kernel.config"] == {"elements": None, "ref": ref}
    assert first["system.test"] == {"elements": {"v": "1"}}  # small groups go whole
    assert len(second["kernel.config"]["elements"]) == 400
    assert scripted.seen[0]["body"]["digest"] == scripted.seen[1]["body"]["digest"] == enc.digest
    # A master that holds the group takes the ref: one PUT.
    w.sources[0].value = "2"
    assert w.run_pass().delivered
    assert len(scripted.seen) == 3
    assert scripted.seen[2]["body"]["features"]["attributes"]["kernel.config"] == {
        "elements": None,
        "ref": ref,
    }


def test_a_master_that_takes_no_refs_gets_whole_features_from_then_on(
    scripted: Scripted, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nfd.worker.loop")
    w = big_worker(scripted.url, tmp_path)
    old = {"detail": [{"loc": ["body", "features", "attributes", "kernel.config", "elements"],
                       "msg": "Input should be a valid dictionary", "type": "dict_type"}]}  # fmt: skip
    scripted.answers = [(422, old, {}), (200, {"labels": {}}, {}), (200, {"labels": {}}, {})]
    assert w.run_pass().delivered
    w.sources[0].value = "2"
    assert w.run_pass().delivered
    sent = [s["body"]["features"]["attributes"]["kernel.config"]["elements"] for s in scripted.seen]
    assert [e is None for e in sent] == [True, False, False]
    assert "takes no group refs" in caplog.text


def test_the_nodefeature_writer_gets_every_group_whole() -> None:
    from nfd.worker.nodefeature_publisher import Both, NodeFeaturePublisher

    assert MasterClient.takes_refs and not NodeFeaturePublisher.takes_refs and not Both.takes_refs
