"""Content-addressed feature storage: digests as the worker computes them, groups shared."""

from __future__ import annotations

import json

from nfd.features import Features
from nfd.master.core.featurestore import FeatureStore, GroupCache, encode


def sample(extra: str = "") -> Features:
    f = Features()
    f.set_flags("cpu.cpuid", ["AVX", "SSE4"])
    f.set_attributes("kernel.version", {"full": "6.1.0", "major": "6"})
    f.set_instances("pci.device", [{"class": "0300", "vendor": "10de"}, {"class": "0200", "vendor": "8086"}])
    if extra:
        f.set_attributes("system.name", {"nodename": extra})
    return f


def test_digest_equals_the_workers():
    for f in (Features(), sample(), sample("n1")):
        assert encode(f.to_dict()).digest == f.digest()


def test_digest_of_the_upstream_baseline(fixtures):
    raw = json.loads((fixtures / "upstream-baseline" / "features.json").read_text())
    assert encode(raw).digest == Features.from_dict(raw).digest()


def test_groups_are_stored_once_and_released():
    store = FeatureStore()
    a, b = encode(sample("a").to_dict()), encode(sample("b").to_dict())
    store.put(a)
    one = store.stored_bytes()
    store.put(b)
    # Only the differing group is stored again.
    assert store.stored_bytes() - one < one / 2
    assert store.get(a.digest).to_dict() == sample("a").to_dict()
    store.release(a.digest)
    assert a.digest not in store and b.digest in store
    assert store.get(b.digest).to_dict() == sample("b").to_dict()
    store.release(b.digest)
    assert len(store) == 0 and store.stored_bytes() == 0


def test_group_cache_gives_the_same_encoding():
    cache = GroupCache(per_name=2)
    for extra in ("a", "b", "a", "c", "b", "a"):
        raw = sample(extra).to_dict()
        assert encode(raw, cache) == encode(raw)
    changed = sample("a").to_dict()
    changed["attributes"]["kernel.version"]["elements"]["full"] = "6.2.0"
    assert encode(changed, cache) == encode(changed)


def test_nodes_with_the_same_group_share_its_manifest_entry():
    # Each node's request is parsed afresh: equal groups must still be held once, names
    # and hashes included, or a fleet's manifests grow by a tuple per group per node.
    store = FeatureStore()
    a = encode(json.loads(json.dumps(sample("a").to_dict())))
    b = encode(json.loads(json.dumps(sample("b").to_dict())))
    store.put(a)
    store.put(b)
    shared = [x is y for x, y in zip(store.parts(a.digest), store.parts(b.digest), strict=True)]
    assert shared.count(False) == 1  # system.name differs; every other entry is one object
    store.release(a.digest)
    assert store.get(b.digest).to_dict() == sample("b").to_dict()


def test_equal_groups_under_other_names_keep_their_names():
    f = Features()
    f.set_flags("cpu.cpuid", [])
    f.set_flags("cpu.other", [])
    store = FeatureStore()
    enc = encode(f.to_dict())
    store.put(enc)
    assert store.get(enc.digest).to_dict() == f.to_dict()
    assert {n for _, n, _ in store.parts(enc.digest)} >= {"cpu.cpuid", "cpu.other"}


def test_a_fleet_holds_one_shape_of_manifest_and_each_node_only_its_own_entries():
    # ~30 entries per node would be a tuple per node: the entries nodes share are held
    # once, in order, and each node's manifest keeps only the groups that are its own.
    store = FeatureStore()
    encs = [encode(json.loads(json.dumps(sample(f"n{i}").to_dict()))) for i in range(4)]
    for e in encs:
        store.put(e)
    later = [store._manifests[e.digest] for e in encs[1:]]
    assert all(m.shape is later[0].shape for m in later)
    assert [len(m.own) for m in later] == [1, 1, 1]  # system.name, the node's name
    for i, e in enumerate(encs):
        assert store.parts(e.digest) == tuple((k, n, h) for k, n, h, _ in e.parts)
        assert store.get(e.digest).to_dict() == sample(f"n{i}").to_dict()
    for e in encs:
        store.release(e.digest)
    assert not store._shapes and not store._parts and not len(store)
