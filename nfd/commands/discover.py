"""``nfd discover``: this node's labels (and raw features), no cluster needed."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    from nfd.commands._common import add_host_root_argument, add_policy_arguments

    add_host_root_argument(p, reads="sys, proc, etc, boot ...")
    p.add_argument(
        "--sources", metavar="LIST", default=None,
        help="comma-separated feature sources, 'all', '-name' to drop one (default: "
        "core.featureSources from the config, i.e. all)",
    )  # fmt: skip
    p.add_argument("--config", metavar="FILE", help="worker config file (nfd-worker.conf)")
    p.add_argument(
        "--output", "-o", choices=["labels", "json", "yaml", "nodefeature"], default="labels",
        help="labels: sorted key=value lines; json/yaml: {labels, features}; nodefeature: the "
        "NodeFeature object upstream's worker would write for this node (YAML; node from "
        "NODE_NAME, namespace and owning pod from POD_NAMESPACE, POD_NAME, POD_UID)",
    )  # fmt: skip
    add_policy_arguments(p, master=False)


def run(args: argparse.Namespace) -> int:
    from nfd.cli import CliError
    from nfd.commands._common import host_root, worker_config
    from nfd.discovery import discover
    from nfd.labels import node_labels
    from nfd.policy import Policy
    from nfd.sources import UnknownSourceError, default_registry

    host = host_root(args.host_root)
    config = worker_config(args.config, warn=lambda w: print(f"nfd discover: warning: {w}", file=sys.stderr))

    registry = default_registry()
    try:
        feature_spec = args.sources.split(",") if args.sources else list(config.core.feature_sources)
        sources = registry.select(feature_spec)
        label_sources = registry.select(list(config.core.label_sources))
    except UnknownSourceError as e:
        raise CliError(str(e)) from None
    try:
        policy = Policy.build(extra_label_ns=args.extra_label_ns, deny_label_ns=args.deny_label_ns)
    except ValueError as e:
        raise CliError(str(e)) from None

    result = discover(sources, host, config.sources)
    chosen = {s.name for s in sources}
    labelled = node_labels([s for s in label_sources if s.name in chosen], result.features, config, policy)
    from nfd.chars import printable  # names from host files: no raw control characters

    for name, err in sorted(result.errors.items()):
        print(f"nfd discover: warning: source {name}: {printable(str(err))}", file=sys.stderr)
    for problem in labelled.rule_errors:
        print(f"nfd discover: warning: {printable(problem)}", file=sys.stderr)
    for name, reason in labelled.rejected.get("labels", {}).items():
        print(
            f"nfd discover: warning: label {printable(name)} left out: {printable(reason)}", file=sys.stderr
        )

    out = sys.stdout
    if args.output == "labels":
        out.write("".join(f"{k}={labelled.labels[k]}\n" for k in sorted(labelled.labels)))
    elif args.output == "nodefeature":
        import yaml

        from nfd.nodefeature import worker_object_from_env

        obj = worker_object_from_env(features=result.features, labels=labelled.labels)
        out.write(yaml.safe_dump(obj, sort_keys=False))
    else:
        doc = {"labels": dict(sorted(labelled.labels.items())), "features": result.features.to_dict()}
        if args.output == "json":
            import json

            out.write(json.dumps(doc, indent=2) + "\n")
        else:
            import yaml

            out.write(yaml.safe_dump(doc, sort_keys=False))
    out.flush()
    return 0
