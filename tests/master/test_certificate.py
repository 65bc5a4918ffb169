"""The master's certificate in the cluster (nfd.master.security.tls.ensure_certificate against the
fake API server over real HTTP): made once, reused, re-issued from the same CA when near
its end or missing a name, replaced when unusable, and written under conflicts."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import socket
import ssl
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from nfd.kube.config import Credentials
from nfd.kube.heavy import api_client as make_api_client
from nfd.master.core.kube import KubeApi
from nfd.master.core.settings import KubeSettings, TLSSettings
from nfd.master.security import certs
from nfd.master.security.tls import IPS, TLSError, dns_names, ensure_certificate, renew_once, write_files

NS = "node-feature-discovery"
NOW = dt.datetime.now(dt.UTC)


def ensure(fake_api, s: TLSSettings | None = None) -> certs.Bundle:
    s = s or TLSSettings(namespace=NS)
    api = KubeApi(make_api_client(Credentials(fake_api.url, token=fake_api.admin_token()), 4), KubeSettings())
    try:
        return asyncio.run(ensure_certificate(api, s))
    finally:
        api.close()


def stored(fake_api) -> certs.Bundle:
    data = fake_api.objects.get("secrets", "nfd-master-tls", NS)["data"]
    d = {k: base64.b64decode(v) for k, v in data.items()}
    return certs.Bundle(ca_cert=d["ca.crt"], ca_key=d["ca.key"], cert=d["tls.crt"], key=d["tls.key"])


def store(fake_api, b: certs.Bundle) -> None:
    data = {"ca.crt": b.ca_cert, "ca.key": b.ca_key, "tls.crt": b.cert, "tls.key": b.key}
    fake_api.objects.set("secrets", {
        "metadata": {"name": "nfd-master-tls", "namespace": NS}, "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }, NS)  # fmt: skip


def published(fake_api) -> str:
    return fake_api.objects.get("configmaps", "nfd-master-ca", NS)["data"]["ca.crt"]


def names_in(cert: bytes) -> set[str]:
    san = x509.load_pem_x509_certificate(cert).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    return set(san.value.get_values_for_type(x509.DNSName))


def good(b: certs.Bundle, s: TLSSettings) -> bool:
    return not certs.cert_problem(
        b, dns_names=dns_names(s), ips=["127.0.0.1"], min_left=dt.timedelta(days=30), now=NOW
    )


def test_made_once_then_reused(fake_api):
    first = ensure(fake_api)
    assert first == stored(fake_api) and good(first, TLSSettings(namespace=NS))
    assert published(fake_api) == first.ca_cert.decode()
    assert {"nfd-master.node-feature-discovery.svc", "nfd-master.node-feature-discovery.svc.cluster.local",
            "localhost"} <= names_in(first.cert)  # fmt: skip
    writes = len(fake_api.log.writes())
    assert ensure(fake_api) == first
    assert len(fake_api.log.writes()) == writes  # nothing written the second time


def test_reissued_from_the_same_ca_near_its_end_or_missing_a_name(fake_api):
    s = TLSSettings(namespace=NS)
    ca = certs.new_ca(days=3650, now=NOW)
    cert, key = certs.issue(*ca, dns_names=dns_names(s), ips=["127.0.0.1"], days=10, now=NOW)
    store(fake_api, certs.Bundle(ca[0], ca[1], cert, key))
    renewed = ensure(fake_api)
    assert renewed.ca_cert == ca[0] and renewed.cert != cert and good(renewed, s)
    assert stored(fake_api) == renewed and published(fake_api) == ca[0].decode()
    more = TLSSettings(namespace=NS, extra_dns_names=["nfd.example.com"])
    again = ensure(fake_api, more)
    assert again.ca_cert == ca[0] and "nfd.example.com" in names_in(again.cert)


def test_unusable_contents_replaced_and_the_new_ca_published(fake_api):
    ensure(fake_api)
    old = stored(fake_api)
    store(fake_api, certs.Bundle(b"junk", old.ca_key, old.cert, old.key))
    fresh = ensure(fake_api)
    assert fresh.ca_cert != old.ca_cert and good(fresh, TLSSettings(namespace=NS))
    assert published(fake_api) == fresh.ca_cert.decode()


def test_a_conflicting_write_is_read_again(fake_api):
    ca = certs.new_ca(days=3650, now=NOW)
    cert, key = certs.issue(*ca, dns_names=["elsewhere"], ips=[], days=365, now=NOW)
    store(fake_api, certs.Bundle(ca[0], ca[1], cert, key))
    fake_api.faults.fail(409, verb="update", resource="secrets")
    fake_api.faults.fail(409, verb="update", resource="configmaps")
    fake_api.objects.create(
        "configmaps", {"metadata": {"name": "nfd-master-ca"}, "data": {"ca.crt": "stale"}}, NS
    )
    b = ensure(fake_api)
    assert b == stored(fake_api) and good(b, TLSSettings(namespace=NS))
    assert published(fake_api) == ca[0].decode()
    assert [r.status for r in fake_api.log.records(verb="update", resource="secrets")] == [409, 200]
    assert [r.status for r in fake_api.log.records(verb="update", resource="configmaps")] == [409, 200]


def test_forbidden_says_what_and_why(fake_api):
    fake_api.faults.fail(403, verb="create", resource="secrets")
    with pytest.raises(TLSError, match=r"write Secret node-feature-discovery/nfd-master-tls: forbidden"):
        ensure(fake_api)


def served_der(port: int) -> bytes:
    return ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate(("127.0.0.1", port)))


def test_a_running_master_serves_the_renewed_certificate(fake_api, tmp_path):
    s = TLSSettings(namespace=NS)
    files = write_files(ensure(fake_api))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(files.cert), str(files.key))
    srv = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:  # a TLS listener on the live context, as uvicorn's
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with contextlib.suppress(OSError), ctx.wrap_socket(conn, server_side=True):
                pass

    threading.Thread(target=serve, daemon=True).start()
    port = srv.getsockname()[1]
    try:
        before = served_der(port)
        assert before == x509.load_pem_x509_certificate(files.cert.read_bytes()).public_bytes(
            serialization.Encoding.DER
        )
        api = KubeApi(
            make_api_client(Credentials(fake_api.url, token=fake_api.admin_token()), 4), KubeSettings()
        )
        try:
            assert asyncio.run(renew_once(api, s, files, ctx)) is False  # nothing new
            # Another replica renewed the certificate in the Secret (same CA).
            old = stored(fake_api)
            cert, key = certs.issue(
                old.ca_cert, old.ca_key, dns_names=dns_names(s), ips=IPS, days=365, now=NOW
            )
            store(fake_api, certs.Bundle(old.ca_cert, old.ca_key, cert, key))
            assert asyncio.run(renew_once(api, s, files, ctx)) is True
        finally:
            api.close()
        assert files.cert.read_bytes() == cert
        assert served_der(port) == x509.load_pem_x509_certificate(cert).public_bytes(
            serialization.Encoding.DER
        )
    finally:
        srv.close()
