"""NodeFeatureRule evaluation speed: one node against a 50-rule set taken from the real
rule files (Intel device plugins and GPU platform labelling, NVIDIA GPU operator,
upstream's samples and e2e rules: templates, matchAny, back-references, dynamic values).

Prints the median and p90 time of evaluating the whole set for one node (and of the
master's policy step on top), after a warm-up. Target: median <= 1 ms.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from nfd.decision import decide  # noqa: E402
from nfd.features import Features  # noqa: E402
from nfd.policy import Policy  # noqa: E402
from nfd.rules import RuleSet, evaluate, load_rulesets  # noqa: E402

RULES = REPO / "tests" / "fixtures" / "rules"
FILES = [
    "intel-device-plugins/node-feature-rules.yaml",
    "intel-device-plugins/platform-labeling-rules.yaml",
    "upstream/rw-gpu-operator-ba224dc08.yaml",
    "upstream/rw-nfd-samples-all.yaml",
    "upstream/rw-nfd-cr-sample.yaml",
    "upstream/e2e-nfr-1-2-3-4-5.yaml",
]
TARGET_RULES = 50


def rule_set() -> list[RuleSet]:
    docs = []
    for f in FILES:
        docs.extend(d for d in yaml.safe_load_all((RULES / f).read_text()) if d is not None)
    rulesets, errors = load_rulesets(docs)
    if errors:
        raise SystemExit(f"rule errors: {errors}")
    # Keep the first 50 rules in processing order.
    out, left = [], TARGET_RULES
    for rs in rulesets:
        take = rs.rules[:left]
        if take:
            out.append(RuleSet(rs.name, take))
            left -= len(take)
    if left:
        raise SystemExit(f"only {TARGET_RULES - left} rules in the chosen files")
    return out


def node() -> Features:
    """The upstream baseline machine's real features, plus an Intel Flex 170 GPU and a
    QAT 4xxx with drivers, so that the device rules have something to match."""
    f = Features.from_json((REPO / "tests" / "fixtures" / "upstream-baseline" / "features.json").read_text())
    f.instances.setdefault("pci.device", []).extend(
        [
            {
                "class": "0380",
                "vendor": "8086",
                "device": "56c0",
                "subsystem_vendor": "8086",
                "subsystem_device": "4905",
            },
            {
                "class": "0b40",
                "vendor": "8086",
                "device": "4940",
                "subsystem_vendor": "8086",
                "subsystem_device": "0000",
            },
        ]
    )
    f.flags.setdefault("kernel.loadedmodule", set()).update({"i915", "intel_qat", "vfio_pci"})
    return f


def main() -> None:
    runs = int(os.environ.get("NFD_BENCH_RUNS", "2000"))
    rulesets = rule_set()
    features = node()
    policy = Policy.build(enable_taints=True)
    n_rules = sum(len(rs.rules) for rs in rulesets)
    out = evaluate(rulesets, features)
    for _ in range(200):  # warm-up
        evaluate(rulesets, features)
    eval_t, full_t, round_medians = [], [], []
    rounds = 10
    for _ in range(rounds):
        this_round = []
        for _ in range(runs // rounds):
            t0 = time.perf_counter()
            out = evaluate(rulesets, features)
            t1 = time.perf_counter()
            pub = decide(labels={}, rules=out, features=features, policy=policy)
            t2 = time.perf_counter()
            this_round.append(t1 - t0)
            full_t.append(t2 - t0)
        eval_t.extend(this_round)
        round_medians.append(statistics.median(this_round))
    eval_t.sort()
    full_t.sort()
    med = statistics.median(eval_t) * 1e3
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"rules: {n_rules} rules in {len(rulesets)} objects; node: {sum(len(v) for v in features.flags.values())} flags, "
          f"{sum(len(v) for v in features.attributes.values())} attributes, "
          f"{sum(len(v) for v in features.instances.values())} instances")  # fmt: skip
    print(f"evaluate, one node ({runs} runs): median {med:.3f} ms, p90 {eval_t[int(runs * 0.9)] * 1e3:.3f} ms, "
          f"min {eval_t[0] * 1e3:.3f} ms")  # fmt: skip
    print(f"  best of {rounds} rounds: median {min(round_medians) * 1e3:.3f} ms (load average {load:.1f} "
          f"on {os.cpu_count()} CPUs: other work on the machine inflates the tail)")  # fmt: skip
    print(f"evaluate + policy:           median {statistics.median(full_t) * 1e3:.3f} ms, "
          f"p90 {full_t[int(runs * 0.9)] * 1e3:.3f} ms")  # fmt: skip
    print(f"output: {len(pub.labels)} labels, {len(pub.extended_resources)} extended resources, "
          f"{len(pub.taints)} taints, {len(out.errors)} rule errors")  # fmt: skip
    print(f"target median <= 1 ms: {'met' if med <= 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
