"""A kubeconfig's exec credential plugin, run as kubectl runs it, on both transports."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from nfd.kube.config import from_kubeconfig
from nfd.kube.errors import Unauthorized, Unreachable
from nfd.kube.execcred import MARGIN_S
from nfd.kube.heavy import HeavyTransport, api_client
from nfd.kube.light import LightTransport
from tests.fakeapi import FakeApiServer

V1 = "client.authentication.k8s.io/v1"

# A plugin that records each run and what kubectl's protocol handed it, then prints the
# ExecCredential it was told to print.
PLUGIN = """\
import json, os, sys
out = sys.argv[1]
with open(out + ".runs", "a") as f:
    f.write(json.dumps({"info": json.loads(os.environ["KUBERNETES_EXEC_INFO"]),
                        "region": os.environ.get("REGION")}) + "\\n")
with open(out) as f:
    sys.stdout.write(f.read())
"""


def kubeconfig(fake_api: FakeApiServer, tmp: Path, credential: dict[str, Any], **exec_extra: Any) -> Path:
    (tmp / "plugin.py").write_text(PLUGIN)
    (tmp / "cred.json").write_text(json.dumps(credential))
    kc = json.loads(fake_api.write_kubeconfig(tmp / "kc").read_text())
    kc["users"][0]["user"] = {
        "exec": {
            "apiVersion": V1,
            "command": sys.executable,
            "args": [str(tmp / "plugin.py"), str(tmp / "cred.json")],
            "env": [{"name": "REGION", "value": "eu-1"}],
            **exec_extra,
        }
    }
    (tmp / "kc").write_text(json.dumps(kc))
    return tmp / "kc"


def runs(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "cred.json.runs"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def credential(token: str, expires: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"token": token}
    if expires:
        status["expirationTimestamp"] = expires
    return {"apiVersion": V1, "kind": "ExecCredential", "status": status}


@pytest.mark.parametrize("transport", ["light", "heavy"])
def test_the_plugins_token_authenticates_and_is_kept(
    fake_api: FakeApiServer, tmp_path: Path, transport: str
) -> None:
    fake_api.require_auth = True  # the plugin's token is the only way in
    token = fake_api.admin_token()
    creds = from_kubeconfig(str(kubeconfig(fake_api, tmp_path, credential(token), provideClusterInfo=True)))
    api = LightTransport(creds) if transport == "light" else HeavyTransport(api_client(creds, 2), creds)
    try:
        for _ in range(3):
            assert api.request("GET", "/api/v1/nodes")["kind"] == "NodeList"
    finally:
        api.close()
    seen = runs(tmp_path)
    assert len(seen) == 1  # no expiry: kept for the process's life, as kubectl keeps it
    assert seen[0]["region"] == "eu-1"
    assert seen[0]["info"]["apiVersion"] == V1
    assert seen[0]["info"]["spec"]["interactive"] is False
    assert seen[0]["info"]["spec"]["cluster"]["server"] == fake_api.url


def test_an_expiring_token_is_asked_for_again(fake_api: FakeApiServer, tmp_path: Path) -> None:
    creds = from_kubeconfig(str(kubeconfig(fake_api, tmp_path, credential("t1", "2030-01-01T00:00:00Z"))))
    plugin = creds.exec_plugin
    assert plugin is not None
    expiry = 1893456000.0  # 2030-01-01T00:00:00Z
    assert plugin.token(now=expiry - 3600) == "t1"
    assert plugin.token(now=expiry - MARGIN_S - 1) == "t1"
    assert len(runs(tmp_path)) == 1
    (tmp_path / "cred.json").write_text(json.dumps(credential("t2", "2031-01-01T00:00:00Z")))
    assert plugin.token(now=expiry - MARGIN_S + 1) == "t2"
    assert len(runs(tmp_path)) == 2
    assert "cluster" not in runs(tmp_path)[0]["info"]["spec"]  # provideClusterInfo not asked


def test_a_token_the_server_refuses_is_its_401(fake_api: FakeApiServer, tmp_path: Path) -> None:
    fake_api.require_auth = True
    creds = from_kubeconfig(str(kubeconfig(fake_api, tmp_path, credential("nobody-knows-this"))))
    api = LightTransport(creds)
    try:
        with pytest.raises(Unauthorized):
            api.request("GET", "/api/v1/nodes")
    finally:
        api.close()


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("not json", "its output is not JSON"),
        (json.dumps({"kind": "ExecCredential"}), "has no status"),
        (json.dumps({"status": {}}), r"has no status\.token"),
        (
            json.dumps({"status": {"clientCertificateData": "x"}}),
            "client certificates from a plugin are not supported",
        ),
        (json.dumps({"status": {"token": "t", "expirationTimestamp": "soon"}}), "'soon' is not RFC 3339"),
    ],
)
def test_a_bad_answer_is_one_line_naming_the_plugin(
    fake_api: FakeApiServer, tmp_path: Path, output: str, message: str
) -> None:
    kc = kubeconfig(fake_api, tmp_path, {})
    (tmp_path / "cred.json").write_text(output)
    creds = from_kubeconfig(str(kc))
    with pytest.raises(Unreachable, match=message) as e:
        creds.bearer()
    assert sys.executable in str(e.value) and "\n" not in str(e.value)


def test_a_failing_or_missing_plugin_is_named(fake_api: FakeApiServer, tmp_path: Path) -> None:
    kc = json.loads(fake_api.write_kubeconfig(tmp_path / "kc").read_text())
    kc["users"][0]["user"] = {"exec": {"apiVersion": V1, "command": "./no-such-plugin"}}
    (tmp_path / "kc").write_text(json.dumps(kc))
    with pytest.raises(Unreachable, match="no-such-plugin"):
        from_kubeconfig(str(tmp_path / "kc")).bearer()
    kc["users"][0]["user"] = {
        "exec": {
            "apiVersion": V1,
            "command": sys.executable,
            "args": ["-c", "import sys; sys.exit('expired SSO session')"],
        }
    }
    (tmp_path / "kc").write_text(json.dumps(kc))
    with pytest.raises(Unreachable, match="exit 1: expired SSO session"):
        from_kubeconfig(str(tmp_path / "kc")).bearer()
