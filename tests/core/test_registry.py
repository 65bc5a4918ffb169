import pytest

from nfd.config import SourcesConfig, WorkerConfig
from nfd.discovery import discover
from nfd.features import Features, Labels
from nfd.hostroot import HostRoot
from nfd.labels import node_labels
from nfd.sources import DuplicateSourceError, Registry, UnknownSourceError


class Fake:
    def __init__(self, name: str, *, fail: bool = False, label_fail: bool = False) -> None:
        self.name = name
        self.fail = fail
        self.label_fail = label_fail

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        if self.fail:
            raise OSError("boom")
        f = Features()
        f.set_attributes(f"{self.name}.thing", {"x": "1"})
        return f

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        if self.label_fail:
            raise KeyError("nope")
        return {"thing.x": features.attributes[f"{self.name}.thing"]["x"]}


def test_duplicates_refused() -> None:
    with pytest.raises(DuplicateSourceError):
        Registry([Fake("a"), Fake("a")])


def test_select_all_minus_and_order() -> None:
    r = Registry([Fake("a"), Fake("b"), Fake("c")])
    assert [s.name for s in r.select(["all", "-b"])] == ["a", "c"]
    assert [s.name for s in r.select(["c", "a"])] == ["a", "c"]
    with pytest.raises(UnknownSourceError, match="unknown feature source 'zz'"):
        r.select(["zz"])


def test_a_failing_source_keeps_the_others() -> None:
    srcs = [Fake("a"), Fake("b", fail=True), Fake("c", label_fail=True), Fake("d")]
    result = discover(srcs, HostRoot(), SourcesConfig())
    assert result.features.names() == {"a.thing", "c.thing", "d.thing"}
    assert "boom" in result.errors["b"]
    ok = [s for s in srcs if s.name != "b"]
    labels = node_labels(ok, result.features, WorkerConfig())
    assert labels.labels == {
        "feature.node.kubernetes.io/a-thing.x": "1",
        "feature.node.kubernetes.io/d-thing.x": "1",
    }
    assert [e for e in labels.rule_errors if e.startswith("source c:") and "nope" in e]
