"""Accounting without the API server's view of the pods (``--no-publish``, or a pod the
watch has not delivered yet)."""

from __future__ import annotations

from fixture_node import allocatable, pods
from test_fixture_node import by_hand, resources

from nfd.hostroot import HostRoot
from nfd.topology import nrt
from nfd.topology.accounting import account
from nfd.topology.layout import read_layout
from nfd.topology.messages import decode_allocatable, decode_list


def zones(host: HostRoot, is_exclusive: object = None) -> dict[str, dict[str, tuple[str, str, str]]]:
    layout = read_layout(host)
    answers = decode_allocatable(allocatable().SerializeToString()), decode_list(pods().SerializeToString())
    result = account(layout, *answers, is_exclusive=is_exclusive)  # type: ignore[arg-type]
    assert result.warnings == []
    obj = nrt.build("n", zones=result.zones, layout=layout, policy=None, node_uid=None)
    return {z["name"]: resources(z) for z in obj["zones"]}


def test_shared_pool_listings_are_told_from_pinned_sets_without_the_pods(host: HostRoot) -> None:
    # logger and nginx are both listed with the shared pool (an older kubelet): a CPU
    # listed for two containers cannot be pinned, so neither counts.
    assert zones(host) == by_hand()


def test_pods_the_watch_has_not_seen_yet_are_judged_the_same_way(host: HostRoot) -> None:
    known = {("prod", "db"): {"main"}}

    def is_exclusive(ns: str, pod: str, container: str) -> bool | None:
        names = known.get((ns, pod))
        return None if names is None else container in names

    assert zones(host, is_exclusive) == by_hand()


def test_the_pods_view_decides_where_it_has_one(host: HostRoot) -> None:
    # Were the API server to say db's container is not pinned, its 16 CPUs stay available.
    def is_exclusive(ns: str, pod: str, container: str) -> bool | None:
        return False if (ns, pod) == ("prod", "db") else None

    got = zones(host, is_exclusive)
    assert got["node-1"]["cpu"] == ("24", "24", "24")
    assert {k: v for k, v in got.items() if k != "node-1"} == {
        k: v for k, v in by_hand().items() if k != "node-1"
    }


def test_whole_cpu_quantities() -> None:
    from nfd.topology.podwatch import whole_cpus

    assert [whole_cpus(v) for v in ("2", "2000m", "2.0", 4, "36000m")] == [True] * 5
    assert [whole_cpus(v) for v in ("1.5", "500m", "0", "1500m", "abc", "", "-2", "2.5m")] == [False] * 8
