"""The e2e suite's real-cluster mode, exercised against a FakeApiServer standing in for
the cluster: the switch picks the kubeconfig, fake-only tests are skipped with a reason,
and the Nodes the tests made are gone afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fakeapi import FakeApiServer

ROOT = Path(__file__).resolve().parents[2]


def test_real_cluster_mode_uses_kubeconfig_and_cleans_up(fake_api: FakeApiServer, tmp_path: Path) -> None:
    fake_api.create_node("someone-elses-node")
    kubeconfig = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "NFD_E2E_REAL_CLUSTER": "1", "NFD_E2E_KUBECONFIG": str(kubeconfig)}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
            "tests/e2e/test_cluster_switch.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 passed, 1 skipped" in out.stdout
    assert "needs the fake API server" in out.stdout
    # The suite made nodes through the "cluster" and deleted them; others' nodes stay.
    assert fake_api.log.count(verb="create", resource="nodes") == 3
    assert fake_api.log.count(verb="delete", resource="nodes", status=200) == 3
    assert [n["metadata"]["name"] for n in fake_api.nodes()] == ["someone-elses-node"]
