"""The worker's Prometheus metrics, and the tiny /healthz + /metrics server the node
daemons share (worker, device plugin, DRA driver).

Names follow upstream's worker (``nfd_worker_build_info``, the discovery duration
histogram with upstream's buckets); the delivery counters are ours.
"""

from __future__ import annotations

import logging
import socketserver
import threading
from collections.abc import Callable
from typing import Protocol

from nfd.promtext import CONTENT_TYPE, Counter, Histogram, Registry, build_info

log = logging.getLogger(__name__)

# Upstream's nfd-worker buckets for feature discovery time.
DISCOVERY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class WorkerMetrics:
    """One registry per worker (no process-global state: tests run several)."""

    def __init__(self, node: str) -> None:
        self.registry = Registry()
        self.node = node
        build = build_info("nfd_worker_build_info", "Version from which Node Feature Discovery was built.")
        self._discovery = Histogram(
            "nfd_worker_feature_discovery_duration_seconds",
            "Time taken to discover features",
            ["node"],
            buckets=DISCOVERY_BUCKETS,
        )
        self._requests = Counter(
            "nfd_worker_master_requests_total",
            "Requests to the master, by kind (features, heartbeat) and result "
            "(ok, unknown, rejected, retry, unreachable).",
            ["kind", "result"],
        )
        self._source_errors = Counter(
            "nfd_worker_source_errors_total", "Feature source failures during discovery.", ["source"]
        )
        for family in (build, self._discovery, self._requests, self._source_errors):
            self.registry.add(family)

    def discovery_took(self, seconds: float) -> None:
        self._discovery.observe(seconds, node=self.node)

    def request(self, kind: str, result: str) -> None:
        self._requests.inc(kind=kind, result=result)

    def source_failed(self, source: str) -> None:
        self._source_errors.inc(source=source)

    def exposition(self) -> bytes:
        return self.registry.exposition()


class Exposition(Protocol):
    """Metrics in Prometheus' text format: the worker's, the topology updater's, the
    device plugin's (each serves them with this server)."""

    def exposition(self) -> bytes: ...


class StatusServer:
    """/healthz and /metrics on one port: a listening daemon thread, and one short-lived
    thread per connection.

    Built on socketserver rather than http.server: http.server imports shutil, which maps
    the bz2 and lzma libraries, about 1.5 MB of the worker's memory for two GET routes.
    """

    def __init__(
        self,
        metrics: Exposition,
        healthy: Callable[[], tuple[bool, str]],
        *,
        host: str = "0.0.0.0",
        port: int = 8081,
    ) -> None:
        handler = _handler_class(metrics, healthy)
        # A thread per connection (gone when it closes): a client that connects and says
        # nothing must not hold up the kubelet's probe.
        self._server = socketserver.ThreadingTCPServer((host, port), handler, bind_and_activate=False)
        self._server.allow_reuse_address = True
        self._server.daemon_threads = True
        try:
            self._server.server_bind()
            self._server.server_activate()
        except OSError:
            self._server.server_close()
            raise
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="nfd-status", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}
_TEXT = "text/plain; charset=utf-8"
_MAX_LINE = 8192
_MAX_HEADERS = 100


def _handler_class(
    metrics: Exposition, healthy: Callable[[], tuple[bool, str]]
) -> type[socketserver.StreamRequestHandler]:
    class Handler(socketserver.StreamRequestHandler):
        # Give up on a silent client, and close after each answer (HTTP/1.0): no
        # connection, nor its thread, outlives a scrape or a probe by much.
        timeout = 5

        def handle(self) -> None:
            try:
                request = self.rfile.readline(_MAX_LINE + 1)
                for _ in range(_MAX_HEADERS):  # headers are read and ignored
                    line = self.rfile.readline(_MAX_LINE + 1)
                    if line in (b"\r\n", b"\n", b""):
                        break
            except OSError:  # timed out or reset: nothing to answer
                return
            parts = request.decode("latin-1").split()
            if len(parts) != 3 or not parts[2].startswith("HTTP/") or len(request) > _MAX_LINE:
                self._answer(400, b"bad request\n", _TEXT)
                return
            method, target = parts[0], parts[1].split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                self._answer(405, b"method not allowed\n", _TEXT)
            elif target == "/metrics":
                self._answer(200, metrics.exposition(), CONTENT_TYPE, head=method == "HEAD")
            elif target in ("/healthz", "/livez", "/readyz"):
                ok, why = healthy()
                self._answer(200 if ok else 503, (why + "\n").encode(), _TEXT, head=method == "HEAD")
            else:
                self._answer(404, b"not found\n", _TEXT)
            log.debug("status server: %s %s", method, target)

        def _answer(self, status: int, body: bytes, ctype: str, *, head: bool = False) -> None:
            header = (
                f"HTTP/1.0 {status} {_REASONS[status]}\r\n"
                f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            try:
                self.wfile.write(header.encode("latin-1") + (b"" if head else body))
            except OSError:
                pass  # the client went away

    return Handler
