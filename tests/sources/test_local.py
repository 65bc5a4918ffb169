"""The local source: features.d files, directives, bad lines and limits."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nfd.config import LocalConfig, SourcesConfig, WorkerConfig
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.labels import node_labels
from nfd.sources.local import LocalSource, features_dir, parse_feature_file

SRC = LocalSource()
FEATURES_D = "etc/kubernetes/node-feature-discovery/features.d"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_fixture_files(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("arm64-al2023"), cfg)
    # .hidden is skipped; "old" expired in 2001; no-label / no-feature hit one line each
    assert f == Features(
        attributes={
            "local.feature": {
                "example.com/accelerator": "none",
                "instance-family": "m7g",
                "raw-only": "1",
                "plain": "true",
            },
            "local.label": {
                "example.com/accelerator": "none",
                "instance-family": "m7g",
                "label-only": "true",
                "plain": "true",
            },
        }
    )
    assert SRC.labels(f, cfg) == f.attributes["local.label"]


def test_labels_keep_their_names(host: Callable[[str], HostRoot]) -> None:
    # not "local-"-prefixed; unprefixed names get the feature namespace
    cfg = WorkerConfig()
    f = SRC.discover(host("arm64-al2023"), cfg.sources)
    assert node_labels([SRC], f, cfg).labels == {
        "example.com/accelerator": "none",
        "feature.node.kubernetes.io/instance-family": "m7g",
        "feature.node.kubernetes.io/label-only": "true",
        "feature.node.kubernetes.io/plain": "true",
    }


def test_bad_lines_are_warnings_naming_file_and_line() -> None:
    text = "good=1\n=novalue\nhas space=2\n# +bogus\n# +expiry-time=tomorrow\nalso-good\n"
    parsed = parse_feature_file(text, "/x/features.d/f", NOW)
    assert parsed.features == parsed.labels == {"good": "1", "also-good": "true"}
    assert parsed.warnings == [
        "/x/features.d/f:2: '=novalue' is not name[=value], ignored",
        "/x/features.d/f:3: 'has space=2' is not name[=value], ignored",
        "/x/features.d/f:4: unknown directive 'bogus'",
        "/x/features.d/f:5: expiry-time needs an RFC 3339 time, got 'tomorrow'",
    ]


def test_expiry_applies_to_the_lines_after_it() -> None:
    past = (NOW - timedelta(seconds=1)).isoformat()
    future = (NOW + timedelta(days=1)).isoformat().replace("+00:00", "Z")
    text = f"before=1\n# +expiry-time={past}\ngone=1\n# +expiry-time={future}\nkept=1\n"
    parsed = parse_feature_file(text, "f", NOW)
    assert parsed.labels == {"before": "1", "kept": "1"} and parsed.warnings == []


def test_values_keep_equals_and_later_lines_win() -> None:
    parsed = parse_feature_file("a=x=y\nb=1\nb=2\n  c  \n", "f", NOW)
    assert parsed.labels == {"a": "x=y", "b": "2", "c": "true"}


def test_directory_rules(tmp_path: Path, cfg: SourcesConfig, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / FEATURES_D
    d.mkdir(parents=True)
    (d / "a").write_text("shared=from-a\nonly-a\n")
    (d / "b").write_text("shared=from-b\nbroken line\nafter-bad=1\n")
    (d / "big").write_text("x=1\n" * 20000)  # 80 000 bytes: over 64 KiB
    (d / ".dot").write_text("dot=1\n")
    (d / "subdir").mkdir()
    (d / "dangling").symlink_to(d / "nowhere")
    marker = tmp_path / "ran"
    hook = d / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\nhook-line=1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    with caplog.at_level(logging.WARNING):
        f = SRC.discover(HostRoot.under(tmp_path), cfg)
    assert f.attributes["local.label"] == {
        "shared": "from-b",
        "only-a": "true",
        "after-bad": "1",
        "hook-line": "1",
    }
    assert not marker.exists()  # executables are read, never run
    msgs = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"{d / 'b'}:2:") for m in msgs)
    assert any(str(d / "big") in m and "limit" in m for m in msgs)
    assert any(f"{hook}:2:" in m for m in msgs)  # "touch ..." is not name[=value]


def test_file_of_exactly_64_kib_is_read(tmp_path: Path, cfg: SourcesConfig) -> None:
    d = tmp_path / FEATURES_D
    d.mkdir(parents=True)
    body = "k=" + "v" * (64 * 1024 - 3) + "\n"
    (d / "edge").write_text(body)
    assert len(body) == 64 * 1024
    assert SRC.discover(HostRoot.under(tmp_path), cfg).attributes["local.label"]["k"] == "v" * (64 * 1024 - 3)


def test_features_dir_mapping(tmp_path: Path) -> None:
    host = HostRoot.under(tmp_path / "host")
    cfg = SourcesConfig()
    assert Path(features_dir(host, cfg)) == tmp_path / "host" / FEATURES_D
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "f").write_text("x=1\n")
    c = replace(cfg, local=LocalConfig(features_dir=str(other)))
    assert Path(features_dir(host, c)) == other
    assert SRC.discover(host, c).attributes["local.label"] == {"x": "1"}
    assert Path(features_dir(host, replace(cfg, local=LocalConfig(features_dir="/etcetera")))) == Path(
        "/etcetera"
    )


def test_no_directory_gives_empty_features(tmp_path: Path, cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot.under(tmp_path), cfg)
    assert f == Features(attributes={"local.label": {}, "local.feature": {}})


def test_unlistable_directory_is_logged(
    tmp_path: Path, cfg: SourcesConfig, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / FEATURES_D
    d.parent.mkdir(parents=True)
    d.write_text("a file, not a directory")
    with caplog.at_level(logging.WARNING):
        f = SRC.discover(HostRoot.under(tmp_path), cfg)
    assert f.attributes["local.label"] == {}


def test_live_machine(cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot(), cfg)
    assert set(f.attributes) == {"local.label", "local.feature"}
    if not os.path.isdir(cfg.local.features_dir):
        assert f.attributes["local.label"] == {}


def test_control_characters_in_names_are_escaped_in_every_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = tmp_path / FEATURES_D
    d.mkdir(parents=True)
    (d / "f\x1b[31mile").write_text("ok=1\n# +weird\x1b[2J\nbad name\x00=1\n# +expiry-time=\x1b]0;x\n")
    (d / "big\x07").write_bytes(b"x" * (70 * 1024))
    caplog.set_level(logging.WARNING)
    f = SRC.discover(HostRoot.under(tmp_path), SourcesConfig())
    assert f.attributes["local.label"] == {"ok": "1"}
    assert len(caplog.records) == 4
    assert "\x1b" not in caplog.text and "\x00" not in caplog.text and "\x07" not in caplog.text
    assert "f\\x1b[31mile:2" in caplog.text and "big\\x07" in caplog.text


def test_next_expiry_is_the_earliest_time_still_to_come(tmp_path: Path) -> None:
    soon, later, past = NOW + timedelta(minutes=5), NOW + timedelta(hours=2), NOW - timedelta(days=1)
    text = (
        f"always=1\n# +expiry-time={past.isoformat()}\nold=1\n"
        f"# +expiry-time={later.isoformat()}\nlater=1\n# +expiry-time={soon.isoformat()}\nsoon=1\n"
    )
    parsed = parse_feature_file(text, "f", NOW)
    assert parsed.labels == {"always": "1", "later": "1", "soon": "1"}
    assert parsed.next_expiry == soon
    # At that time the pass drops the lines it ends, and names the next one.
    parsed = parse_feature_file(text, "f", soon + timedelta(seconds=1))
    assert parsed.labels == {"always": "1", "later": "1"} and parsed.next_expiry == later
    parsed = parse_feature_file(text, "f", later + timedelta(seconds=1))
    assert parsed.labels == {"always": "1"} and parsed.next_expiry is None


def test_the_source_exposes_the_next_expiry_of_the_directory(tmp_path: Path) -> None:
    d = tmp_path / FEATURES_D
    d.mkdir(parents=True)
    t1, t2 = datetime.now(UTC) + timedelta(hours=3), datetime.now(UTC) + timedelta(hours=1)
    (d / "a").write_text(f"# +expiry-time={t1.isoformat()}\na=1\n")
    (d / "b").write_text(f"# +expiry-time={t2.isoformat()}\nb=1\n")
    src = LocalSource()
    assert src.next_expiry is None
    src.discover(HostRoot.under(tmp_path), SourcesConfig())
    assert src.next_expiry == t2
    (d / "b").unlink()
    src.discover(HostRoot.under(tmp_path), SourcesConfig())
    assert src.next_expiry == t1


def test_feature_files_linked_absolutely_are_the_hosts(tmp_path: Path) -> None:
    d = tmp_path / FEATURES_D
    d.mkdir(parents=True)
    (tmp_path / "etc/shared.txt").write_text("linked=yes\n")
    os.symlink("/etc/shared.txt", d / "link")
    f = SRC.discover(HostRoot.under(tmp_path), SourcesConfig())
    assert f.attributes["local.label"] == {"linked": "yes"}
