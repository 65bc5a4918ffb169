"""GetPreferredAllocation's choice, as a pure function."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def preferred_allocation(
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    *,
    numa_of: Callable[[str], int | None],
    physical_of: Callable[[str], int | None],
) -> list[str]:
    """Pick ``size`` IDs: every ``must_include`` first, then devices on one NUMA node if
    one node can hold them all, else on as few nodes as possible, then in a stable order
    (the order of ``available``). Shared replicas of different physical devices come
    before a second replica of the same device, spreading load.
    """
    chosen = list(dict.fromkeys(must_include))
    if len(chosen) >= size:
        return chosen
    taken = set(chosen)
    pos = {d: i for i, d in enumerate(dict.fromkeys(available))}
    cands = [d for d in pos if d not in taken]
    used: dict[int | None, int] = {}
    for d in chosen:
        p = physical_of(d)
        used[p] = used.get(p, 0) + 1

    def order(d: str) -> tuple[int, int]:
        return used.get(physical_of(d), 0), pos[d]

    groups: dict[int | None, list[str]] = {}
    for d in cands:
        groups.setdefault(numa_of(d), []).append(d)
    need = size - len(chosen)
    must_nodes = {n for n in (numa_of(d) for d in chosen) if n is not None}
    numa_nodes = sorted(n for n in groups if n is not None)

    # One node holding everything (the must-include devices' node, if they share one).
    single = [
        n
        for n in (sorted(must_nodes) if len(must_nodes) == 1 else numa_nodes)
        if len(groups.get(n, [])) >= need
    ]
    if len(must_nodes) <= 1 and single:
        return chosen + _spread(groups[single[0]], need, order, physical_of)

    # Fewest nodes: the must-include nodes first, then the fullest, devices without NUMA last.
    node_order: list[int | None] = [*sorted(must_nodes & set(groups))]
    node_order += sorted((n for n in numa_nodes if n not in must_nodes), key=lambda n: (-len(groups[n]), n))
    if None in groups:
        node_order.append(None)
    pool: list[str] = []
    for n in node_order:
        pool.extend(groups[n])
        if len(pool) >= need:
            break
    return chosen + _spread(pool, need, order, physical_of)


def _spread(
    pool: list[str],
    need: int,
    order: Callable[[str], tuple[int, int]],
    physical_of: Callable[[str], int | None],
) -> list[str]:
    """Take ``need`` from ``pool``, round-robin over physical devices (least used first)."""
    rank: dict[int | None, int] = {}
    keyed = []
    for i, d in enumerate(pool):  # pool order is node preference, then stable order
        p = physical_of(d)
        used, _position = order(d)
        keyed.append((used + rank.get(p, 0), i, d))
        rank[p] = rank.get(p, 0) + 1
    keyed.sort()
    return [d for _, _, d in keyed[:need]]
