"""Credentials as a kubeconfig and the in-cluster service account give them, one loader
for every process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nfd.kube import tokenfile
from nfd.kube.config import Credentials, NoClusterError, from_kubeconfig, in_cluster, load
from nfd.settings import ConfigError
from tests.fakeapi import FakeApiServer


def test_a_token_file_is_relative_to_the_kubeconfig(fake_api: FakeApiServer, tmp_path: Path) -> None:
    kc = json.loads(fake_api.write_kubeconfig(tmp_path / "kc").read_text())
    kc["users"][0]["user"] = {"tokenFile": "token"}
    (tmp_path / "kc").write_text(json.dumps(kc))
    (tmp_path / "token").write_text("abc\n")
    creds = from_kubeconfig(str(tmp_path / "kc"))
    assert creds.token_file == str(tmp_path / "token") and creds.bearer() == "abc"


def test_embedded_certificates_are_decoded(tmp_path: Path) -> None:
    kc = {
        "clusters": [
            {"name": "c", "cluster": {"server": "https://k:6443", "certificate-authority-data": "Q0E="}}
        ],
        "users": [{"name": "u", "user": {"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    (tmp_path / "kc").write_text(json.dumps(kc))
    creds = from_kubeconfig(str(tmp_path / "kc"))
    assert (creds.ca_data, creds.cert_data, creds.key_data) == (b"CA", b"CERT", b"KEY")
    assert creds.address() == ("k", 6443)
    with pytest.raises(ConfigError, match="TLS configuration for https://k:6443"):
        creds.ssl_context()  # not a certificate: one line, not a traceback


def test_in_cluster_needs_the_service_host_and_token(tmp_path: Path) -> None:
    with pytest.raises(NoClusterError, match="not in a cluster"):
        in_cluster({}, str(tmp_path))
    (tmp_path / "token").write_text("t")
    with pytest.raises(NoClusterError, match="not in a cluster"):
        in_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, str(tmp_path))
    creds = in_cluster(
        {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, str(tmp_path)
    )
    assert creds == Credentials(
        "https://[fd00::1]:443", ca_file=str(tmp_path / "ca.crt"), token_file=str(tmp_path / "token")
    )


def test_load_falls_back_to_kubeconfig_then_says_there_is_none(
    fake_api: FakeApiServer, tmp_path: Path
) -> None:
    kc = fake_api.write_kubeconfig(tmp_path / "kc")
    sa = str(tmp_path / "no-sa")
    assert load(None, {"KUBECONFIG": str(kc)}, sa).server == fake_api.url
    with pytest.raises(NoClusterError, match="no kubeconfig and no in-cluster configuration"):
        load(None, {"HOME": str(tmp_path)}, sa)


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ({"auth-provider": {"name": "gcp"}}, "auth-provider credentials are not supported"),
        ({"exec": {"command": "aws"}}, "user.exec.apiVersion: '' is not one of"),
        (
            {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": "x",
                    "env": [{"value": 1}],
                }
            },
            r"user.exec.env\[0\]: a name and a value",
        ),
    ],
)
def test_unsupported_kubeconfig_credentials_are_named(
    fake_api: FakeApiServer, tmp_path: Path, user: dict[str, object], message: str
) -> None:
    kc = json.loads(fake_api.write_kubeconfig(tmp_path / "kc").read_text())
    kc["users"][0]["user"] = user
    (tmp_path / "kc").write_text(json.dumps(kc))
    with pytest.raises(ConfigError, match=message):
        from_kubeconfig(str(tmp_path / "kc"))


def test_missing_kubeconfig_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"kubeconfig .*nope: no such file"):
        from_kubeconfig(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match=r"kubeconfig .*nope: no such file"):
        load(str(tmp_path / "nope"))


def test_a_server_that_is_not_a_url_is_named(tmp_path: Path) -> None:
    kc = {
        "clusters": [{"name": "c", "cluster": {"server": "k:6443"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    (tmp_path / "kc").write_text(json.dumps(kc))
    with pytest.raises(ConfigError, match=r"server 'k:6443' is not an http\(s\) URL"):
        from_kubeconfig(str(tmp_path / "kc"))


def test_a_token_file_is_read_again_when_it_changed_or_a_minute_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    opened: list[str] = []

    def counting_open(path: str, *a: Any, **k: Any) -> Any:
        opened.append(path)
        return open(path, *a, **k)

    monkeypatch.setattr(tokenfile, "open", counting_open, raising=False)
    creds = Credentials("https://h:443", token_file=str(token))
    assert creds.bearer() == creds.bearer() == "first"
    assert len(opened) == 1  # unchanged: not read again
    new = tmp_path / "token.new"
    new.write_text("second\n")
    new.replace(token)  # kubelet swaps in a new file
    assert creds.bearer() == "second" and len(opened) == 2
    monkeypatch.setattr(tokenfile, "TOKEN_REREAD_S", 0.0)
    assert creds.bearer() == "second" and len(opened) == 3  # read again however it looks
