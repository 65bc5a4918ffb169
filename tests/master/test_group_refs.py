"""A worker may name a big group by its hash (``ref``): the master takes it from the
groups it holds, answers 409 naming the ones it does not, and refuses a ref that does
not go with null elements."""

from __future__ import annotations

from typing import Any

from nfd.features import Features


def features(node: str) -> Features:
    f = Features()
    f.set_attributes("kernel.config", {f"CONFIG_OPTION_{i:04d}": "y" for i in range(400)})
    f.set_attributes("kernel.version", {"full": "6.1.0"})
    f.set_attributes("system.name", {"nodename": node})
    return f


def ref_of(f: Features, name: str) -> str:
    return next(h for _, n, h, _ in f.encoded().parts if n == name)


def body(f: Features, **refs: str) -> dict[str, Any]:
    raw = f.to_dict()
    for name, h in refs.items():
        raw["attributes"][name] = {"elements": None, "ref": h}
    return {"digest": f.digest(), "features": raw}


def test_a_held_group_named_by_its_hash_counts_as_sent_whole(master) -> None:
    c = master()
    whole = c.put("/api/v1/nodes/n1/features", json=body(features("n1")))
    assert whole.status_code == 200, whole.text
    f2 = features("n2")
    r = c.put("/api/v1/nodes/n2/features", json=body(f2, **{"kernel.config": ref_of(f2, "kernel.config")}))
    assert r.status_code == 200, r.text
    assert r.json()["digest"] == f2.digest()  # the master rebuilt the very same features
    # And the same as for a node that sent it whole.
    r3 = c.put("/api/v1/nodes/n3/features", json=body(features("n3")))
    assert {k: v for k, v in r.json()["labels"].items()} == r3.json()["labels"]


def test_a_group_the_master_does_not_hold_is_a_409_naming_it_and_nothing_is_kept(master) -> None:
    c = master()
    f = features("n1")
    sent = body(f, **{"kernel.config": ref_of(f, "kernel.config"), "kernel.version": "0" * 32})
    r = c.put("/api/v1/nodes/n1/features", json=sent)
    assert r.status_code == 409, r.text
    assert r.json()["known"] is False
    assert sorted(r.json()["missing"]) == ["attributes/kernel.config", "attributes/kernel.version"]
    assert c.get("/api/v1/nodes/n1").status_code == 404
    # Sent whole, then by hash.
    assert c.put("/api/v1/nodes/n1/features", json=body(f)).status_code == 200
    again = body(f, **{"kernel.config": ref_of(f, "kernel.config")})
    assert c.put("/api/v1/nodes/n1/features", json=again).status_code == 200


def test_a_group_held_under_another_name_is_found_by_its_hash(master) -> None:
    c = master()
    f1 = features("n1")
    f1.set_attributes("local.label", {f"k{i}": "v" for i in range(300)})
    assert c.put("/api/v1/nodes/n1/features", json=body(f1)).status_code == 200
    f2 = features("n2")
    f2.set_attributes("other.group", {f"k{i}": "v" for i in range(300)})
    r = c.put("/api/v1/nodes/n2/features", json=body(f2, **{"other.group": ref_of(f1, "local.label")}))
    assert r.status_code == 200, r.text
    assert r.json()["digest"] == f2.digest()


def test_a_ref_that_does_not_go_with_null_elements_is_422(master) -> None:
    c = master()
    f = features("n1")
    h = ref_of(f, "kernel.config")
    for group in ({"elements": {"A": "y"}, "ref": h}, {"ref": h}, {"elements": None},
                  {"elements": None, "ref": "not-a-hash"}):  # fmt: skip
        sent = body(f)
        sent["features"]["attributes"]["kernel.config"] = group
        r = c.put("/api/v1/nodes/n1/features", json=sent)
        assert r.status_code == 422, (group, r.text)
        assert all(
            i["loc"][:4] == ["body", "features", "attributes", "kernel.config"] for i in r.json()["detail"]
        )
    assert c.get("/api/v1/nodes/n1").status_code == 404
