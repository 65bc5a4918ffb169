"""The worker's Prometheus metrics and its tiny /healthz + /metrics server.

Names follow upstream's worker (``nfd_worker_build_info``, the discovery duration
histogram with upstream's buckets); the delivery counters are ours.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from nfd import __version__

log = logging.getLogger(__name__)

# Upstream's nfd-worker buckets for feature discovery time.
DISCOVERY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class WorkerMetrics:
    """One registry per worker (no process-global state: tests run several)."""

    def __init__(self, node: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.node = node
        build = Gauge(
            "nfd_worker_build_info",
            "Version from which Node Feature Discovery was built.",
            ["version"],
            registry=self.registry,
        )
        build.labels(version=__version__).set_to_current_time()
        self._discovery = Histogram(
            "nfd_worker_feature_discovery_duration_seconds",
            "Time taken to discover features",
            ["node"],
            buckets=DISCOVERY_BUCKETS,
            registry=self.registry,
        ).labels(node=node)
        self._requests = Counter(
            "nfd_worker_master_requests_total",
            "Requests to the master, by kind (features, heartbeat) and result "
            "(ok, unknown, rejected, retry, unreachable).",
            ["kind", "result"],
            registry=self.registry,
        )
        self._source_errors = Counter(
            "nfd_worker_source_errors_total",
            "Feature source failures during discovery.",
            ["source"],
            registry=self.registry,
        )

    def discovery_took(self, seconds: float) -> None:
        self._discovery.observe(seconds)

    def request(self, kind: str, result: str) -> None:
        self._requests.labels(kind=kind, result=result).inc()

    def source_failed(self, source: str) -> None:
        self._source_errors.labels(source=source).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class StatusServer:
    """/healthz and /metrics on one port: a listening daemon thread, and one short-lived
    thread per connection."""

    def __init__(
        self,
        metrics: WorkerMetrics,
        healthy: Callable[[], tuple[bool, str]],
        *,
        host: str = "0.0.0.0",
        port: int = 8081,
    ) -> None:
        handler = _handler_class(metrics, healthy)
        # A thread per connection (gone when it closes): a client that connects and says
        # nothing must not hold up the kubelet's probe.
        self._httpd = ThreadingHTTPServer((host, port), handler)
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="nfd-status", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler_class(
    metrics: WorkerMetrics, healthy: Callable[[], tuple[bool, str]]
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Close after each answer, and give up on a silent client: no connection (and its
        # thread) outlives a scrape or a probe by much.
        protocol_version = "HTTP/1.0"
        timeout = 5

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, metrics.exposition(), CONTENT_TYPE_LATEST)
            elif path in ("/healthz", "/livez", "/readyz"):
                ok, why = healthy()
                self._answer(200 if ok else 503, (why + "\n").encode(), "text/plain; charset=utf-8")
            else:
                self._answer(404, b"not found\n", "text/plain; charset=utf-8")

        def _answer(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("status server: " + format, *args)

    return Handler
