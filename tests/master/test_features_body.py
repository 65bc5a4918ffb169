"""The features PUT's one-pass parse (``jsonbody.parse_features``: the TypedDicts of
``models.FEATURES_BODY``) takes exactly the bodies that parsing then checking against
``FeaturesRequest`` takes, answers the same values, and refuses the others with the
same issues."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nfd.features import Features
from nfd.master.api import jsonbody
from nfd.master.api.models import FeaturesRequest
from nfd.master.core.featurestore import encode

BASELINE = Path(__file__).resolve().parents[1] / "fixtures" / "upstream-baseline" / "features.json"


def two_steps(body: bytes) -> tuple[str, Any]:
    try:
        data = jsonbody.parse(body)
        jsonbody.check(FeaturesRequest, data)
    except jsonbody.BodyError as e:
        return "refused", e.issues
    return "taken", data


def one_pass(body: bytes) -> tuple[str, Any]:
    try:
        return "taken", jsonbody.parse_features(body)
    except jsonbody.BodyError as e:
        return "refused", e.issues


def same(body: bytes) -> None:
    old, new = two_steps(body), one_pass(body)
    assert new[0] == old[0], body
    if old[0] == "refused":
        assert new[1] == old[1]
        return
    # What the master reads of a taken body: keys the contract does not name are unread
    # (the one-pass parse leaves them out), the rest is equal.
    o, n = old[1], new[1]
    assert encode(n["features"]).digest == encode(o["features"]).digest
    assert Features.from_dict(n["features"]).to_dict() == Features.from_dict(o["features"]).to_dict()
    for k in ("nfdVersion", "digest", "devicePluginResources"):
        assert n.get(k) == o.get(k)


GOOD = {
    "nfdVersion": "v1",
    "digest": "d",
    "features": {
        "flags": {"cpu.cpuid": {"elements": {"AVX": {}, "SSE": {}}}},
        "attributes": {"kernel.version": {"elements": {"major": "6", "full": "6.1.0"}}},
        "instances": {"pci.device": {"elements": [{"attributes": {"vendor": "8086"}}]}},
    },
    "devicePluginResources": ["example.com/gpu"],
}

CASES: list[Any] = [
    GOOD,
    {"features": {}},
    {"features": {"flags": {}, "attributes": {}, "instances": {}}},
    {**GOOD, "extra": [1, 2]},  # unknown top-level keys: ignored
    {"features": {"flags": {"f": {"elements": {}, "extra": 1}}}},  # ... inside a group too
    {"features": {"instances": {"i": {"elements": [{"attributes": {}, "x": 1}]}}}},
    {"features": {"flags": {"f": {}}, "attributes": {"a": {}}, "instances": {"i": {}}}},
    {"features": {"flags": {"f": {"elements": {"x": {"any": [1, None, {"y": 2.5}]}}}}}},
    # refused
    {},
    {"features": None},
    {"features": {"bad": {}}},
    {"features": {"attributes": {"a": {"elements": {"k": 1}}}}},
    {"features": {"attributes": {"a": {"elements": None}}}},
    {"features": {"instances": {"i": {"elements": {"attributes": {}}}}}},
    {"features": {"flags": {"f": {"elements": ["AVX"]}}}},
    {"features": {}, "nfdVersion": 1},
    {"features": {}, "devicePluginResources": "x"},
    {"features": {}, "devicePluginResources": [1]},
    [GOOD],
    "features",
]

RAW = [
    b'{"features": {"flags": {"f": {"elements": {"x": {"v": NaN}}}}}}',
    b'{"features": {"flags": {"f": {"elements": {"x": {"v": -Infinity}}}}}}',
    b'{"features": {"attributes": {"a": {"elements": {"k": "NaN"}}}}}',  # a string: taken
    b'{"features": {}, "digest": "\\ud800"}',
    b'{"features": {}, "digest": "\xff"}',
    b'{"features": {}',
    b"",
    b'{"features": {}, "features": {"bad": 1}}',
    b'{"features": {"bad": 1}, "features": {}}',
]


def test_the_cases_and_a_real_body():
    for case in CASES:
        same(json.dumps(case).encode())
    for body in RAW:
        same(body)
    same(b'{"nfdVersion": "v0.18", "features": ' + BASELINE.read_bytes() + b"}")


_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3)
_json = st.recursive(
    _scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
    max_leaves=8,
)
_strings = st.dictionaries(st.text(max_size=3), st.text(max_size=3) | _json, max_size=3)
_group = st.fixed_dictionaries(
    {},
    optional={
        "elements": _strings
        | st.lists(st.fixed_dictionaries({}, optional={"attributes": _strings}) | _json, max_size=2)
        | _json
    },
)
_features = st.fixed_dictionaries(
    {},
    optional={
        k: st.dictionaries(st.text(max_size=3), _group | _json, max_size=2) | _json
        for k in ("flags", "attributes", "instances")
    },
)


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {"features": _features | _json},
        optional={
            "nfdVersion": st.text(max_size=3) | _json,
            "devicePluginResources": st.lists(st.text(max_size=3)) | _json,
        },
    )
)
def test_any_body(body):
    same(json.dumps(body).encode())
