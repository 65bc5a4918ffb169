"""Rule outputs through the master (rules from --rules-dir), in memory mode."""

from __future__ import annotations

import textwrap
import time

from nfd.rules import load_rulesets

from .helpers import features_with

FNS = "feature.node.kubernetes.io"

RULES = textwrap.dedent("""
    apiVersion: nfd.k8s-sigs.io/v1alpha1
    kind: NodeFeatureRule
    metadata: {name: gpu}
    spec:
      rules:
        - name: gpu node
          labels: {"gpu-ready": "true", "vendor.example.com/fast": "yes", "kubernetes.io/bad": "x"}
          annotations: {"gpu-note": "present"}
          extendedResources: {"vendor.example.com/widgets": "4", "nvidia.com/gpu": "8", "oops": "many"}
          taints: [{key: "feature.node.kubernetes.io/gpu", value: "true", effect: NoSchedule}]
          matchFeatures:
            - feature: fixture.labels
              matchExpressions: {gpu: {op: Exists}}
""")


def test_rules_from_dir_give_labels_annotations_resources_taints(master, tmp_path):
    (tmp_path / "gpu.yaml").write_text(RULES)
    c = master(
        rules__rules_dir=tmp_path, policy__enable_taints=True, policy__extra_label_ns=["vendor.example.com"]
    )
    body = {"features": features_with({"gpu": "1"}), "devicePluginResources": ["nvidia.com/gpu"]}
    got = c.put("/api/v1/nodes/g1/features", json=body).json()
    assert got["labels"][f"{FNS}/gpu-ready"] == "true"
    assert got["labels"]["vendor.example.com/fast"] == "yes"
    assert "kubernetes.io/bad" in got["rejected"]["labels"]
    assert got["annotations"] == {f"{FNS}/gpu-note": "present"}
    assert got["extendedResources"] == {"vendor.example.com/widgets": "4"}
    # A device plugin serves nvidia.com/gpu on this node: never patched by the master.
    assert "device plugin" in got["rejected"]["extendedResources"]["nvidia.com/gpu"]
    assert f"{FNS}/oops" in got["rejected"]["extendedResources"]
    assert got["taints"] == [{"key": f"{FNS}/gpu", "value": "true", "effect": "NoSchedule"}]
    plain = c.put("/api/v1/nodes/p1/features", json={"features": features_with({"cpu": "1"})}).json()
    assert plain["labels"] == {f"{FNS}/fixture-cpu": "1"} and plain["taints"] == []
    metrics = c.get("/metrics").text
    assert "nfd_master_node_extendedresources_rejected_total 2.0" in metrics


def test_taints_rejected_unless_enabled(master, tmp_path):
    (tmp_path / "gpu.yaml").write_text(RULES)
    c = master(rules__rules_dir=tmp_path)
    got = c.put("/api/v1/nodes/g1/features", json={"features": features_with({"gpu": "1"})}).json()
    assert got["taints"] == []
    assert "--enable-taints" in next(iter(got["rejected"]["taints"].values()))


def test_rule_change_re_evaluates_every_node(master, tmp_path):
    c = master(rules__min_interval_s=0.0)
    for n in ("a1", "a2"):
        c.put(f"/api/v1/nodes/{n}/features", json={"features": features_with({"gpu": "1"})})
    import yaml

    sets, errors = load_rulesets([yaml.safe_load(RULES)])
    assert not errors
    rt = c.runtime
    c.loop.call_soon_threadsafe(rt.service.set_rules, sets)  # as the rule watch hands them
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        views = [c.get(f"/api/v1/nodes/{n}").json() for n in ("a1", "a2")]
        if all(f"{FNS}/gpu-ready" in v["labels"] for v in views):
            break
        time.sleep(0.02)
    assert all(v["labels"][f"{FNS}/gpu-ready"] == "true" for v in views)
    assert "nfd_master_nodefeaturerule_processing_duration_seconds_count 2.0" in c.get("/metrics").text


def test_builtin_labels_are_what_discover_computes(fixtures):
    """The master labels with the same pure functions as `nfd discover`."""
    import json

    import httpx

    from nfd.config import WorkerConfig
    from nfd.features import Features
    from nfd.labels import node_labels
    from nfd.master.api.app import create_app
    from nfd.master.runtime import build_runtime
    from nfd.sources import default_registry

    from .conftest import memory_settings
    from .helpers import serve

    raw = json.loads((fixtures / "upstream-baseline" / "features.json").read_text())
    expected = node_labels(default_registry(), Features.from_dict(raw), WorkerConfig()).labels
    assert expected  # the baseline node has labels
    rt = build_runtime(memory_settings())  # the default registry, as `nfd master` runs
    with serve(create_app(runtime=rt)) as url, httpx.Client(base_url=url) as c:
        got = c.put("/api/v1/nodes/base/features", json={"features": raw}).json()
    assert got["labels"] == expected


def test_a_node_submitted_right_after_a_rule_change_gets_the_new_rules() -> None:
    """Decisions are cached per rules generation: a node whose features equal an earlier
    node's must not get the decision made under the old rules, even before the
    re-evaluation of every node has run."""
    import asyncio

    import yaml

    from nfd.config import WorkerConfig
    from nfd.master.core.metrics import Metrics
    from nfd.master.decisions.decide import Decider
    from nfd.master.decisions.service import MasterService
    from nfd.policy import Policy

    from .helpers import FixtureSource

    sets, errors = load_rulesets([yaml.safe_load(RULES)])
    assert not errors

    async def scenario() -> tuple[dict[str, str], dict[str, str]]:
        decider = Decider(sources=[FixtureSource()], config=WorkerConfig(), policy=Policy())
        service = MasterService(decider=decider, metrics=Metrics())
        service.min_reeval_interval = 3600.0
        service._last_reeval = time.monotonic()  # the next re-evaluation is an hour away
        feats = features_with({"gpu": "1"})
        before = service.submit("a1", features=feats).record.decision.labels
        service.set_rules(sets)
        # Another node first, so that the new rules have read what the old ones read.
        service.submit("b1", features=features_with({"cpu": "1"}))
        after = service.submit("a2", features=feats).record.decision.labels
        return before, after

    before, after = asyncio.run(scenario())
    assert f"{FNS}/gpu-ready" not in before
    assert after[f"{FNS}/gpu-ready"] == "true"


def test_a_rule_change_reaches_every_node_while_nodes_change_and_go() -> None:
    """The re-evaluation pauses every 50 feature sets for workers' requests; a node whose
    features change or that goes in a pause is skipped (its own change decided it), and
    the others still get the new rules."""
    import asyncio

    import yaml

    from nfd.config import WorkerConfig
    from nfd.master.core.metrics import Metrics
    from nfd.master.decisions.decide import Decider
    from nfd.master.decisions.service import MasterService
    from nfd.policy import Policy

    from .helpers import FixtureSource

    sets, errors = load_rulesets([yaml.safe_load(RULES)])
    assert not errors

    async def scenario() -> MasterService:
        decider = Decider(sources=[FixtureSource()], config=WorkerConfig(), policy=Policy())
        service = MasterService(decider=decider, metrics=Metrics())
        for i in range(120):  # 120 feature sets: two pauses
            service.submit(f"n{i}", features=features_with({"gpu": "1", "n": str(i)}))
        service.decider = service.decider.with_rules(sets)
        service.rules_generation += 1
        task = asyncio.create_task(service.reevaluate_all())
        await asyncio.sleep(0)  # the first pause, after 50
        service.submit("n100", features=features_with({"gpu": "1", "n": "changed"}))
        service.forget("n101")
        await task
        return service

    service = asyncio.run(scenario())
    assert "n101" not in service.store.nodes
    labels = [r.decision.labels for r in service.store]
    assert len(labels) == 119 and all(d.get(f"{FNS}/gpu-ready") == "true" for d in labels)
