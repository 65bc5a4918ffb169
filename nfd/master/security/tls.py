"""TLS without cert-manager: the master keeps its CA and serving certificate in a Secret
and publishes the CA certificate in a ConfigMap that workers mount and verify against.

Every replica runs the same steps at start, so two that start together agree: the
Secret is created by whichever gets there first (the other's create answers 409, and it
reads and serves the winner's certificate); a certificate near its end or missing one
of the Service's names is re-issued with an update that carries the resourceVersion read
(409: read again, the other replica's fresh certificate is then good). The ConfigMap is
written only when it differs from the Secret's CA, under the same rules."""

from __future__ import annotations

import base64
import datetime as dt
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nfd.kube.errors import (
    ApiError,
    Conflict,
    Forbidden,
    NotFound,
    ServerError,
    TooManyRequests,
    Unreachable,
)
from nfd.master.core.kube import KubeApi
from nfd.master.core.settings import TLSSettings

if TYPE_CHECKING:
    from nfd.master.security.certs import Bundle

log = logging.getLogger(__name__)

ATTEMPTS = 6
CA_KEY = "ca.crt"
LABELS = {"app.kubernetes.io/name": "nfd-master", "app.kubernetes.io/managed-by": "nfd-master"}


class TLSError(Exception):
    """The certificate could not be had (message says why)."""


@dataclass(frozen=True)
class ServingFiles:
    cert: Path
    key: Path
    # The CA that signed ``cert`` (the cluster's certificate): replicas verify each other
    # against it when a follower forwards to the leader.
    ca: Path | None = None


def dns_names(s: TLSSettings) -> list[str]:
    """The names workers and operators reach the master by: the Service's, localhost."""
    svc, ns = s.service_name, s.namespace
    names = [f"{svc}.{ns}.svc", f"{svc}.{ns}.svc.{s.cluster_domain}", f"{svc}.{ns}", svc, "localhost"]
    return names + [n for n in s.extra_dns_names if n not in names]


IPS = ["127.0.0.1", "::1"]


async def ensure_certificate(api: KubeApi, s: TLSSettings) -> Bundle:
    """The serving Bundle from the Secret (made or renewed as needed), its CA published."""
    from nfd.master.security import certs

    now = dt.datetime.now(dt.UTC)
    renew = dt.timedelta(days=s.renew_before_days)
    names = dns_names(s)
    for _ in range(ATTEMPTS):
        secret = await _read(api, "secret", s.namespace, s.secret_name)
        current = _bundle(secret) if secret is not None else None
        why = (
            certs.cert_problem(current, dns_names=names, ips=IPS, min_left=renew, now=now)
            if current is not None
            else "none stored yet"
        )
        if current is not None and not why:
            await _publish_ca(api, s, current.ca_cert)
            return current
        ca: tuple[bytes, bytes] | None = None
        if current is not None and not certs.ca_problem(
            current.ca_cert, current.ca_key, min_left=renew, now=now
        ):
            ca = (current.ca_cert, current.ca_key)
        if ca is None:
            ca = certs.new_ca(days=s.ca_validity_days, now=now)
        cert, key = certs.issue(*ca, dns_names=names, ips=IPS, days=s.cert_validity_days, now=now)
        fresh = certs.Bundle(ca_cert=ca[0], ca_key=ca[1], cert=cert, key=key)
        body = _secret_body(s, fresh, secret)
        try:
            if secret is None:
                await api.create_object("secret", s.namespace, body)
                log.warning(
                    "TLS: made a CA and serving certificate, stored in Secret %s/%s",
                    s.namespace,
                    s.secret_name,
                )
            else:
                await api.replace_object("secret", s.namespace, s.secret_name, body)
                log.warning("TLS: serving certificate re-issued (%s)", why)
        except Conflict:  # another replica wrote first: use what it wrote
            continue
        except ApiError as e:
            raise _error(e, f"write Secret {s.namespace}/{s.secret_name}") from None
        await _publish_ca(api, s, fresh.ca_cert)
        return fresh
    raise TLSError(f"Secret {s.namespace}/{s.secret_name} kept changing under us ({ATTEMPTS} tries)")


def write_files(bundle: Bundle, into: ServingFiles | None = None) -> ServingFiles:
    """The certificate and key in a private directory, for uvicorn (which takes paths);
    ``into``: replace those files (each by a rename, never half written)."""
    if into is None:
        d = Path(tempfile.mkdtemp(prefix="nfd-master-tls-"))  # mode 0700
        into = ServingFiles(d / "tls.crt", d / "tls.key", d / "ca.crt")
    files = [(into.key, bundle.key), (into.cert, bundle.cert)]
    if into.ca is not None:
        files.append((into.ca, bundle.ca_cert))
    for path, data in files:
        tmp = path.with_name(f".{path.name}.new")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        tmp.replace(path)
    return into


async def renew_once(api: KubeApi, s: TLSSettings, files: ServingFiles, context: ssl.SSLContext) -> bool:
    """Serve what the Secret holds now, renewing it when due (another replica may have
    already): rewrite the files and load them into the live context, which new
    connections then get. True when the served certificate changed."""
    bundle = await ensure_certificate(api, s)
    if bundle.cert == files.cert.read_bytes():
        return False
    write_files(bundle, files)
    context.load_cert_chain(str(files.cert), str(files.key))
    log.warning("TLS: now serving the renewed certificate")
    return True


RENEW_EVERY_S = 6 * 3600
RENEW_JOB_ID = "nfd-master-tls-renew"


async def renew_checked(api: KubeApi, s: TLSSettings, files: ServingFiles, context: ssl.SSLContext) -> None:
    """One look for renewal, a master's periodic job (``jobs``): a long-running master
    renews its certificate without a restart, and a failed look waits for the next."""
    try:
        await renew_once(api, s, files, context)
    except (ApiError, TLSError, OSError, ssl.SSLError) as e:
        log.warning("TLS: cannot check the certificate for renewal now (%s); trying again later", e)


async def _read(api: KubeApi, kind: str, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return await api.read_object(kind, ns, name)
    except NotFound:
        return None
    except ApiError as e:
        raise _error(e, f"read {kind} {ns}/{name}") from None


async def _publish_ca(api: KubeApi, s: TLSSettings, ca_cert: bytes) -> None:
    want = ca_cert.decode()
    for _ in range(ATTEMPTS):
        cm = await _read(api, "configmap", s.namespace, s.ca_configmap)
        if cm is not None and (cm.get("data") or {}).get(CA_KEY) == want:
            return
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": s.ca_configmap, "labels": LABELS},
            "data": {CA_KEY: want},
        }
        try:
            if cm is None:
                await api.create_object("configmap", s.namespace, body)
            else:
                body["metadata"]["resourceVersion"] = (cm.get("metadata") or {}).get("resourceVersion")
                await api.replace_object("configmap", s.namespace, s.ca_configmap, body)
            log.warning("TLS: CA certificate published in ConfigMap %s/%s", s.namespace, s.ca_configmap)
            return
        except Conflict:
            continue
        except ApiError as e:
            raise _error(e, f"write ConfigMap {s.namespace}/{s.ca_configmap}") from None
    raise TLSError(f"ConfigMap {s.namespace}/{s.ca_configmap} kept changing under us ({ATTEMPTS} tries)")


def _bundle(secret: dict[str, Any]) -> Bundle | None:
    from nfd.master.security.certs import Bundle

    data = secret.get("data") or {}
    try:
        parts = {k: base64.b64decode(data[k]) for k in ("ca.crt", "ca.key", "tls.crt", "tls.key")}
    except (KeyError, ValueError, TypeError):
        return None
    return Bundle(
        ca_cert=parts["ca.crt"], ca_key=parts["ca.key"], cert=parts["tls.crt"], key=parts["tls.key"]
    )


def _secret_body(s: TLSSettings, b: Bundle, current: dict[str, Any] | None) -> dict[str, Any]:
    def enc(v: bytes) -> str:
        return base64.b64encode(v).decode()

    meta: dict[str, Any] = {"name": s.secret_name, "labels": LABELS}
    if current is not None:
        meta["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": enc(b.cert),
            "tls.key": enc(b.key),
            "ca.crt": enc(b.ca_cert),
            "ca.key": enc(b.ca_key),
        },
    }


def _error(e: ApiError, what: str) -> Exception:
    if isinstance(e, Forbidden):
        return TLSError(f"cannot {what}: forbidden (the master's Role must allow it): {e}")
    if isinstance(e, (Unreachable, TooManyRequests, ServerError)):  # passing: retried
        return e
    return TLSError(f"cannot {what}: {e}")
