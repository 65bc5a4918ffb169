from __future__ import annotations

from nfd.deviceplugin.preferred import preferred_allocation

NUMA = {"a0": 0, "a1": 0, "b0": 1, "b1": 1, "b2": 1, "c0": 2, "x": None, "y": None}


def pick(available: list[str], must: list[str], size: int, numa: dict[str, int | None] = NUMA) -> list[str]:
    phys = {d: i for i, d in enumerate(sorted(numa))}
    return preferred_allocation(available, must, size, numa_of=numa.get, physical_of=phys.get)


def test_one_node_in_stable_order() -> None:
    assert pick(list(NUMA), [], 2) == ["a0", "a1"]
    assert pick(list(NUMA), [], 3) == ["b0", "b1", "b2"]  # only node 1 holds three


def test_must_include_kept_and_its_node_preferred() -> None:
    assert pick(list(NUMA), ["b2"], 2) == ["b2", "b0"]
    assert pick(list(NUMA), ["c0", "a1"], 2) == ["c0", "a1"]


def test_fewest_nodes_when_no_single_node_fits() -> None:
    got = pick(list(NUMA), [], 5)
    assert got[:3] == ["b0", "b1", "b2"] and set(got[3:]) == {"a0", "a1"}  # two nodes, not three
    got = pick(list(NUMA), ["c0"], 4)
    assert got[0] == "c0" and set(got[1:]) == {"b0", "b1", "b2"}


def test_devices_without_numa_last() -> None:
    assert pick(["x", "y", "a0"], [], 2) == ["a0", "x"]
    assert pick(["x", "y"], [], 2) == ["x", "y"]


def test_replicas_spread_over_physical_devices() -> None:
    ids = [f"{p}::{n}" for p in ("d0", "d1") for n in range(3)]
    numa = {i: 0 for i in ids}
    phys = {i: i.split("::")[0] for i in ids}
    got = preferred_allocation(ids, ["d0::1"], 3, numa_of=numa.get, physical_of=lambda d: hash(phys[d]))
    assert got[0] == "d0::1"
    assert [phys[g] for g in got].count("d1") >= 1 and len(set(got)) == 3
    assert got[1] == "d1::0"
