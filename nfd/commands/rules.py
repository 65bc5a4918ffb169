"""``nfd rules``: NodeFeatureRule objects, offline."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from nfd.features import Features
    from nfd.rules import RuleTrace


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="rules_command", metavar="SUBCOMMAND", parser_class=type(p))
    sub.required = True
    t = sub.add_parser("test", help="print what rules set for one node")
    t.add_argument(
        "--rules",
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
    t.add_argument("--output", "-o", choices=["text", "json"], default="text")
    t.add_argument("--explain", action="store_true", help="say for each rule whether it matched, and why not")
    t.add_argument("--enable-taints", action="store_true")
    t.add_argument("--extra-label-ns", action="append", default=[], metavar="NS")
    t.add_argument("--deny-label-ns", action="append", default=[], metavar="NS")
    t.add_argument("--label-whitelist", metavar="REGEX")


def run(args: argparse.Namespace) -> int:
    from nfd.cli import CliError
    from nfd.policy import Policy, publish_rule_output, qualify
    from nfd.rules import evaluate, lint_rulesets, load_rulesets

    try:
        policy = Policy.build(
            extra_label_ns=args.extra_label_ns,
            deny_label_ns=args.deny_label_ns,
            label_whitelist=args.label_whitelist or "",
            enable_taints=args.enable_taints,
        )
    except ValueError as e:
        raise CliError(str(e)) from None

    docs: list[Any] = []
    for path in args.rules:
        docs.extend(_read_yaml(path))
    rulesets, load_errors = load_rulesets(docs)
    node_labels: dict[str, str] = {}
    if args.features:
        features, node_labels = _read_features(args.features)
    else:
        features = _discover(args.host_root)

    out = evaluate(rulesets, features, explain=args.explain)
    if node_labels:
        # A NodeFeature's spec.labels, as upstream's master takes them: qualified,
        # overridden by rule labels, then filtered by the same policy.
        from nfd.nodefeature import qualified_labels

        labels = qualified_labels(node_labels)
        labels.update({qualify(k): v for k, v in out.labels.items()})
        out.labels = labels
    pub = publish_rule_output(out, features, policy)

    err = sys.stderr
    for problem in [*load_errors, *out.errors]:
        print(f"nfd rules test: warning: rule {problem}", file=err)
    failed = {(e.object, e.rule) for e in out.errors}
    for problem in lint_rulesets(rulesets):
        if (problem.object, problem.rule) not in failed:
            print(f"nfd rules test: warning: rule {problem} (fails wherever evaluation gets there)", file=err)
    for kind, items in pub.rejected.items():
        for name, reason in items.items():
            print(f"nfd rules test: warning: {_KIND_WORD[kind]} {name} left out: {reason}", file=err)

    doc: dict[str, Any] = {
        "labels": pub.labels,
        "annotations": pub.annotations,
        "extendedResources": pub.extended_resources,
        "taints": [{"key": k, "value": v, "effect": e} for k, v, e in pub.taints],
        "vars": dict(sorted(out.vars.items())),
    }
    if args.output == "json":
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
        if args.explain:
            _explain(out.traces, err)
        return 0
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
        w("".join(f"  {k}={v}:{e}\n" for k, v, e in pub.taints))
    if not any(doc.values()):
        w("nothing: no rule set anything for this node\n")
    if args.explain:
        _explain(out.traces, sys.stdout)
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

    text = _read_text(path, "--rules")
    import yaml

    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise CliError(f"--rules {path}: not valid YAML{where}: {getattr(e, 'problem', None) or e}") from None


def _read_text(path: str, flag: str) -> str:
    from nfd.cli import CliError

    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise CliError(f"{flag} {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"{flag} {path}: {getattr(e, 'strerror', None) or e}") from None


def _read_features(path: str) -> tuple[Features, dict[str, str]]:
    """Upstream's feature JSON, ``nfd discover -o json`` ({labels, features}) or a
    NodeFeature object (spec.features, and the labels it asks for), as JSON or YAML."""
    from nfd.cli import CliError
    from nfd.features import FeatureFormatError, Features

    text = _read_text(path, "--features")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            why = getattr(e, "problem", None) or "cannot be parsed"
            raise CliError(f"--features {path}: not JSON or YAML{where}: {why}") from None
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
    from nfd.discover import discover
    from nfd.sources import default_registry

    result = discover(default_registry(), _common.host_root(host_root), WorkerConfig().sources)
    for name, e in sorted(result.errors.items()):
        print(f"nfd rules test: warning: source {name}: {e}", file=sys.stderr)
    return result.features
