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
