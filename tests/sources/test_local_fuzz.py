"""Property tests of features.d files (the local source) and of the custom source's
rules from the worker config: any bytes, huge lines, bad UTF-8, odd expiry times. A bad
line costs that line: the others are kept, and each warning is one line naming the file
and line."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nfd.features import Features
from nfd.sources.custom import custom_rule_labels
from nfd.sources.local import MAX_FILE_SIZE, parse_feature_file, read_features_dir
from tests.fuzzing import junk, mutated, raw_bytes

NOW = datetime(2026, 1, 1, tzinfo=UTC)

# Times at the edges of what datetime holds, in zones up to a day away from UTC.
times = st.builds(
    lambda t, minutes: t.replace(tzinfo=timezone(timedelta(minutes=minutes))),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
    st.integers(-(24 * 60 - 1), 24 * 60 - 1),
)
expiry_values = st.one_of(
    times.map(datetime.isoformat),
    st.sampled_from(["", "now", "2026-13-01T00:00:00Z", "2026-01-01", "2026-01-01T00:00:00", "9" * 400]),
    st.text(max_size=30),
)
lines = st.one_of(
    st.text(max_size=40),
    expiry_values.map(lambda v: f"# +expiry-time={v}"),
    st.sampled_from(["# +no-label", "# +no-feature", "# +bogus", "#", "=", "a=b=c", "a b=c", "\x00=1", "\r"]),
    st.integers(0, 3).map(lambda n: "x" * (MAX_FILE_SIZE // 4 * n)),
)
files = st.one_of(st.lists(lines, max_size=12).map("\n".join).map(str.encode), raw_bytes)


def check_warnings(warnings: list[str], name: str) -> None:
    for w in warnings:
        assert "\n" not in w and "\r" not in w, w
        assert w.startswith(name), w
        assert re.match(rf"{re.escape(name)}(:\d+)?: ", w), w


@given(text=st.lists(lines, max_size=12).map("\n".join))
def test_any_lines(text: str) -> None:
    parsed = parse_feature_file(text, "features.d/f", NOW)
    check_warnings(parsed.warnings, "features.d/f")
    assert parsed.next_expiry is None or parsed.next_expiry >= NOW
    for name in [*parsed.features, *parsed.labels]:
        assert name and not any(c.isspace() for c in name)


@settings(max_examples=100)
@given(contents=st.lists(files, min_size=1, max_size=3))
def test_a_directory_of_any_files(tmp_path: Path, contents: list[bytes]) -> None:
    d = tmp_path / "features.d"
    d.mkdir(exist_ok=True)
    for old in d.iterdir():
        old.unlink()
    for i, data in enumerate(contents):
        (d / f"f{i}").write_bytes(data)
    (d / "zz-good").write_text("good=1\n")  # read last: whatever came before, it counts
    warnings: list[str] = []
    parsed = read_features_dir(d, lambda: NOW, warnings.append)
    for w in warnings:
        assert "\n" not in w and str(d) in w, w
    assert parsed.features["good"] == parsed.labels["good"] == "1"


@given(value=expiry_values, now=times)
def test_any_expiry_time_against_any_now(value: str, now: datetime) -> None:
    parsed = parse_feature_file(f"# +expiry-time={value}\na=1\n", "f", now)
    check_warnings(parsed.warnings, "f")


CUSTOM: list[Any] = [
    {
        "name": "r",
        "labels": {"a": "@cpu.model.family", "b": "x"},
        "labelsTemplate": "{{ range .cpu.cpuid }}c-{{ .Name }}=1\n{{ end }}",
        "matchFeatures": [{"feature": "cpu.cpuid", "matchExpressions": {"AVX": {"op": "Exists"}}}],
    },
    {"name": "legacy", "matchOn": [{"pciId": {"vendor": ["15b3"]}}]},
]


@given(rules=st.one_of(mutated(CUSTOM), st.lists(junk, max_size=3)))
def test_custom_rules_from_the_worker_config(rules: Any) -> None:
    node = Features(flags={"cpu.cpuid": {"AVX"}}, attributes={"cpu.model": {"family": "6"}})
    labels = custom_rule_labels(rules if isinstance(rules, list) else [rules], node)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
