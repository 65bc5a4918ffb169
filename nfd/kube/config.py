"""Where the API server is and who we are to it, for every process: a kubeconfig, else
the in-cluster service account, else ``$KUBECONFIG`` or ``~/.kube/config``. One loader
for both transports: the same CA verification, client certificates and tokens.

The service account's token is a bound token that kubelet rotates (by swapping the
file for a new one): ``Credentials.bearer`` gives the file's current content, read again
when the file's status changed, and at least once a minute in any case
(:class:`nfd.kube.tokenfile.TokenFile`, which the worker's client to the master reads
its token through too)."""

from __future__ import annotations

import base64
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from nfd import yamlfile
from nfd.kube.errors import Unreachable
from nfd.kube.execcred import ExecPlugin, from_kubeconfig_user
from nfd.kube.tokenfile import TokenFile
from nfd.settings import ConfigError

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
KUBECONFIG_LIMIT = 1 << 20  # a kubeconfig with a few embedded certificates is a few KiB


class NoClusterError(ConfigError):
    """No kubeconfig and no in-cluster configuration."""


@dataclass(frozen=True)
class Credentials:
    """``server``: the API server's URL; ``ca_file``/``ca_data``: the CA to verify it
    against (neither: the system's); ``cert``/``key``: a client certificate, each a file
    or PEM data; ``token``, ``token_file`` (read again when it changed) or
    ``exec_plugin`` (a kubeconfig's credential plugin); ``insecure``: no verification of
    the server (insecure-skip-tls-verify)."""

    server: str
    ca_file: str | None = None
    ca_data: bytes | None = None
    cert_file: str | None = None
    cert_data: bytes | None = None
    key_file: str | None = None
    key_data: bytes | None = None
    token: str | None = None
    token_file: str | None = None
    insecure: bool = False
    exec_plugin: ExecPlugin | None = None
    _token_file: TokenFile | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_token_file", TokenFile(self.token_file) if self.token_file else None)

    @property
    def https(self) -> bool:
        return urlsplit(self.server).scheme == "https"

    def address(self) -> tuple[str, int]:
        u = urlsplit(self.server)
        assert u.hostname
        return u.hostname, u.port or (443 if u.scheme == "https" else 80)

    @property
    def base_path(self) -> str:
        """A server URL's own path (a proxy's prefix), without the trailing slash."""
        return urlsplit(self.server).path.rstrip("/")

    def bearer(self) -> str | None:
        """The token to send: the file's current content (rotated by kubelet), the
        credential plugin's current one, or the fixed one. Unreachable when the file
        cannot be read or the plugin fails."""
        if self.exec_plugin is not None:
            return self.exec_plugin.token()
        if self._token_file is not None:
            try:
                return self._token_file.read()
            except OSError as e:
                raise Unreachable(None, f"cannot read token {self.token_file}: {e.strerror or e}") from None
        return self.token

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for ``server`` (None for plain HTTP): the CA, the client
        certificate, verification unless ``insecure``."""
        if not self.https:
            return None
        try:
            ctx = ssl.create_default_context(
                cafile=self.ca_file, cadata=self.ca_data.decode("ascii") if self.ca_data else None
            )
            if self.insecure:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            if self.cert_file or self.cert_data:
                _load_cert_chain(ctx, self)
        except (OSError, ssl.SSLError, ValueError) as e:
            raise ConfigError(
                f"TLS configuration for {self.server}: {getattr(e, 'strerror', None) or e}"
            ) from None
        return ctx


def _load_cert_chain(ctx: ssl.SSLContext, creds: Credentials) -> None:
    """ssl loads a certificate only from a file: embedded data goes through a private
    temporary directory, removed at once."""
    if not (creds.cert_data or creds.key_data):
        ctx.load_cert_chain(str(creds.cert_file), creds.key_file)
        return
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cert, key = creds.cert_file, creds.key_file
        if creds.cert_data:
            cert = os.path.join(tmp, "cert")
            with open(cert, "wb") as f:
                f.write(creds.cert_data)
        if creds.key_data:
            key = os.path.join(tmp, "key")
            with open(key, "wb") as f:
                f.write(creds.key_data)
        ctx.load_cert_chain(str(cert), key)


def in_cluster(environ: Mapping[str, str], sa_dir: str = SA_DIR) -> Credentials:
    """The pod's service account. NoClusterError outside a cluster."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    token = os.path.join(sa_dir, "token")
    if not host or not port or not os.path.exists(token):
        raise NoClusterError("not in a cluster (no KUBERNETES_SERVICE_HOST or service-account token)")
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return Credentials(server, ca_file=os.path.join(sa_dir, "ca.crt"), token_file=token)


def from_kubeconfig(path: str) -> Credentials:
    """The current context of the kubeconfig at ``path``; files it names are relative to
    it. ConfigError names what is missing or unsupported."""
    try:
        doc = yamlfile.load(path, limit=KUBECONFIG_LIMIT)
    except yamlfile.YamlFileError as e:
        raise ConfigError(f"kubeconfig {e}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"kubeconfig {path}: not a mapping")

    def named(kind: str, name: str) -> dict[str, Any]:
        for item in doc.get(kind + "s") or []:
            if isinstance(item, dict) and item.get("name") == name:
                found = item.get(kind) or {}
                if isinstance(found, dict):
                    return found
        raise ConfigError(f"kubeconfig {path}: no {kind} {name!r}")

    context = named("context", str(doc.get("current-context") or ""))
    cluster = named("cluster", str(context.get("cluster") or ""))
    user = named("user", str(context.get("user") or ""))
    if "auth-provider" in user:
        raise ConfigError(
            f"kubeconfig {path}: auth-provider credentials are not supported (kubectl dropped "
            "them too); use an exec credential plugin or a token"
        )
    server = str(cluster.get("server") or "")
    u = urlsplit(server)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ConfigError(f"kubeconfig {path}: server {server!r} is not an http(s) URL")
    base = os.path.dirname(os.path.abspath(path))
    plugin = None
    if user.get("exec"):
        spec = user["exec"]
        try:
            if not isinstance(spec, dict):
                raise ValueError("user.exec: not a mapping")
            plugin = from_kubeconfig_user(spec, base, cluster, "user.exec")
        except ValueError as e:
            raise ConfigError(f"kubeconfig {path}: {e}") from None

    def file(value: Any) -> str | None:
        return os.path.join(base, str(value)) if value else None

    def data(key: str, where: dict[str, Any]) -> bytes | None:
        value = where.get(key)
        if not value:
            return None
        try:
            return base64.b64decode(str(value), validate=True)
        except ValueError:
            raise ConfigError(f"kubeconfig {path}: {key} is not base64") from None

    return Credentials(
        server,
        ca_file=file(cluster.get("certificate-authority")),
        ca_data=data("certificate-authority-data", cluster),
        cert_file=file(user.get("client-certificate")),
        cert_data=data("client-certificate-data", user),
        key_file=file(user.get("client-key")),
        key_data=data("client-key-data", user),
        token=str(user["token"]) if user.get("token") else None,
        token_file=file(user.get("tokenFile")),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        exec_plugin=plugin,
    )


def load(
    kubeconfig: str | None, environ: Mapping[str, str] | None = None, sa_dir: str = SA_DIR
) -> Credentials:
    """``kubeconfig``, else the in-cluster service account, else ``$KUBECONFIG`` (its
    first file) or ``~/.kube/config``. NoClusterError when there is none; ConfigError
    when the chosen one is unusable."""
    env = os.environ if environ is None else environ
    if kubeconfig:
        if not os.path.isfile(kubeconfig):
            raise ConfigError(f"kubeconfig {kubeconfig}: no such file")
        return from_kubeconfig(kubeconfig)
    try:
        return in_cluster(env, sa_dir)
    except NoClusterError:
        fallback = (env.get("KUBECONFIG") or "").split(os.pathsep)[0] or os.path.join(
            env.get("HOME") or os.path.expanduser("~"), ".kube", "config"
        )
        if not os.path.isfile(fallback):
            raise NoClusterError("no kubeconfig and no in-cluster configuration") from None
        return from_kubeconfig(fallback)
