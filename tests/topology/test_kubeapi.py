"""The updater's API client: credentials as kubeconfig and the in-cluster service account
give them, errors as the API server words them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nfd.settings import ConfigError
from nfd.topology.kubeapi import ApiError, KubeApi, from_kubeconfig, in_cluster, path
from tests.fakeapi import FakeApiServer


def test_token_file_is_read_again_for_each_request(fake_api: FakeApiServer, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("not-yet-valid")
    kc = json.loads(fake_api.write_kubeconfig(tmp_path / "kc").read_text())
    kc["users"][0]["user"] = {"tokenFile": "token"}  # relative to the kubeconfig
    (tmp_path / "kc").write_text(json.dumps(kc))
    api = KubeApi(from_kubeconfig(str(tmp_path / "kc")))
    fake_api.create_node("n1")
    fake_api.require_auth = True
    with pytest.raises(ApiError) as e:
        api.request("GET", path("api", "v1", "nodes", "n1"))
    assert e.value.status == 401
    token.write_text(fake_api.admin_token())  # the kubelet rotated it
    assert api.request("GET", path("api", "v1", "nodes", "n1"))["metadata"]["name"] == "n1"


def test_errors_carry_the_api_servers_message(fake_api: FakeApiServer, tmp_path: Path) -> None:
    api = KubeApi(from_kubeconfig(str(fake_api.write_kubeconfig(tmp_path / "kc"))))
    with pytest.raises(ApiError) as e:
        api.request("GET", path("api", "v1", "nodes", "missing"))
    assert e.value.status == 404 and 'nodes "missing" not found' in e.value.message
    bad = {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
           "metadata": {"name": "n"}, "zones": [{"name": "node-0"}]}  # fmt: skip
    with pytest.raises(ApiError) as e:
        api.request("POST", path("apis", "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies"), bad)
    assert e.value.status == 422 and "'type' is a required property" in e.value.message


def test_in_cluster_needs_the_service_host_and_token(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not in a cluster"):
        in_cluster({}, str(tmp_path))
    (tmp_path / "token").write_text("t")
    with pytest.raises(ConfigError, match="not in a cluster"):
        in_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, str(tmp_path))


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ({"exec": {"command": "aws"}}, "exec and auth-provider credentials are not supported"),
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
    with pytest.raises(ConfigError, match=r"kubeconfig .*nope: No such file"):
        from_kubeconfig(str(tmp_path / "nope"))
