"""nfd.record: value classes for the start-up path, declared and behaving as dataclasses."""

from __future__ import annotations

import re
from typing import Any

import pytest

from nfd.config import CoreConfig, KernelConfig, SourcesConfig
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.policy import Policy
from nfd.record import FrozenInstanceError, Record, field, field_metadata, record_fields, replace
from nfd.settings import ConfigError, from_mapping


class Point(Record, frozen=True):
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()


class Bag(Record):
    items: list[int] = field(default_factory=list)
    note: str = field(default="", compare=False, repr=False)


def test_init_eq_hash_repr_as_a_dataclass() -> None:
    assert Point(1) == Point(x=1, y=0) == Point(1, 0, ())
    assert Point(1) != Point(2) and Point(1) != (1, 0, ())
    assert hash(Point(1, 2)) == hash(Point(1, 2))
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=())"
    with pytest.raises(TypeError, match="missing required argument: 'x'"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        Point(1, z=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values"):
        Point(1, x=2)  # type: ignore[misc]
    with pytest.raises(TypeError, match="positional arguments"):
        Point(1, 2, (), 4)  # type: ignore[call-arg]


def test_frozen_and_mutable() -> None:
    p = Point(1)
    with pytest.raises(FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    a, b = Bag(), Bag()
    a.items.append(1)
    assert b.items == []  # a fresh default per instance
    b.items.append(1)
    b.note = "other"
    assert a == b and repr(a) == "Bag(items=[1])"
    with pytest.raises(TypeError):
        hash(a)


def test_replace_and_fields() -> None:
    cfg = SourcesConfig()
    changed = replace(cfg, kernel=replace(cfg.kernel, kconfig_file="/k"))
    assert type(changed) is SourcesConfig and changed.kernel.kconfig_file == "/k"
    assert changed.pci == cfg.pci and cfg.kernel.kconfig_file == ""
    assert record_fields(KernelConfig) == ("kconfig_file", "config_opts")
    assert field_metadata(CoreConfig, "label_whitelist")["key"] == "labelWhiteList"
    assert replace(Point(1), y=5) == Point(1, 5)


def test_shared_classes_keep_their_dataclass_behaviour() -> None:
    host = HostRoot.under("/h")
    assert host == HostRoot.under("/h") and host != HostRoot()
    assert str(host.sys) == "/h/sys" and hash(host) == hash(HostRoot.under("/h"))
    # Policy's compiled whitelist is neither compared nor shown.
    p = Policy.build(label_whitelist="^a")
    assert p == Policy(label_whitelist="^a") and "whitelist_re" not in repr(p)
    assert isinstance(p._whitelist_re, re.Pattern)
    f = Features()
    f.set_flags("cpu.cpuid", ["AVX"])
    assert f == Features(flags={"cpu.cpuid": {"AVX"}}) and f != Features()


class _Group(Record, frozen=True):
    names: tuple[str, ...] = ()
    count: int = 1


class _Top(Record, frozen=True):
    group: _Group = field(default_factory=_Group)
    raw: tuple[Any, ...] = field(default=(), metadata={"raw": True})


def test_config_loader_converts_by_the_defaults() -> None:
    warnings: list[str] = []
    top = from_mapping(
        _Top, {"group": {"names": ["a", 1], "count": 3, "bogus": 1}, "raw": [{"x": 1}]}, warnings=warnings
    )
    assert top == _Top(group=_Group(names=("a", "1"), count=3), raw=({"x": 1},))
    assert warnings == ["group: unknown key 'bogus' ignored"]
    with pytest.raises(ConfigError, match=r"group\.count: expected a whole number"):
        from_mapping(_Top, {"group": {"count": "many"}}, warnings=[])


class _Checked(Record, frozen=True):
    mode: str = "none"

    def __post_init__(self) -> None:
        if self.mode not in ("none", "single"):
            raise ValueError(f"mode {self.mode!r}")


def test_post_init_runs_after_the_fields_are_set() -> None:
    assert _Checked("single").mode == "single"
    with pytest.raises(ValueError, match="mode 'mixed'"):
        _Checked(mode="mixed")
    with pytest.raises(ValueError):
        replace(_Checked(), mode="other")


def test_dataclass_fields_of_a_parent_do_not_leak_into_subclasses() -> None:
    class Base(Record):
        a: int = 0

    class Child(Base):
        b: int = 1

    assert record_fields(Record) == ()
    assert record_fields(Base) == ("a",)
    assert record_fields(Child) == ("a", "b")
    assert Child(2, 3) == Child(a=2, b=3) and repr(Child()).endswith(".Child(a=0, b=1)")
