"""The real-node suite: nfd installed from its image on a real Kubernetes node.

It runs with ``NFD_REALNODE=1`` (``make realnode`` sets it, brings the node up and loads
the image). Without it, or without root, ``kubectl`` or the cluster's directory, every
test is skipped with the reason; with ``NFD_REALNODE_REQUIRED=1`` (CI) those reasons are
failures instead (and under ``CI=true``), so a CI run cannot pass without the real node.

| variable | default |
|---|---|
| ``NFD_REALCLUSTER_DIR`` | ``../shared/realcluster`` beside the repository |
| ``NFD_REALNODE_KUBECONFIG`` | ``/var/lib/realcluster/admin.kubeconfig`` |
| ``NFD_REALNODE_IMAGE`` | ``localhost/nfd:image-test`` (already loaded into the node) |
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from realnode.node import NAMESPACE, REPO, NodeError, RealNode

ENV_RUN = "NFD_REALNODE"
ENV_REQUIRED = "NFD_REALNODE_REQUIRED"


def unusable(env: dict[str, str] | os._Environ[str]) -> tuple[str | None, RealNode | None]:
    """Why the real node cannot be used (None when it can), and the node."""
    if env.get(ENV_RUN) != "1":
        return f"the real-node suite runs with {ENV_RUN}=1 (make realnode)", None
    cluster_dir = Path(env.get("NFD_REALCLUSTER_DIR", REPO.parent / "shared" / "realcluster"))
    kubeconfig = Path(env.get("NFD_REALNODE_KUBECONFIG", "/var/lib/realcluster/admin.kubeconfig"))
    if os.geteuid() != 0:
        return "the real node needs root (nsenter, host device nodes)", None
    if not (cluster_dir / "up").is_file():
        return f"no real cluster tooling at {cluster_dir}", None
    if shutil.which("kubectl") is None:
        return "kubectl is not on PATH", None
    if not kubeconfig.is_file():
        return f"{kubeconfig} is missing: is the real node up?", None
    work = REPO / ".realnode"
    work.mkdir(exist_ok=True)
    node = RealNode(cluster_dir, kubeconfig, env.get("NFD_REALNODE_IMAGE", "localhost/nfd:image-test"), work)
    try:
        node.kubectl("get", "--raw=/readyz", timeout=20)
    except (NodeError, subprocess.TimeoutExpired) as e:
        return f"the real node's API server does not answer: {e}", None
    return None, node


@pytest.fixture(scope="session")
def real_node() -> Iterator[RealNode]:
    reason, node = unusable(os.environ)
    if reason is not None or node is None:
        if os.environ.get(ENV_REQUIRED) == "1" or os.environ.get("CI") == "true":
            pytest.fail(f"{ENV_REQUIRED}=1 but {reason}", pytrace=False)
        pytest.skip(reason or "no real node")
    (node.work / "report.json").unlink(missing_ok=True)
    if node.exists("namespace", NAMESPACE):
        raise NodeError(f"namespace {NAMESPACE} exists before the suite: uninstall nfd from the node first")
    yield node


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    report = REPO / ".realnode" / "report.json"
    if os.environ.get(ENV_RUN) == "1" and report.is_file():
        terminalreporter.section("real-node figures")
        terminalreporter.write_line(report.read_text())
