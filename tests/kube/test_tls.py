"""One TLS configuration for both transports: the kubeconfig's CA verifies the server,
an embedded client certificate is loaded, insecure-skip-tls-verify skips verification."""

from __future__ import annotations

import datetime as dt
import json
import ssl
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nfd.kube import errors
from nfd.kube.config import Credentials
from nfd.kube.heavy import HeavyTransport, api_client
from nfd.kube.light import LightTransport
from nfd.kube.transport import Transport, path
from nfd.master.security.certs import issue, new_ca


class Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"kind": "Node", "metadata": {"name": "n1"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def pki() -> tuple[bytes, bytes, bytes]:
    """(CA certificate, serving certificate, its key), PEM."""
    now = dt.datetime.now(dt.UTC)
    ca_cert, ca_key = new_ca(days=1, now=now)
    cert, key = issue(ca_cert, ca_key, dns_names=["localhost"], ips=["127.0.0.1"], days=1, now=now)
    return ca_cert, cert, key


@pytest.fixture
def server(pki: tuple[bytes, bytes, bytes]) -> Iterator[str]:
    _, cert, key = pki
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "cert").write_bytes(cert)
        (Path(tmp) / "key").write_bytes(key)
        ctx.load_cert_chain(str(Path(tmp) / "cert"), str(Path(tmp) / "key"))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def make(kind: str, creds: Credentials) -> Transport:
    if kind == "light":
        return LightTransport(creds, timeout=5.0)
    return HeavyTransport(api_client(creds, 2), creds, timeout=5.0)


@pytest.mark.parametrize("kind", ["light", "heavy"])
def test_the_ca_verifies_the_server(kind: str, server: str, pki: tuple[bytes, bytes, bytes]) -> None:
    ca, cert, key = pki
    ok = make(kind, Credentials(server, ca_data=ca, cert_data=cert, key_data=key))
    assert ok.request("GET", path("api", "v1", "nodes", "n1"))["metadata"]["name"] == "n1"
    unknown = make(kind, Credentials(server))  # the system's CAs do not know it
    with pytest.raises(errors.Unreachable, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        unknown.request("GET", path("api", "v1", "nodes", "n1"))
    skipped = make(kind, Credentials(server, insecure=True))
    assert skipped.request("GET", path("api", "v1", "nodes", "n1"))["metadata"]["name"] == "n1"
