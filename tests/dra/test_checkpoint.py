"""The checkpoint: what is saved loads back; anything else is one line, never trusted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nfd.dra import checkpoint
from nfd.dra.checkpoint import CheckpointError, PreparedClaim, PreparedDevice


def claims() -> dict[str, PreparedClaim]:
    dev = PreparedDevice(("gpu", "gpu2"), "node-a", "gpu-0", ("nfd.node.kubernetes.io/claim=u1-gpu-0",))
    return {
        "u1": PreparedClaim("default", "c1", (dev,)),
        "ü-2": PreparedClaim("ns", "c2", ()),  # escaped the same way when checked
    }


def test_round_trip_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    assert checkpoint.load(path) == {}
    checkpoint.save(path, claims())
    assert checkpoint.load(path) == claims()
    checkpoint.save(path, {})
    assert checkpoint.load(path) == {}


def test_a_claims_part_is_its_sorted_dump() -> None:
    """The part a save joins is what parse() checks the checksum against."""
    two = (
        PreparedDevice(("b", "a"), "nöde", "gpu-1", ("x=1", "x=2")),
        PreparedDevice((), "node-a", "gpu-0", ()),
    )
    for c in [*claims().values(), PreparedClaim("ns\u2028", 'c"3', two)]:
        assert c.canonical == json.dumps(c.to_json(), sort_keys=True, separators=(",", ":"))


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (lambda t: t[: len(t) // 2], "not a checkpoint (JSONDecodeError"),
        (lambda t: t.replace('"c1"', '"c9"'), "checksum mismatch"),
        (lambda t: t.replace('"version":1', '"version":7'), "unknown version 7"),
        (lambda t: "[]", "not a checkpoint (TypeError"),
        (lambda t: json.dumps({"version": 1, "claims": {"u": {"devices": 3}}}), "checksum mismatch"),
    ],
)
def test_corrupt_files_are_one_line(tmp_path: Path, edit: object, expect: str) -> None:
    path = tmp_path / "checkpoint.json"
    checkpoint.save(path, claims())
    path.write_text(edit(path.read_text()))  # type: ignore[operator]
    with pytest.raises(CheckpointError) as e:
        checkpoint.load(path)
    assert str(e.value).startswith(f"checkpoint {path}: ") and expect in str(e.value)
    assert "\n" not in str(e.value)


def test_a_claims_file_holds_that_claim_and_the_listing_only_claims(tmp_path: Path) -> None:
    dev = claims()["u1"]
    checkpoint.save(checkpoint.claim_file(tmp_path, "u1"), {"u1": dev})
    checkpoint.save(checkpoint.claim_file(tmp_path, "u2"), {"u1": dev})  # a copy under another name
    (tmp_path / ".nfd-x.tmp").write_text("")  # a write under way
    (tmp_path / "u3.json.corrupt").write_text("")  # set aside
    assert checkpoint.listing(tmp_path) == {"u1", "u2"}
    path = checkpoint.claim_file(tmp_path, "u1")
    assert checkpoint.parse_claim(path, "u1", checkpoint.read(path)) == dev
    other = checkpoint.claim_file(tmp_path, "u2")
    with pytest.raises(CheckpointError, match=r": holds claim\(s\) u1, not u2$"):
        checkpoint.parse_claim(other, "u2", checkpoint.read(other))
    gone = checkpoint.claim_file(tmp_path, "u4")
    assert checkpoint.parse_claim(gone, "u4", checkpoint.read(gone)) is None
    assert checkpoint.listing(tmp_path / "none") == frozenset()


@pytest.mark.parametrize("uid", ["", ".hidden", "../u1", "a/b", "a\0b"])
def test_a_uid_that_cannot_name_a_file_is_refused(tmp_path: Path, uid: str) -> None:
    with pytest.raises(CheckpointError) as e:
        checkpoint.claim_file(tmp_path, uid)
    assert str(e.value) == f"claim UID {uid!r} cannot name a checkpoint file"


def test_instances_see_each_others_changes_and_list_the_directory_only_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    single = tmp_path / "checkpoint.json"
    a, b = (checkpoint.ClaimFiles(tmp_path / "claims", single, dict) for _ in range(2))
    listed = []
    real = checkpoint.listing
    monkeypatch.setattr(checkpoint, "listing", lambda d: listed.append(d) or real(d))

    def sync(files: checkpoint.ClaimFiles) -> int:
        n = len(listed)
        with files.locked():
            files.sync()
        return len(listed) - n

    assert sync(a) == 1 and sync(b) == 1  # a first look lists
    assert sync(a) == 0 and sync(b) == 0  # nothing changed since
    with a.locked():
        a.save("u1", claims()["u1"])
    assert sync(a) == 0  # its own change
    assert sync(b) == 1 and b.claims == {"u1": claims()["u1"]} and b.devices == 1
    with b.locked():
        b.remove("u1")
    assert sync(a) == 1 and a.claims == {} and a.devices == 0
    assert sync(a) == 0 and sync(b) == 0
    # A hand's change without a stamp: the directory replaced.
    (tmp_path / "claims").rename(tmp_path / "gone")
    (tmp_path / "claims").mkdir()
    checkpoint.save(checkpoint.claim_file(tmp_path / "claims", "u2"), {"u2": claims()["u1"]})
    assert sync(a) == 1 and set(a.claims) == {"u2"}
    # A new lock file (the plugin directory cleaned): listed again, then stamped.
    (tmp_path / "checkpoint.json.lock").unlink()
    assert sync(b) == 1 and set(b.claims) == {"u2"}
    assert sync(a) == 1 and sync(a) == 0 and sync(b) == 0
