"""The e2e suite's switch, with a FakeApiServer standing in for a "real" cluster: the
environment picks the kubeconfig, an unusable cluster gives a reason to skip, fake-only
tests are marked skipped, and the harness deletes the Nodes it made and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import RUN_LABEL, E2ECluster, connect_real_cluster, mark_fake_only
from tests.fakeapi import FakeApiServer


def test_environment_switch(fake_api: FakeApiServer, tmp_path: Path) -> None:
    kubeconfig = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    assert connect_real_cluster({}) is None
    assert connect_real_cluster({"NFD_E2E_KUBECONFIG": str(kubeconfig)}) is None  # asked for with both only
    reason = connect_real_cluster({"NFD_E2E_REAL_CLUSTER": "1"})
    assert reason == "NFD_E2E_REAL_CLUSTER=1 but NFD_E2E_KUBECONFIG is not set"
    reason = connect_real_cluster({"NFD_E2E_REAL_CLUSTER": "1", "NFD_E2E_KUBECONFIG": str(tmp_path / "none")})
    assert isinstance(reason, str) and "is not a file" in reason
    garbage = tmp_path / "garbage"
    garbage.write_text("x")
    reason = connect_real_cluster({"NFD_E2E_REAL_CLUSTER": "1", "NFD_E2E_KUBECONFIG": str(garbage)})
    assert isinstance(reason, str) and "is unusable" in reason
    fake_api.faults.down(mode="reset")  # a cluster that does not answer
    reason = connect_real_cluster({"NFD_E2E_REAL_CLUSTER": "1", "NFD_E2E_KUBECONFIG": str(kubeconfig)})
    assert isinstance(reason, str) and "is unusable" in reason
    fake_api.faults.up()
    found = connect_real_cluster({"NFD_E2E_REAL_CLUSTER": "1", "NFD_E2E_KUBECONFIG": str(kubeconfig)})
    assert isinstance(found, tuple) and found[1] == kubeconfig
    found[0].close()


def test_real_mode_harness_cleans_up_only_its_nodes(fake_api: FakeApiServer, tmp_path: Path) -> None:
    fake_api.create_node("someone-elses-node")
    found = connect_real_cluster(
        {"NFD_E2E_REAL_CLUSTER": "1", "NFD_E2E_KUBECONFIG": str(fake_api.write_kubeconfig(tmp_path / "kc"))}
    )
    assert isinstance(found, tuple)
    api_client, kubeconfig = found
    cluster = E2ECluster(api_client, kubeconfig, None, "nfd-e2e-abc-", "abc")
    assert cluster.real
    a = cluster.make_node("a", labels={"x": "1"}, capacity={"example.com/w": "1"})
    node = fake_api.node(a)
    assert (
        node["metadata"]["labels"][RUN_LABEL] == "abc" and node["status"]["capacity"]["example.com/w"] == "1"
    )
    # A node made another way but carrying this run's label and prefix goes too.
    fake_api.create_node("nfd-e2e-abc-b", labels={RUN_LABEL: "abc"})
    cluster.cleanup()
    api_client.close()
    assert [n["metadata"]["name"] for n in fake_api.nodes()] == ["someone-elses-node"]
    assert fake_api.log.count(verb="delete", resource="nodes") == 2


class _Item:
    def __init__(self, fake_only: bool) -> None:
        self.fake_only = fake_only
        self.added: list[Any] = []

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "fake_only" and self.fake_only else None

    def add_marker(self, marker: Any) -> None:
        self.added.append(marker)


def test_fake_only_tests_are_skipped_on_a_real_cluster() -> None:
    items = [_Item(True), _Item(False)]
    mark_fake_only(items, real=False)  # type: ignore[arg-type]
    assert not items[0].added
    mark_fake_only(items, real=True)  # type: ignore[arg-type]
    assert not items[1].added
    (skip,) = items[0].added
    assert skip.mark.name == "skip" and "fault injection" in skip.mark.kwargs["reason"]
    assert isinstance(pytest.mark.fake_only, pytest.MarkDecorator)
