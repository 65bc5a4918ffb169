"""The canonical JSON of a feature set, and the digest worker and master agree on."""

from __future__ import annotations

import hashlib
import json

from nfd.canonical import GroupCache, encode
from nfd.features import Features, NullAttributes, NullFlags


def features(**changes: str) -> Features:
    f = Features()
    f.set_flags("cpu.cpuid", ["SSE4", "AVX", "AVX512F"])
    f.set_attributes("kernel.config", {"NUMA": "y", "HZ": "1000", "CMDLINE": 'a "b" é'})
    f.set_instances("pci.device", [{"vendor": "10de", "class": "0300"}, {"class": "0200", "vendor": "8086"}])
    f.set_instances("usb.device", [])
    for name, value in changes.items():
        f.set_attributes(f"system.{name}", {"value": value})
    return f


def test_the_digest_is_sha256_of_the_sorted_compact_json_of_upstreams_shape():
    # As docs/worker-master-api.md defines it for any client.
    for f in (Features(), features(), features(name="n1")):
        canon = json.dumps(f.to_dict(), sort_keys=True, separators=(",", ":"))
        assert f.digest() == hashlib.sha256(canon.encode()).hexdigest()


def test_null_elements_encode_as_empty():
    f = Features(flags={"a.b": NullFlags()}, attributes={"a.c": NullAttributes()})
    assert f.digest() == Features(flags={"a.b": set()}, attributes={"a.c": {}}).digest()


def test_a_cache_of_the_last_pass_gives_the_same_digests():
    cache = GroupCache(per_name=1)
    for step in ("a", "b", "b", "a", ""):
        f = features(name=step) if step else features()
        assert f.digest(cache) == f.digest()
    changed = features()
    changed.attributes["kernel.config"]["HZ"] = "250"
    assert changed.digest(cache) == changed.digest() != features().digest()


def test_a_group_changed_in_place_is_not_taken_for_the_cached_one():
    # A source may keep its containers from pass to pass and change them.
    cache = GroupCache(per_name=1)
    f = features()
    f.digest(cache)
    f.attributes["kernel.config"]["HZ"] = "250"
    f.flags["cpu.cpuid"].add("AMX")
    f.instances["pci.device"][0]["vendor"] = "1002"
    assert f.digest(cache) == f.digest()


def test_groups_come_apart_with_their_own_hashes():
    enc = encode({"attributes": {"x.y": {"k": "v"}}, "instances": {"p.d": [{"a": "1"}]}})
    assert [(kind, name) for kind, name, _h, _j in enc.parts] == [("attributes", "x.y"), ("instances", "p.d")]
    for _kind, _name, h, gj in enc.parts:
        assert h == hashlib.sha256(gj.encode()).hexdigest()[:32]
    assert enc.parts[1][3] == '{"elements":[{"attributes":{"a":"1"}}]}'
