"""nfd.record: value classes that behave as the dataclasses they replace."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from nfd.config import CoreConfig, KernelConfig, SourcesConfig, WorkerConfig, from_mapping
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.policy import Policy
from nfd.record import Record, field, replace


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
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    a, b = Bag(), Bag()
    a.items.append(1)
    assert b.items == []  # a fresh default per instance
    b.items.append(1)
    b.note = "other"
    assert a == b and repr(a) == "Bag(items=[1])"
    with pytest.raises(TypeError):
        hash(a)


def test_dataclasses_functions_work_on_records() -> None:
    cfg = SourcesConfig()
    assert dataclasses.is_dataclass(cfg)
    assert [f.name for f in dataclasses.fields(KernelConfig)] == ["kconfig_file", "config_opts"]
    changed = dataclasses.replace(cfg, kernel=dataclasses.replace(cfg.kernel, kconfig_file="/k"))
    assert type(changed) is SourcesConfig and changed.kernel.kconfig_file == "/k"
    assert changed.pci == cfg.pci and cfg.kernel.kconfig_file == ""
    assert dataclasses.asdict(WorkerConfig())["core"]["feature_sources"] == ("all",)
    key = next(f for f in dataclasses.fields(CoreConfig) if f.name == "label_whitelist")
    assert key.metadata["key"] == "labelWhiteList"
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


@dataclasses.dataclass(frozen=True)
class _PlainGroup:
    names: tuple[str, ...] = ()
    raw: Any = None


class _Top(Record, frozen=True):
    plain: _PlainGroup = field(default_factory=_PlainGroup)
    raw: Any = None


def test_config_loader_takes_records_and_plain_dataclass_groups() -> None:
    warnings: list[str] = []
    top = from_mapping(
        _Top, {"plain": {"names": ["a"], "raw": {"x": 1}, "bogus": 1}, "raw": [1]}, warnings=warnings
    )
    assert top == _Top(plain=_PlainGroup(names=("a",), raw={"x": 1}), raw=[1])
    assert warnings == ["plain: unknown key 'bogus' ignored"]


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
        dataclasses.replace(_Checked(), mode="other")


def test_dataclass_fields_of_a_parent_do_not_leak_into_subclasses() -> None:
    class Base(Record):
        a: int = 0

    class Child(Base):
        b: int = 1

    assert dataclasses.fields(Record) == ()
    assert [f.name for f in dataclasses.fields(Base)] == ["a"]
    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b"]
    assert Child(2, 3) == Child(a=2, b=3) and repr(Child()).endswith(".Child(a=0, b=1)")
