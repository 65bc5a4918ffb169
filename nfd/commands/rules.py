"""``nfd rules``: NodeFeatureRule objects, offline."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from nfd.features import Features
    from nfd.policy import Policy
    from nfd.rules import RuleSet, RuleTrace


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="rules_command", metavar="SUBCOMMAND", parser_class=type(p))
    sub.required = True
    t = sub.add_parser("test", help="print what rules set for one node, or would change on the cluster's")
    t.add_argument(
        "--rules",
        "-f",
        metavar="FILE",
        required=True,
        action="append",
        help="YAML with NodeFeatureRule objects (repeatable)",
    )
    src = t.add_mutually_exclusive_group()
    src.add_argument(
        "--features",
        metavar="FILE",
        help="raw features (upstream's JSON shape, nfd discover -o json) or a NodeFeature object (JSON or YAML)",
    )
    src.add_argument("--local", action="store_true", help="discover this machine's features (default)")
    t.add_argument("--host-root", metavar="DIR", help="with --local: host filesystem root")
    src.add_argument(
        "--cluster", action="store_true",
        help="every node of the cluster: what the rules, applied over the cluster's NodeFeatureRules, "
        "would add, change, remove and reject (reads the nodes' features from the master; writes nothing)",
    )  # fmt: skip
    t.add_argument(
        "-l", "--selector", metavar="SELECTOR", default="",
        help="with --cluster: only the Nodes this label selector selects",
    )  # fmt: skip
    t.add_argument(
        "--output", "-o", choices=["text", "json"], default="text",
        help="text: a section per kind; json: one document with what was rejected and why",
    )  # fmt: skip
    t.add_argument("--explain", action="store_true", help="say for each rule whether it matched, and why not")
    from nfd.commands._common import add_cluster_arguments, add_policy_arguments

    add_policy_arguments(t, master=True)
    add_cluster_arguments(t)
    t.add_argument(
        "--strict", action="store_true",
        help="exit 1 when any document or rule has a problem (each listed with its file and rule); "
        "without it they are warnings",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from nfd.cli import CliError
    from nfd.decision import decide
    from nfd.policy import Policy
    from nfd.rules import evaluate, lint_rulesets

    try:
        policy = Policy.build(
            extra_label_ns=args.extra_label_ns,
            deny_label_ns=args.deny_label_ns,
            label_whitelist=args.label_whitelist or "",
            enable_taints=args.enable_taints,
        )
    except ValueError as e:
        raise CliError(str(e)) from None

    rulesets, problems, origin = _load(args.rules)
    if args.cluster:
        return _cluster(args, policy, problems)
    if args.selector:
        raise CliError("--selector goes with --cluster")
    node_labels: dict[str, str] = {}
    if args.features:
        features, node_labels = _read_features(args.features)
    else:
        features = _discover(args.host_root)

    out = evaluate(rulesets, features, explain=args.explain)
    # Only the rules' output (and a NodeFeature's spec.labels, as upstream's master takes
    # them): the built-in labels are what `nfd discover` prints.
    pub = decide(labels={}, node_labels=node_labels, rules=out, features=features, policy=policy)

    err = sys.stderr
    failed = {(e.object, e.rule) for e in out.errors}
    problems += [f"{origin.get(e.object, '-')}: rule {e}" for e in out.errors]
    problems += [
        f"{origin.get(e.object, '-')}: rule {e} (fails wherever evaluation gets there)"
        for e in lint_rulesets(rulesets)
        if (e.object, e.rule) not in failed
    ]
    for problem in problems:
        print(f"nfd rules test: {'error' if args.strict else 'warning'}: {problem}", file=err)
    for kind, items in pub.rejected.items():
        for name, reason in items.items():
            print(f"nfd rules test: warning: {_KIND_WORD[kind]} {name} left out: {reason}", file=err)

    doc: dict[str, Any] = {
        "labels": pub.labels,
        "annotations": pub.annotations,
        "extendedResources": pub.extended_resources,
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in pub.taints],
        "vars": dict(sorted(out.vars.items())),
    }
    if args.output == "json":
        json.dump({**doc, "rejected": pub.rejected}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        if args.explain:
            _explain(out.traces, err)
        return _verdict(args.strict, problems)
    w = sys.stdout.write
    for title, key in (
        ("labels", "labels"),
        ("annotations", "annotations"),
        ("extended resources", "extendedResources"),
        ("vars", "vars"),
    ):
        section: dict[str, str] = doc[key]
        if section:
            w(f"{title}:\n")
            w("".join(f"  {k}={v}\n" for k, v in section.items()))
    if pub.taints:
        w("taints:\n")
        w("".join(f"  {t}\n" for t in pub.taints))
    if not any(doc.values()):
        w("nothing: no rule set anything for this node\n")
    if args.explain:
        _explain(out.traces, sys.stdout)
    return _verdict(args.strict, problems)


def _cluster(args: argparse.Namespace, policy: Policy, problems: list[str]) -> int:
    from nfd.cli import CliError
    from nfd.commands._common import cluster_session
    from nfd.kubectl import clustertest
    from nfd.rules import API_GROUP, KIND

    if args.explain:
        raise CliError("--explain is for one node: not with --cluster")
    proposed = [d for path in args.rules for d in _read_yaml(path)]
    for problem in problems:
        print(f"nfd rules test: {'error' if args.strict else 'warning'}: {problem}", file=sys.stderr)
    with cluster_session(args) as cluster:
        objects = [
            {"apiVersion": f"{API_GROUP}/v1alpha1", "kind": KIND, **o}
            for o in cluster.pages(f"/apis/{API_GROUP}/v1alpha1/{RULES_PLURAL}")
        ]
        wanted = cluster.node_names(args.selector)
        before = clustertest.rulesets(objects)
        after = clustertest.rulesets(clustertest.overlay(objects, proposed))
        diffs = list(
            clustertest.diff_pages(cluster.master_pages("/api/v1/features"), before, after, policy, wanted)
        )
    if args.output == "json":
        sys.stdout.write(clustertest.to_json(diffs) + "\n")
    else:
        _print_diffs(diffs)
    return _verdict(args.strict, problems)


RULES_PLURAL = "nodefeaturerules"
_SIGNS = (("added", "+"), ("changed", "~"), ("removed", "-"))


def _print_diffs(diffs: list[Any]) -> None:
    w = sys.stdout.write
    changing = [d for d in diffs if not d.empty()]
    for d in changing:
        w(f"node {d.node}:\n")
        for part, sign in _SIGNS:
            for kind, items in getattr(d, part).items():
                for name, value in items.items():
                    shown = f"{value[0]} -> {value[1]}" if part == "changed" else value
                    w(
                        f"  {sign} {_KIND_WORD[kind]} {name}"
                        + ("" if kind == "taints" else f"={shown}")
                        + "\n"
                    )
        for kind, items in d.rejected.items():
            for name, reason in items.items():
                w(f"  ! {_KIND_WORD[kind]} {name} rejected: {reason}\n")
        for err in d.errors:
            w(f"  ! {err}\n")
    w(f"{len(changing)} of {len(diffs)} node(s) would change\n")


def _load(paths: list[str]) -> tuple[list[RuleSet], list[str], dict[str, str]]:
    """The rule sets of every file (sorted by name, as the master has them), the
    problems found while loading (each naming its file), and each object's file."""
    from nfd.rules import load_rulesets

    rulesets: list[RuleSet] = []
    problems: list[str] = []
    origin: dict[str, str] = {}
    for path in paths:
        docs = _read_yaml(path)
        problems += [f"{path}: {p}" for p in _shape_problems(docs)]
        sets, errors = load_rulesets(docs)
        problems += [f"{path}: rule {e}" for e in errors]
        for rs in sets:
            origin.setdefault(rs.name, path)
        rulesets += sets
    rulesets.sort(key=lambda rs: rs.name)
    return rulesets, problems, origin


def _shape_problems(docs: list[Any]) -> list[str]:
    """What the API server would refuse or what is not a rule at all, which the engine
    passes over: documents of other kinds, rules without a name."""
    from nfd.rules import API_GROUP, KIND

    out: list[str] = []
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or str(d.get("kind", "")).endswith("List"):
            continue  # not a mapping: the engine reports it; a List: its items are loaded
        if d.get("kind") != KIND or not str(d.get("apiVersion", "")).startswith(API_GROUP + "/"):
            out.append(
                f"document {i + 1}: kind {d.get('kind')!r} (apiVersion {d.get('apiVersion')!r}) "
                "is not a NodeFeatureRule; skipped"
            )
            continue
        name = (d.get("metadata") or {}).get("name") if isinstance(d.get("metadata"), dict) else None
        rules = (d.get("spec") or {}).get("rules") if isinstance(d.get("spec"), dict) else None
        for j, rule in enumerate(rules if isinstance(rules, list) else []):
            if isinstance(rule, dict) and not rule.get("name"):
                out.append(
                    f"rule {name}/spec.rules[{j}]: name is required (the API server refuses a rule without one)"
                )
    return out


def _verdict(strict: bool, problems: list[str]) -> int:
    if strict and problems:
        print(f"nfd rules test: {len(problems)} problem(s) with --strict", file=sys.stderr)
        return 1
    return 0


_KIND_WORD = {
    "labels": "label",
    "annotations": "annotation",
    "extendedResources": "extended resource",
    "taints": "taint",
}


def _explain(traces: list[RuleTrace], stream: TextIO) -> None:
    stream.write("explain:\n")
    for t in traces:
        name = f"{t.object}/{t.rule}"
        if t.failed:
            stream.write(f"  ERROR    {name}: {t.reason}\n")
        elif t.matched:
            stream.write(f"  matched  {name}\n")
        else:
            stream.write(f"  no match {name}: {t.reason}\n")


def _read_yaml(path: str) -> list[Any]:
    from nfd.cli import CliError
    from nfd.yamlfile import YamlFileError, load_all

    try:
        return load_all(path)
    except YamlFileError as e:
        raise CliError(f"--rules {e}") from None


def _read_features(path: str) -> tuple[Features, dict[str, str]]:
    """Upstream's feature JSON, ``nfd discover -o json`` ({labels, features}) or a
    NodeFeature object (spec.features, and the labels it asks for), as JSON or YAML."""
    from nfd import yamlfile
    from nfd.cli import CliError
    from nfd.features import FeatureFormatError, Features

    try:
        # A feature set is about as large as a rules file may be.
        text = yamlfile.read_text(path, limit=yamlfile.RULES_LIMIT)
        try:
            data = json.loads(text)
        except ValueError:  # JSON is YAML: its reader says why, as for every YAML file
            data = yamlfile.parse(text, path)
    except yamlfile.YamlFileError as e:
        raise CliError(f"--features {e}") from None
    labels: dict[str, str] = {}
    if isinstance(data, dict):
        if data.get("kind") == "NodeFeature" or isinstance(data.get("spec"), dict):
            from nfd.nodefeature import NodeFeatureError, parse

            try:
                obj = parse(data)
            except NodeFeatureError as e:
                raise CliError(f"--features {path}: {e}") from None
            return obj.features, obj.labels
        if "features" in data and set(data) <= {"labels", "features"}:
            data = data["features"]
    try:
        return Features.from_dict(data or {}), labels
    except FeatureFormatError as e:
        raise CliError(f"--features {path}: {e}") from None


def _discover(host_root: str | None) -> Features:
    from nfd.commands import _common
    from nfd.config import WorkerConfig
    from nfd.discovery import discover
    from nfd.sources import default_registry

    result = discover(default_registry(), _common.host_root(host_root), WorkerConfig().sources)
    for name, e in sorted(result.errors.items()):
        print(f"nfd rules test: warning: source {name}: {e}", file=sys.stderr)
    return result.features
