import json
from pathlib import Path

import pytest

from nfd.features import FeatureFormatError, Features


def sample() -> Features:
    f = Features()
    f.set_flags("cpu.cpuid", ["AVX2", "AVX"])
    f.set_attributes("cpu.model", {"family": "6", "vendor_id": "Intel"})
    f.set_instances("pci.device", [{"vendor": "10de", "class": "0302"}, {"vendor": "8086", "class": "0600"}])
    return f


def test_upstream_shape_and_order() -> None:
    d = sample().to_dict()
    assert d == {
        "flags": {"cpu.cpuid": {"elements": {"AVX": {}, "AVX2": {}}}},
        "attributes": {"cpu.model": {"elements": {"family": "6", "vendor_id": "Intel"}}},
        "instances": {
            "pci.device": {
                "elements": [
                    {"attributes": {"class": "0302", "vendor": "10de"}},
                    {"attributes": {"class": "0600", "vendor": "8086"}},
                ]
            }
        },
    }
    assert list(d["flags"]["cpu.cpuid"]["elements"]) == ["AVX", "AVX2"]


def test_round_trip_and_digest_independent_of_build_order() -> None:
    a = sample()
    b = Features.from_json(a.to_json())
    assert b == a
    c = Features()
    c.set_instances("pci.device", a.instances["pci.device"])
    c.set_attributes("cpu.model", {"vendor_id": "Intel", "family": "6"})
    c.set_flags("cpu.cpuid", ["AVX", "AVX2"])
    assert c.digest() == a.digest()
    c.flags["cpu.cpuid"].add("SSE")
    assert c.digest() != a.digest()


def test_upstream_baseline_file_parses(fixtures: Path) -> None:
    text = (fixtures / "upstream-baseline" / "features.json").read_text()
    f = Features.from_json(text)
    assert "AVX512F" in f.flags["cpu.cpuid"]
    assert f.attributes["kernel.version"]["major"] == "6"
    assert json.loads(f.to_json()) == json.loads(text)


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ([], "expected an object"),
        ({"bogus": {}}, "unknown key"),
        ({"flags": {"cpu.cpuid": {"elements": ["AVX"]}}}, "flags.cpu.cpuid.elements"),
        ({"attributes": {"cpu.model": {"elements": {"family": 6}}}}, "attributes.cpu.model.elements.family"),
        (
            {"instances": {"pci.device": {"elements": [{"attributes": {"a": 1}}]}}},
            "instances.pci.device.elements[0]",
        ),
    ],
)
def test_bad_shapes_name_the_place(doc: object, where: str) -> None:
    with pytest.raises(FeatureFormatError, match=__import__("re").escape(where)):
        Features.from_dict(doc)


def test_only_keeps_domains() -> None:
    f = sample().only(["cpu"])
    assert f.names() == {"cpu.cpuid", "cpu.model"}
