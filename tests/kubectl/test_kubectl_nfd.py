"""``kubectl nfd`` against the fake API server and a master serving behind its service
proxy (which, as the API server's, drops the caller's Authorization header)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from nfd.commands.kubectl import main
from tests.master.kubehelpers import MasterHandle, kube_master, wait_for

NS = "node-feature-discovery"
GPU_RULE = {
    "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
    "kind": "NodeFeatureRule",
    "metadata": {"name": "gpu"},
    "spec": {
        "rules": [
            {
                "name": "gpu",
                "labels": {"gpu": "old"},
                "matchFeatures": [
                    {"feature": "fixture.labels", "matchExpressions": {"gpu": {"op": "Exists"}}}
                ],
            }
        ]
    },
}


def rule(name: str, labels: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": name},
        "spec": {"rules": [{"name": name, "labels": labels, **extra}]},
    }


@contextmanager
def cluster(fake_api: Any, tmp_path: Path) -> Iterator[tuple[MasterHandle, list[str]]]:
    """Two nodes known to the master (n1 with a gpu, n2 without), the master behind the
    service proxy, and the arguments every verb needs."""
    fake_api.objects.create("nodefeaturerules", GPU_RULE)
    for name in ("n1", "n2"):
        fake_api.create_node(name, labels={"pool": "gpu" if name == "n1" else "cpu"})
    with kube_master(fake_api, auth__enabled=True, auth__audience="nfd-master", rules__watch=True) as m:
        url = urlsplit(str(m.client.base_url))
        fake_api.service_backends[(NS, "https:nfd-master:8080")] = ("http", url.hostname, url.port)
        for name, labels in (("n1", {"gpu": "1", "cpu": "x"}), ("n2", {"cpu": "y"})):
            worker = fake_api.issue_worker_token(name, audiences=("nfd-master",))
            assert m.put(name, labels, token=worker).status_code == 200
        wait_for(m.settled, what="published")
        wait_for(
            lambda: "feature.node.kubernetes.io/gpu" in m.runtime.service.store.get("n1").decision.labels
        )
        yield m, ["--kubeconfig", str(fake_api.write_kubeconfig(tmp_path / "kubeconfig"))]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_nodes_table_and_json_through_the_service_proxy(fake_api, tmp_path, capsys):
    with cluster(fake_api, tmp_path) as (_m, kc):
        code, out, err = run(capsys, "nodes", *kc)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[1].split()[:2] == ["NODE", "IN"]
        rows = {ln.split()[0]: ln.split() for ln in lines[2:]}
        assert set(rows) == {"n1", "n2"} and rows["n1"][1:3] == ["yes", "3"]
        code, out, err = run(capsys, "nodes", *kc, "-o", "json", "-l", "pool=gpu")
        doc = json.loads(out)
        assert code == 0 and doc["source"] == "master"
        assert [n["node"] for n in doc["nodes"]] == ["n1"]
        assert doc["nodes"][0]["in_sync"] is True and doc["nodes"][0]["last_seen"]
    proxied = fake_api.log.records(resource="services")
    assert proxied and all(r.subresource == "proxy" for r in proxied)


def test_nodes_falls_back_to_the_node_objects_when_the_master_refuses(fake_api, tmp_path, capsys):
    with cluster(fake_api, tmp_path) as (_m, kc):
        nobody = fake_api.tokens.issue_service_account("ops", "nobody")  # may not list nodes
        code, out, err = run(capsys, "nodes", *kc, "--token", nobody, "-o", "json")
        doc = json.loads(out)
        assert code == 0 and doc["source"] == "nodes" and "403" in doc["masterError"]
        by = {n["node"]: n for n in doc["nodes"]}
        assert by["n1"]["labels"] == 3 and by["n1"]["in_sync"] is None
        code, out, err = run(capsys, "nodes", *kc, "--token", nobody)
        assert code == 0 and err.count("\n") == 1 and "Node objects" in err


def test_node_tells_each_labels_origin(fake_api, tmp_path, capsys):
    with cluster(fake_api, tmp_path) as (_m, kc):
        code, out, err = run(capsys, "node", "n1", *kc)
        assert code == 0, err
        origin = {ln.split()[0]: " ".join(ln.split()[1:]) for ln in out.splitlines() if ln.startswith("  ")}
        assert origin["feature.node.kubernetes.io/gpu=old"] == "NodeFeatureRule gpu"
        assert origin["feature.node.kubernetes.io/fixture-cpu=x"] == "worker"
        code, out, _ = run(capsys, "node", "n1", *kc, "-o", "json")
        assert json.loads(out)["labelOrigins"]["feature.node.kubernetes.io/gpu"] == "NodeFeatureRule gpu"
        code, _, err = run(capsys, "node", "nope", *kc)
        assert code == 1 and "no features for node 'nope'" in err and err.count("\n") == 1
        code, _, err = run(capsys, "node", "Bad_Name", *kc)
        assert code == 2 and err.count("\n") == 1


def test_rules_test_cluster_diffs_every_node_and_writes_nothing(fake_api, tmp_path, capsys):
    proposed = tmp_path / "rules.yaml"
    proposed.write_text(
        yaml.safe_dump_all(
            [
                rule("gpu", {"gpu": "new"}, matchFeatures=GPU_RULE["spec"]["rules"][0]["matchFeatures"]),
                rule("everyone", {"fleet": "yes", "kubernetes.io/bad": "x"}, annotations={"note": "hi"}),
            ]
        )
    )
    with cluster(fake_api, tmp_path) as (_m, kc):
        writes = len([r for r in fake_api.log.records() if r.verb not in ("get", "list", "watch", "create")])
        code, out, err = run(capsys, "rules", "test", "--cluster", "-f", str(proposed), *kc, "-o", "json")
        assert code == 0, err
        by = {d["node"]: d for d in json.loads(out)["nodes"]}
        n1, n2 = by["n1"], by["n2"]
        assert n1["changed"] == {"labels": {"feature.node.kubernetes.io/gpu": ["old", "new"]}}
        assert n1["added"]["labels"] == {"feature.node.kubernetes.io/fleet": "yes"}
        assert n1["added"]["annotations"] == {"feature.node.kubernetes.io/note": "hi"}
        assert "kubernetes.io/bad" in n1["rejected"]["labels"]
        assert "changed" not in n2 or not n2["changed"]
        assert n2["added"]["labels"] == {"feature.node.kubernetes.io/fleet": "yes"}
        # The text form, one node by selector
        code, out, err = run(capsys, "rules", "test", "--cluster", "-f", str(proposed), *kc, "-l", "pool=gpu")
        assert code == 0, err
        assert "node n1:" in out and "node n2:" not in out
        assert "  ~ label feature.node.kubernetes.io/gpu=old -> new" in out
        assert "1 of 1 node(s) would change" in out
        after = len([r for r in fake_api.log.records() if r.verb not in ("get", "list", "watch", "create")])
        assert after == writes  # nothing written by the test (the SAR/TokenReview creates aside)


def test_rules_test_cluster_starts_from_the_labels_the_worker_gave(fake_api, tmp_path, capsys):
    # n1's worker gives fixture-cpu=x, n2's fixture-cpu=y: a rule setting that label
    # changes what each node carries, it adds nothing.
    proposed = tmp_path / "rules.yaml"
    proposed.write_text(yaml.safe_dump(rule("cpu", {"fixture-cpu": "z"})))
    with cluster(fake_api, tmp_path) as (_m, kc):
        code, out, err = run(capsys, "rules", "test", "--cluster", "-f", str(proposed), *kc, "-o", "json")
        assert code == 0, err
        by = {d["node"]: d for d in json.loads(out)["nodes"]}
        for node, was in (("n1", "x"), ("n2", "y")):
            assert by[node]["changed"] == {"labels": {"feature.node.kubernetes.io/fixture-cpu": [was, "z"]}}
            assert "feature.node.kubernetes.io/fixture-cpu" not in (by[node].get("added") or {}).get(
                "labels", {}
            )


def test_rules_test_cluster_removing_a_rule_shows_removals(fake_api, tmp_path, capsys):
    proposed = tmp_path / "rules.yaml"
    proposed.write_text(yaml.safe_dump(rule("gpu", {})))  # the gpu object, emptied
    with cluster(fake_api, tmp_path) as (_m, kc):
        code, out, err = run(capsys, "rules", "test", "--cluster", "-f", str(proposed), *kc, "-o", "json")
        assert code == 0, err
        by = {d["node"]: d for d in json.loads(out)["nodes"]}
        assert by["n1"]["removed"] == {"labels": {"feature.node.kubernetes.io/gpu": "old"}}


def test_rules_test_cluster_without_a_master_token_is_one_line(fake_api, tmp_path, capsys):
    proposed = tmp_path / "rules.yaml"
    proposed.write_text(yaml.safe_dump(GPU_RULE))
    with cluster(fake_api, tmp_path) as (_m, kc):
        nobody = fake_api.tokens.issue_service_account("ops", "nobody")
        code, _out, err = run(
            capsys, "rules", "test", "--cluster", "-f", str(proposed), *kc, "--token", nobody
        )
        assert code == 1 and err.count("\n") == 1 and "403" in err, err
        code, _, err = run(capsys, "rules", "test", "--cluster", "-f", str(proposed), "--explain", *kc)
        assert code == 2 and "--explain" in err


def test_a_master_ca_without_a_master_url_is_one_line(tmp_path, capsys):
    ca = tmp_path / "ca.crt"
    ca.write_text("")
    for argv in (["nodes"], ["rules", "test", "--cluster", "-f", str(ca)]):
        code, _out, err = run(capsys, *argv, "--master-ca", str(ca))
        assert code == 2 and err.count("\n") == 1 and "--master-ca goes with --master-url" in err, err


def test_prune_is_nfd_prune(fake_api, tmp_path, capsys):
    with cluster(fake_api, tmp_path) as (_m, kc):
        code, out, err = run(capsys, "prune", "--dry-run", *kc[:2])
        assert code == 0, err
        assert "dry run: would remove" in out and "from 2 nodes" in out


def test_what_fails_is_one_line_with_its_exit_code(fake_api, tmp_path, capsys):
    with cluster(fake_api, tmp_path) as (m, kc):
        url = urlsplit(str(m.client.base_url))
        direct = ["--master-url", f"http://{url.hostname}:{url.port}"]
        # The master itself says it holds nothing of the node (its 404, not the proxy's).
        code, _, err = run(capsys, "node", "nope", *kc, *direct)
        assert code == 1 and "no features for node 'nope'" in err and err.count("\n") == 1, err
        # The master does not answer: the Node object, with a one-line warning.
        code, out, err = run(capsys, "node", "n1", *kc, "--master-url", "http://127.0.0.1:9")
        assert code == 0 and err.count("\n") == 1 and "cannot reach the master at" in err, err
        assert "Node object" in err and out
        # The API server could not parse the selector: a usage error.
        code, _, err = run(capsys, "nodes", *kc, "-l", "a in (")
        assert code == 2 and err.count("\n") == 1 and "--selector 'a in ('" in err, err
    # No API server at all.
    kubeconfig = tmp_path / "gone.yaml"
    kubeconfig.write_text(
        yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        })
    )  # fmt: skip
    code, _, err = run(capsys, "nodes", "--kubeconfig", str(kubeconfig))
    assert code == 1 and err.count("\n") == 1 and "cannot reach the API server" in err, err
