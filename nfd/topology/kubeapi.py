"""The few API-server calls the updater makes, over ``http.client``.

Why not the ``kubernetes`` package: importing it costs 46 MiB of RSS and its CoreV1Api
another 20, against a 40 MB budget for a per-node agent (the issue behind this updater is
upstream's being OOM-killed at 60 MiB). The updater needs five requests and one watch,
all JSON, so this is the whole client: kubeconfig or in-cluster credentials, one kept-alive
connection for requests and one per watch, the service-account token re-read as the
kubelet rotates it.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from nfd.settings import ConfigError

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    context: ssl.SSLContext | None
    token: str | None = None
    token_file: str | None = None

    def bearer(self) -> str | None:
        if self.token_file:
            try:
                with open(self.token_file, encoding="utf-8") as f:
                    return f.read().strip()  # re-read: bound tokens are rotated
            except OSError as e:
                raise ApiError(0, f"cannot read token {self.token_file}: {e.strerror or e}") from None
        return self.token


def _endpoint(server: str, context: ssl.SSLContext | None, **auth: Any) -> Endpoint:
    u = urlsplit(server)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ConfigError(f"server {server!r}: not an http(s) URL")
    port = u.port or (443 if u.scheme == "https" else 80)
    return Endpoint(u.scheme, u.hostname, port, context if u.scheme == "https" else None, **auth)


def in_cluster(environ: dict[str, str] | os._Environ[str] = os.environ, sa_dir: str = SA_DIR) -> Endpoint:
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port or not os.path.exists(os.path.join(sa_dir, "token")):
        raise ConfigError("not in a cluster (no KUBERNETES_SERVICE_HOST or service-account token)")
    ctx = ssl.create_default_context(cafile=os.path.join(sa_dir, "ca.crt"))
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return _endpoint(server, ctx, token_file=os.path.join(sa_dir, "token"))


def _data_file(data: str, directory: str) -> str:
    import tempfile

    fd, path = tempfile.mkstemp(dir=directory)
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(data))
    return path


def from_kubeconfig(path: str) -> Endpoint:
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"kubeconfig {path}: {getattr(e, 'strerror', None) or e}") from None

    def named(kind: str, name: str) -> dict[str, Any]:
        for item in doc.get(kind + "s") or []:
            if item.get("name") == name:
                found: dict[str, Any] = item.get(kind) or {}
                return found
        raise ConfigError(f"kubeconfig {path}: no {kind} {name!r}")

    ctx_entry = named("context", doc.get("current-context") or "")
    cluster, user = named("cluster", ctx_entry.get("cluster", "")), named("user", ctx_entry.get("user", ""))
    if "exec" in user or "auth-provider" in user:
        raise ConfigError(
            f"kubeconfig {path}: exec and auth-provider credentials are not supported; use a token"
        )
    base = os.path.dirname(os.path.abspath(path))
    import tempfile  # only here: with shutil, bz2 and lzma it is a megabyte kept for good

    with tempfile.TemporaryDirectory() as tmp:
        context = None
        if str(cluster.get("server", "")).startswith("https"):
            ca = cluster.get("certificate-authority")
            if cluster.get("certificate-authority-data"):
                ca = _data_file(cluster["certificate-authority-data"], tmp)
            context = ssl.create_default_context(cafile=os.path.join(base, ca) if ca else None)
            if cluster.get("insecure-skip-tls-verify"):
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            cert, key = user.get("client-certificate"), user.get("client-key")
            if user.get("client-certificate-data"):
                cert = _data_file(user["client-certificate-data"], tmp)
            if user.get("client-key-data"):
                key = _data_file(user["client-key-data"], tmp)
            if cert:
                context.load_cert_chain(os.path.join(base, cert), os.path.join(base, key) if key else None)
        token_file = user.get("tokenFile")
        return _endpoint(
            str(cluster.get("server", "")),
            context,
            token=user.get("token"),
            token_file=os.path.join(base, token_file) if token_file else None,
        )


def load(kubeconfig: str | None) -> Endpoint:
    """``kubeconfig``, else the in-cluster service account, else ``$KUBECONFIG`` or
    ``~/.kube/config``."""
    if kubeconfig:
        return from_kubeconfig(kubeconfig)
    try:
        return in_cluster()
    except ConfigError:
        fallback = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
        if not os.path.exists(fallback):
            raise
        return from_kubeconfig(fallback)


def path(*parts: str, **query: str) -> str:
    out = "/" + "/".join(quote(p, safe="") for p in parts)
    return out + ("?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in query.items()) if query else "")


class KubeApi:
    def __init__(self, endpoint: Endpoint, *, timeout: float = 30.0) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._aborted = False  # stopping: every request fails at once (see abort)

    def _connect(self, timeout: float | None) -> http.client.HTTPConnection:
        e = self.endpoint
        if e.context is not None:
            return http.client.HTTPSConnection(e.host, e.port, timeout=timeout, context=e.context)
        return http.client.HTTPConnection(e.host, e.port, timeout=timeout)

    def _headers(self, body: bytes | None) -> dict[str, str]:
        h = {"Accept": "application/json", "User-Agent": "nfd-topology-updater"}
        token = self.endpoint.bearer()
        if token:
            h["Authorization"] = f"Bearer {token}"
        if body is not None:
            h["Content-Type"] = "application/json"
        return h

    def request(self, method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """The decoded answer; ApiError for an error status or a failed connection."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        with self._lock:
            for attempt in (1, 2):  # a kept-alive connection the server closed: once more
                if self._aborted:
                    raise ApiError(0, f"{method} {url}: stopping")
                if self._conn is None:
                    self._conn = self._connect(self.timeout)
                try:
                    self._conn.request(method, url, body=data, headers=self._headers(data))
                    resp = self._conn.getresponse()
                    raw = resp.read()
                    break
                except (http.client.HTTPException, OSError) as e:
                    self._conn.close()
                    self._conn = None
                    if attempt == 2 or method not in ("GET", "PUT") or self._aborted:
                        why = "stopping" if self._aborted else str(e)
                        raise ApiError(0, f"{method} {url}: {why}") from None
        return _decode(resp.status, raw, f"{method} {url}")

    def watch(self, url: str, *, timeout: float) -> Iterator[dict[str, Any]]:
        """The events of a watch request, one decoded line each, until the server ends it."""
        conn = self._connect(timeout)
        try:
            conn.request("GET", url, headers=self._headers(None))
            resp = conn.getresponse()
            if resp.status != 200:
                _decode(resp.status, resp.read(), f"GET {url}")
            while line := resp.readline():
                if line.strip():
                    yield json.loads(line)
        except (http.client.HTTPException, OSError) as e:
            raise ApiError(0, f"watch {url}: {e}") from None
        finally:
            conn.close()

    def abort(self) -> None:
        """End the request waiting for its answer (it raises ApiError) and fail every later
        one: the updater is stopping, and an API server that does not answer must not
        hold it until the timeout (twice: a PUT is sent again). Takes no lock: the
        request under way holds it."""
        self._aborted = True
        conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:  # the plain socket's shutdown, for TLS too: the blocked read sees EOF
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:  # closed meanwhile
                pass

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _decode(status: int, raw: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw) if raw else {}
    except ValueError:
        doc = {}
    if status >= 400:
        message = doc.get("message") if isinstance(doc, dict) else None
        raise ApiError(status, f"{what}: {message or raw[:200].decode('utf-8', 'replace')}")
    if not isinstance(doc, dict):
        raise ApiError(status, f"{what}: answer is not a JSON object")
    return doc
