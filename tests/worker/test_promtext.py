"""The worker's metrics text is valid Prometheus exposition: parsed back with
prometheus-client's own parser, values and labels intact."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nfd.promtext import Counter, Histogram, Registry
from nfd.worker.metrics import DISCOVERY_BUCKETS, WorkerMetrics


def families(text: bytes) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text.decode())}


def test_worker_metrics_parse_back() -> None:
    m = WorkerMetrics('node "a"\\b')
    m.discovery_took(0.02)
    m.discovery_took(0.3)
    m.discovery_took(7)
    m.request("heartbeat", "ok")
    m.request("heartbeat", "ok")
    m.source_failed("kernel")
    fams = {f.name: f for f in text_string_to_metric_families(m.exposition().decode())}
    assert set(fams) == {
        "nfd_worker_build_info",
        "nfd_worker_feature_discovery_duration_seconds",
        "nfd_worker_master_requests",
        "nfd_worker_source_errors",
    }
    hist = {
        (s.name, s.labels.get("le")): s.value
        for s in fams["nfd_worker_feature_discovery_duration_seconds"].samples
    }
    assert hist[("nfd_worker_feature_discovery_duration_seconds_bucket", "0.01")] == 0
    assert hist[("nfd_worker_feature_discovery_duration_seconds_bucket", "0.025")] == 1
    assert hist[("nfd_worker_feature_discovery_duration_seconds_bucket", "0.5")] == 2
    assert hist[("nfd_worker_feature_discovery_duration_seconds_bucket", "1.0")] == 2
    assert hist[("nfd_worker_feature_discovery_duration_seconds_bucket", "+Inf")] == 3
    assert hist[("nfd_worker_feature_discovery_duration_seconds_count", None)] == 3
    assert abs(hist[("nfd_worker_feature_discovery_duration_seconds_sum", None)] - 7.32) < 1e-9
    node_labels = {s.labels["node"] for s in fams["nfd_worker_feature_discovery_duration_seconds"].samples}
    assert node_labels == {'node "a"\\b'}
    (req,) = fams["nfd_worker_master_requests"].samples
    assert (req.name, req.labels, req.value) == (
        "nfd_worker_master_requests_total",
        {"kind": "heartbeat", "result": "ok"},
        2.0,
    )
    assert len(DISCOVERY_BUCKETS) == 7


def test_label_names_are_checked() -> None:
    c = Counter("x_total", "help", ["a"])
    try:
        c.inc(b="1")
    except ValueError as e:
        assert "labels" in str(e)
    else:
        raise AssertionError("a wrong label name was accepted")


def test_empty_families_still_declare_themselves() -> None:
    r = Registry()
    r.add(Histogram("h_seconds", "help", ["n"], buckets=(1.0,)))
    assert families(r.exposition())["h_seconds"].samples == []  # type: ignore[attr-defined]


def test_a_sample_needs_exactly_the_familys_labels_and_a_bound_is_its_own_bucket() -> None:
    c = Counter("x_total", "x", ["a", "b"])
    for wrong in ({"a": "1"}, {"a": "1", "c": "2"}, {"a": "1", "b": "2", "c": "3"}):
        with pytest.raises(ValueError, match="labels"):
            c.inc(**wrong)
    c.inc(b="2", a="1")
    assert c.value(a="1", b="2") == 1.0
    h = Histogram("h", "h", [], buckets=(0.1, 1.0))
    for v in (0.1, 0.5, 1.0, 2.0):
        h.observe(v)
    assert 'h_bucket{le="0.1"} 1.0' in h.lines() and 'h_bucket{le="1.0"} 3.0' in h.lines()
    assert 'h_bucket{le="+Inf"} 4.0' in h.lines()
