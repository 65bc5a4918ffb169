"""``nfd topology-updater`` as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fixture_node import pod_objects
from podresources_standin import PodResourcesStandIn
from test_fixture_node import NODE, by_hand, resources

from nfd.hostroot import HostRoot
from tests.fakeapi import FakeApiServer


def nfd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    code = "import sys; from nfd.cli import main; rc = main(sys.argv[1:]); print('fastapi' in sys.modules, file=sys.stderr); sys.exit(rc)"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_no_publish_oneshot_prints_the_object(
    host: HostRoot, kubelet: PodResourcesStandIn, kubelet_config: Path
) -> None:
    # Without the API server there are no pods to judge by; the shared-pool listings of
    # logger and nginx are still told apart (test_accounting.py).
    p = nfd(
        "topology-updater", "--node-name", NODE, "--no-publish", "--oneshot",
        "--host-root", str(Path(host.sys).parent), "--podresources-socket", str(kubelet.socket),
        "--kubelet-config", str(kubelet_config),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    obj = json.loads(p.stdout)
    assert obj["metadata"]["name"] == NODE
    assert [a["value"] for a in obj["attributes"]] == ["single-numa-node", "pod"]
    # No per-node totals from this pass without the pods: the shared-pool listings of
    # logger and nginx are kubelet's (older kubelets), and without the API server they
    # cannot be told apart, so zone 1 is the one zone they do not touch... check it.
    assert {z["name"]: resources(z) for z in obj["zones"]} == by_hand()
    assert p.stderr.strip().endswith("False")  # fastapi never loaded


def test_publishes_through_the_api_server(
    fake_api: FakeApiServer,
    host: HostRoot,
    kubelet: PodResourcesStandIn,
    kubelet_config: Path,
    tmp_path: Path,
) -> None:
    fake_api.create_node(NODE)
    for pod in pod_objects(NODE):
        fake_api.objects.create("pods", pod, namespace=pod["metadata"]["namespace"])
    kubeconfig = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    p = nfd(
        "topology-updater", "--node-name", NODE, "--oneshot", "--kubeconfig", str(kubeconfig),
        "--host-root", str(Path(host.sys).parent), "--podresources-socket", str(kubelet.socket),
        "--kubelet-config", str(kubelet_config),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    got = fake_api.objects.get("noderesourcetopologies", NODE)
    assert {z["name"]: resources(z) for z in got["zones"]} == by_hand()
    assert p.stderr.strip().endswith("False")


def test_usage_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    p = nfd("topology-updater", "--no-publish", env=env)
    assert p.returncode == 2 and "--node-name (or $NODE_NAME) is required" in p.stderr
    p = nfd("topology-updater", "--node-name", "n", "--interval", "0", "--no-publish", env=env)
    assert p.returncode == 2 and "--interval 0.0: must be positive" in p.stderr


def test_missing_socket_in_oneshot_is_exit_1_with_one_line(tmp_path: Path) -> None:
    p = nfd(
        "topology-updater", "--node-name", "n", "--no-publish", "--oneshot", "--kubelet-config", "",
        "--podresources-socket", str(tmp_path / "none.sock"), "--host-root", str(tmp_path),
    )  # fmt: skip
    assert p.returncode == 1
    lines = [ln for ln in p.stderr.splitlines() if "none.sock" in ln]
    assert len(lines) == 1 and "no such socket" in lines[0], p.stderr


def test_unknown_policy_is_one_line_and_the_object_still_goes_out(
    host: HostRoot, kubelet: PodResourcesStandIn, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("topologyManagerPolicy: numa-magic\n")
    p = nfd(
        "topology-updater", "--node-name", NODE, "--no-publish", "--oneshot",
        "--host-root", str(Path(host.sys).parent), "--podresources-socket", str(kubelet.socket),
        "--kubelet-config", str(config),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "numa-magic" in ln]
    assert len(lines) == 1 and str(config) in lines[0] and "topologyManagerPolicy" in lines[0], p.stderr
    obj = json.loads(p.stdout)
    assert "attributes" not in obj and len(obj["zones"]) == 8
