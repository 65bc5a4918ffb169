"""``kubectl nfd`` (the ``kubectl-nfd`` executable, kubectl's plugin convention): nodes
as nfd sees them, one node's whole story, rules tried on the live cluster
(``rules test``, as ``nfd rules test``) and ``prune`` (as ``nfd prune``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

VERBS = {
    "nodes": "a line per node: in sync, what nfd set, what it rejected, the last heartbeat",
    "node": "one node: each label with its origin, what was rejected and why",
    "rules": "NodeFeatureRules: test them on one node or on the cluster (--cluster)",
    "prune": "remove what nfd set from the Nodes (after an uninstall)",
}


def build_parser() -> argparse.ArgumentParser:
    from nfd import __version__
    from nfd.cli import Parser
    from nfd.commands import prune, rules
    from nfd.commands._common import add_cluster_arguments

    parser = Parser(prog="kubectl nfd", description="Node Feature Discovery, from kubectl.")
    parser.add_argument("--version", action="version", version=f"kubectl-nfd {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    sub.required = True
    p = sub.add_parser("nodes", help=VERBS["nodes"], description=VERBS["nodes"])
    add_cluster_arguments(p)
    p.add_argument(
        "-l", "--selector", metavar="SELECTOR", default="", help="only the Nodes this label selector selects"
    )
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")
    p = sub.add_parser("node", help=VERBS["node"], description=VERBS["node"])
    p.add_argument("name", metavar="NAME")
    add_cluster_arguments(p)
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")
    rules.add_arguments(sub.add_parser("rules", help=VERBS["rules"], description=VERBS["rules"]))
    prune.add_arguments(sub.add_parser("prune", help=VERBS["prune"], description=VERBS["prune"]))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from nfd.cli import CliError

    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(args_list)
        if args.verb == "rules":
            from nfd.commands import rules

            return rules.run(args)
        if args.verb == "prune":
            from nfd.commands import prune

            return prune.run(args)
        return _nodes(args) if args.verb == "nodes" else _node(args)
    except CliError as e:
        print(f"kubectl nfd: error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return 130


def _nodes(args: argparse.Namespace) -> int:
    from nfd.commands._common import cluster_session
    from nfd.kube.errors import ApiError
    from nfd.kubectl import story

    source, why = "master", ""
    with cluster_session(args) as cluster:
        wanted = cluster.node_names(args.selector)
        try:
            rows = [
                story.row_from_master(item)
                for page in cluster.master_pages("/api/v1/nodes")
                for item in page.get("items") or []
                if wanted is None or item.get("node") in wanted
            ]
        except ApiError as e:
            source, why = "nodes", str(e)
            query = {"labelSelector": args.selector} if args.selector else {}
            rows = [story.row_from_node(n) for n in cluster.pages("/api/v1/nodes", query)]
        leader = cluster.leader()
    if args.output == "json":
        doc = {"source": source, "leader": leader, "nodes": [r.to_dict() for r in rows]}
        if why:
            doc["masterError"] = why
        print(json.dumps(doc, indent=2))
        return 0
    if why:
        print(f"kubectl nfd: warning: {why}; showing what the Node objects hold", file=sys.stderr)
    print(f"leader: {leader or '-'}")
    sys.stdout.write(story.table(rows))
    return 0


def _node(args: argparse.Namespace) -> int:
    from nfd.cli import CliError
    from nfd.commands._common import cluster_session
    from nfd.kube.errors import ApiError, NotFound
    from nfd.kubectl import story
    from nfd.master.api.models import node_name_problem

    problem = node_name_problem(args.name)
    if problem:
        raise CliError(problem)
    with cluster_session(args) as cluster:
        try:
            doc = cluster.master(f"/api/v1/nodes/{args.name}")
        except ApiError as e:
            if isinstance(e, NotFound):
                raise CliError(f"the master holds no features for node {args.name!r}", code=1) from None
            node = cluster.get(f"/api/v1/nodes/{args.name}")
            if args.output == "json":
                print(json.dumps({"source": "node", "masterError": str(e), "node": node}, indent=2))
            else:
                print(f"kubectl nfd: warning: {e}; showing what the Node object holds", file=sys.stderr)
                sys.stdout.write(story.node_text_from_object(node))
            return 0
    if args.output == "json":
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(story.node_text(doc))
    return 0
