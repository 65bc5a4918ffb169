"""Property tests of the features JSON the master accepts (``Features.from_dict``) and
of the canonical encoder over whatever it accepts."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nfd.canonical import encode
from nfd.features import FeatureFormatError, Features
from tests.fuzzing import junk, mutated, raw_bytes

VALID: dict[str, Any] = {
    "flags": {"cpu.cpuid": {"elements": {"AVX": {}, "AVX2": {}}}, "kernel.loadedmodule": {"elements": None}},
    "attributes": {"cpu.model": {"elements": {"family": "6", "id": "143"}}, "kernel.version": {}},
    "instances": {"pci.device": {"elements": [{"attributes": {"vendor": "8086"}}, {"attributes": None}]}},
}


def accepted(load: Callable[[], Features]) -> Features | None:
    """What ``load`` reads, or None after checking its error is one line."""
    try:
        return load()
    except FeatureFormatError as e:
        assert "\n" not in str(e), str(e)
        return None


def check(data: Any) -> None:
    f = accepted(lambda: Features.from_dict(data))
    if f is None:
        return
    # What it accepted can be sent, stored and read again: equal features, equal digests.
    again = Features.from_dict(json.loads(f.to_json()))
    assert again.to_dict() == f.to_dict()
    assert again.digest() == f.digest()
    encode({"attributes": f.attributes, "flags": f.flags, "instances": f.instances})


@given(data=mutated(VALID))
def test_features_of_the_right_shape_with_bad_values(data: Any) -> None:
    check(data)


@given(data=junk)
def test_any_json_value(data: Any) -> None:
    check(data)


def test_keys_that_are_not_strings() -> None:
    """JSON keys are strings; a YAML features file (``nfd rules test --features``) may
    have others. They are errors naming where, as values of the wrong type are."""
    for data in (
        {"attributes": {"cpu.model": {"elements": {1: "6", "a": "b"}}}},
        {"instances": {"pci.device": {"elements": [{"attributes": {None: "x", "a": "b"}}]}}},
    ):
        try:
            Features.from_dict(data)
        except FeatureFormatError as e:
            assert "is not a string" in str(e) and "\n" not in str(e)
            continue
        raise AssertionError(f"accepted {data}")


@given(data=st.one_of(raw_bytes, st.just(b"[" + b"1" * 5000 + b"]"), st.just(b"\xff{}")))
def test_from_json_of_any_bytes(data: bytes) -> None:
    f = accepted(lambda: Features.from_json(data))
    if f is not None:
        check(f.to_dict())
