"""``nfd prune`` against the fake API server: what it plans for a Node (pure), that the
RBAC of deploy/prune is enough and nothing more is used, that a Node changed under it
is read again, that a prune cut short can be run again, that the DRA driver's
ResourceSlices go, and that errors are one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from nfd.cli import main
from nfd.devices.config import DEFAULT_DRIVER_NAME
from nfd.features import Features
from nfd.master.publishing.patches import ANNOTATIONS_ANN, ER_ANN, LABELS_ANN, TAINTS_ANN
from nfd.master.publishing.prune import plan
from nfd.nodefeature import for_worker
from tests.fakeapi import node_object
from tests.fakeapi.patch import apply_json_patch

REPO = Path(__file__).resolve().parents[2]
NS = "node-feature-discovery"
FNS = "feature.node.kubernetes.io"
PRUNE_SA = "system:serviceaccount:nfd-prune:nfd-prune"


def nfd_node(name: str) -> dict[str, Any]:
    """A Node as nfd's master leaves it, with what others set besides: a label by hand in
    nfd's namespace, another writer's taint and resource, a taint with nfd's key but
    another value."""
    return node_object(
        name,
        labels={f"{FNS}/cpu-x": "true", "vendor.example.com/v": "1", f"{FNS}/by-hand": "yes"},
        annotations={
            LABELS_ANN: "cpu-x,vendor.example.com/v",
            ANNOTATIONS_ANN: "note",
            ER_ANN: "widgets,example.com/gone",
            TAINTS_ANN: "example.com/t=yes:NoSchedule",
            f"{FNS}/note": "from a rule",
            "nfd.node.kubernetes.io/worker.version": "v0.15.0",  # upstream's, of an earlier install
            "team.example.com/note": "mine",
        },
        capacity={f"{FNS}/widgets": "3", "example.com/theirs": "1"},
        taints=[
            {"key": "example.com/t", "value": "yes", "effect": "NoSchedule"},
            {"key": "example.com/t", "value": "other", "effect": "NoSchedule"},
            {"key": "team.example.com/dedicated", "effect": "NoExecute"},
        ],
    )


def others_only(node: dict[str, Any]) -> dict[str, Any]:
    """``nfd_node`` less what nfd set."""
    meta, status = node["metadata"], node["status"]
    return {
        "labels": {k: v for k, v in meta["labels"].items() if k not in (f"{FNS}/cpu-x", "vendor.example.com/v")},
        "annotations": {k: v for k, v in meta["annotations"].items() if k in ("node.alpha.kubernetes.io/ttl", "team.example.com/note")},
        "capacity": {k: v for k, v in status["capacity"].items() if k != f"{FNS}/widgets"},
        "allocatable": {k: v for k, v in status["allocatable"].items() if k != f"{FNS}/widgets"},
        "taints": [t for t in node["spec"]["taints"] if t.get("value") != "yes"],
    }  # fmt: skip


def touched(node: dict[str, Any]) -> dict[str, Any]:
    meta, status = node["metadata"], node["status"]
    return {
        "labels": meta.get("labels"),
        "annotations": meta.get("annotations"),
        "capacity": status.get("capacity"),
        "allocatable": status.get("allocatable"),
        "taints": (node.get("spec") or {}).get("taints"),
    }


def test_plan_names_what_the_records_name_and_its_patches_remove_just_that():
    node = nfd_node("n1")
    node["metadata"]["resourceVersion"] = "7"
    p = plan(node)
    assert p.labels == (f"{FNS}/cpu-x", "vendor.example.com/v")
    assert p.annotations == (
        f"{FNS}/note",
        "nfd.node.kubernetes.io/extended-resources",
        "nfd.node.kubernetes.io/feature-annotations",
        "nfd.node.kubernetes.io/feature-labels",
        "nfd.node.kubernetes.io/taints",
        "nfd.node.kubernetes.io/worker.version",
    )
    assert p.extended_resources == (f"{FNS}/widgets",)  # example.com/gone: recorded, not there
    assert p.taints == ("example.com/t=yes:NoSchedule",)
    # The taints are rewritten whole: only while the Node is as read.
    assert p.node_ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    after = apply_json_patch(apply_json_patch(node, list(p.status_ops)), list(p.node_ops))
    assert touched(after) == others_only(node)
    assert plan(after).items() == [] and not plan(after).node_ops and not plan(after).status_ops


def test_a_node_nfd_never_touched_has_nothing_to_prune():
    node = node_object("n", labels={f"{FNS}/by-hand": "yes"}, taints=[{"key": "k", "effect": "NoSchedule"}])
    p = plan(node)
    assert p.items() == [] and p.node_ops == () and p.status_ops == ()


def prune(*args: str) -> int:
    return main(["prune", *args])


def a_slice(name: str, node: str, driver: str = DEFAULT_DRIVER_NAME) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "d0"}],
        },
    }


def slice_names(fake_api: Any) -> set[str]:
    return {s["metadata"]["name"] for s in fake_api.objects.list("resourceslices")}


def test_prune_runs_on_its_shipped_rbac_alone(fake_api, tmp_path, capsys):
    rbac = [d for d in yaml.safe_load_all((REPO / "deploy/prune/rbac.yaml").read_text()) if d]
    fake_api.authz.load_rbac(rbac, NS)
    fake_api.enforce_rbac = True
    fake_api.objects.create("nodes", nfd_node("n1"))
    fake_api.create_node("n2")  # nfd never wrote here
    for n in ("n1", "gone"):  # a gone node's objects go too
        fake_api.objects.create("nodefeatures", for_worker(node=n, namespace=NS, features=Features()))
        fake_api.objects.create("resourceslices", a_slice(f"{n}-nfd", n))
    fake_api.objects.create("resourceslices", a_slice("n1-theirs", "n1", driver="gpu.example.com"))
    kc = fake_api.write_kubeconfig(
        tmp_path / "kc", token=fake_api.tokens.issue_service_account("nfd-prune", "nfd-prune")
    )
    # The first Node patch finds the Node changed: it is read again and patched anew.
    fake_api.faults.fail(422, verb="patch", path="^/api/v1/nodes/n1$")
    since = fake_api.log.mark()

    assert prune("--kubeconfig", str(kc)) == 0
    out = capsys.readouterr().out.splitlines()
    assert "removed from node n1: label feature.node.kubernetes.io/cpu-x" in out
    assert f"deleted NodeFeature {NS}/gone" in out
    assert "deleted ResourceSlice gone-nfd" in out
    assert out[-1] == "removed 10 items from 1 node, deleted 2 NodeFeature objects and 2 ResourceSlices"
    assert touched(fake_api.node("n1")) == others_only(nfd_node("n1"))
    assert fake_api.objects.list("nodefeatures") == []
    assert slice_names(fake_api) == {"n1-theirs"}
    mine = [r for r in fake_api.log.records(since=since) if r.user == PRUNE_SA]
    assert [r for r in mine if r.status == 403] == []
    assert {(r.verb, r.resource_path) for r in mine} == {
        ("list", "nodes"),
        ("get", "nodes"),
        ("patch", "nodes"),
        ("patch", "nodes/status"),
        ("list", "nodefeatures.nfd.k8s-sigs.io"),
        ("delete", "nodefeatures.nfd.k8s-sigs.io"),
        ("list", "resourceslices.resource.k8s.io"),
        ("delete", "resourceslices.resource.k8s.io"),
    }
    # Only the driver's slices are listed: the server selects them.
    assert {r.query for r in mine if r.resource == "resourceslices.resource.k8s.io" and r.verb == "list"} == {
        f"fieldSelector=spec.driver%3D{DEFAULT_DRIVER_NAME}&limit=500"
    }
    assert not [r for r in mine if r.name == "n2" and r.verb == "patch"]


def test_dry_run_changes_nothing(fake_api, tmp_path, capsys):
    fake_api.objects.create("nodes", nfd_node("n1"))
    fake_api.objects.create("nodefeatures", for_worker(node="n1", namespace=NS, features=Features()))
    fake_api.objects.create("resourceslices", a_slice("n1-nfd", "n1"))
    kc = fake_api.write_kubeconfig(tmp_path / "kc")
    since = fake_api.log.mark()
    assert prune("--kubeconfig", str(kc), "--dry-run") == 0
    out = capsys.readouterr().out.splitlines()
    assert "would remove from node n1: taint example.com/t=yes:NoSchedule" in out
    assert f"would delete NodeFeature {NS}/n1" in out
    assert "would delete ResourceSlice n1-nfd" in out
    assert (
        out[-1]
        == "dry run: would remove 10 items from 1 node, delete 1 NodeFeature object and 1 ResourceSlice"
    )
    assert fake_api.log.writes(since=since) == []


def test_a_prune_cut_short_is_finished_by_the_next_run(fake_api, tmp_path, capsys):
    fake_api.objects.create("nodes", nfd_node("n1"))
    kc = fake_api.write_kubeconfig(tmp_path / "kc")
    # Resources come off first; the Node patch (with the records) fails for good.
    fake_api.faults.fail(500, times=None, verb="patch", path="^/api/v1/nodes/n1$")
    assert prune("--kubeconfig", str(kc)) == 1
    err = capsys.readouterr().err
    assert err.startswith("nfd prune: error: node n1: 500") and err.count("\n") == 1, err
    left = fake_api.node("n1")
    assert f"{FNS}/widgets" not in left["status"]["capacity"]
    assert left["metadata"]["annotations"][LABELS_ANN] == "cpu-x,vendor.example.com/v"
    fake_api.faults.clear()
    assert prune("--kubeconfig", str(kc)) == 0
    assert touched(fake_api.node("n1")) == others_only(nfd_node("n1"))


def test_a_node_that_fails_does_not_stop_the_others(fake_api, tmp_path, capsys):
    for n in ("n1", "n2"):
        fake_api.objects.create("nodes", nfd_node(n))
    kc = fake_api.write_kubeconfig(tmp_path / "kc")
    fake_api.faults.fail(422, times=None, verb="patch", path="^/api/v1/nodes/n1$")
    assert prune("--kubeconfig", str(kc)) == 1
    assert "nfd prune: error: node n1: 422" in capsys.readouterr().err
    assert touched(fake_api.node("n2")) == others_only(nfd_node("n2"))


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--node", "a", "--selector", "x=y"], 2, "not allowed with argument"),
        (["--selector", "a b"], 2, "--selector 'a b': 400"),
        (["--node", "nope"], 1, "node nope: no such Node"),
        (
            ["--dra-driver", "Bad_Driver"],
            2,
            "--dra-driver: 'Bad_Driver' must be a lowercase RFC 1123 subdomain",
        ),
    ],
)
def test_errors_are_one_line(fake_api, tmp_path, capsys, args, code, message):
    kc = fake_api.write_kubeconfig(tmp_path / "kc")
    assert prune("--kubeconfig", str(kc), *args) == code
    err = capsys.readouterr().err
    assert err.startswith("nfd prune: error: ") and message in err and err.count("\n") == 1, err


def test_no_cluster_or_no_rights_is_one_line(fake_api, tmp_path, capsys):
    assert prune("--kubeconfig", str(tmp_path / "missing")) == 2
    assert capsys.readouterr().err == f"nfd prune: error: --kubeconfig {tmp_path / 'missing'}: no such file\n"
    fake_api.enforce_rbac = True
    kc = fake_api.write_kubeconfig(tmp_path / "kc", token=fake_api.tokens.issue_service_account(NS, "nobody"))
    assert prune("--kubeconfig", str(kc)) == 1
    err = capsys.readouterr().err
    assert err.startswith("nfd prune: error: cannot list nodes: 403") and err.count("\n") == 1, err
    fake_api.stop()
    assert prune("--kubeconfig", str(kc)) == 1
    err = capsys.readouterr().err
    assert err.startswith("nfd prune: error: cannot list nodes: ") and err.count("\n") == 1, err


def test_without_the_nodefeature_or_resourceslice_api_the_nodes_are_still_pruned(fake_api, tmp_path, capsys):
    # The install's deletion took the CRDs, and every NodeFeature object with them; a
    # cluster before Kubernetes 1.34 serves no resource.k8s.io/v1.
    fake_api.objects.create("nodes", nfd_node("n1"))
    fake_api.faults.fail(404, times=None, path="^/apis/(nfd.k8s-sigs.io|resource.k8s.io)/")
    kc = fake_api.write_kubeconfig(tmp_path / "kc")
    assert prune("--kubeconfig", str(kc)) == 0
    assert (
        capsys.readouterr().out.splitlines()[-1]
        == "removed 10 items from 1 node, deleted 0 NodeFeature objects and 0 ResourceSlices"
    )
    assert touched(fake_api.node("n1")) == others_only(nfd_node("n1"))


def test_scoped_prune_deletes_the_named_drivers_slices_of_those_nodes_only(fake_api, tmp_path, capsys):
    for n in ("n1", "n2"):
        fake_api.objects.create("nodes", nfd_node(n))
        fake_api.objects.create("resourceslices", a_slice(f"{n}-nfd", n))
        fake_api.objects.create("resourceslices", a_slice(f"{n}-custom", n, driver="dra.example.com"))
        fake_api.objects.create("resourceslices", a_slice(f"{n}-theirs", n, driver="gpu.example.com"))
    kc = fake_api.write_kubeconfig(tmp_path / "kc")
    # An install with its own dra.driverName: the flag names it, besides the default.
    args = ["--node", "n1", "--dra-driver", "dra.example.com", "--dra-driver", DEFAULT_DRIVER_NAME]
    assert prune("--kubeconfig", str(kc), *args) == 0
    out = capsys.readouterr().out.splitlines()
    assert [x for x in out if "ResourceSlice " in x] == [
        "deleted ResourceSlice n1-custom",
        "deleted ResourceSlice n1-nfd",
    ]
    assert slice_names(fake_api) == {"n1-theirs", "n2-nfd", "n2-custom", "n2-theirs"}
    # One driver named: the default is not implied.
    assert prune("--kubeconfig", str(kc), "--dra-driver", "dra.example.com") == 0
    assert slice_names(fake_api) == {"n1-theirs", "n2-nfd", "n2-theirs"}


def test_a_slice_that_cannot_be_deleted_is_an_error_and_the_others_go(fake_api, tmp_path, capsys):
    for n in ("n1", "n2"):
        fake_api.create_node(n)
        fake_api.objects.create("resourceslices", a_slice(f"{n}-nfd", n))
    kc = fake_api.write_kubeconfig(tmp_path / "kc")
    fake_api.faults.fail(
        500, times=None, verb="delete", path="^/apis/resource.k8s.io/v1/resourceslices/n1-nfd$"
    )
    assert prune("--kubeconfig", str(kc)) == 1
    err = capsys.readouterr().err
    assert err.startswith("nfd prune: error: ResourceSlice n1-nfd: 500") and err.count("\n") == 1, err
    assert slice_names(fake_api) == {"n1-nfd"}
