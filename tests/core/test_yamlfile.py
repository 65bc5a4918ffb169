"""nfd.yamlfile: every file problem is one line that names the file once and says why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nfd.yamlfile import YamlFileError, load, load_all


def message(path: Path, **kw: int) -> str:
    with pytest.raises(YamlFileError) as e:
        load(str(path), **kw)
    text = str(e.value)
    assert "\n" not in text and text.count(str(path)) == 1 and text.startswith(str(path))
    return text


def test_what_is_not_a_readable_text_file(tmp_path: Path) -> None:
    assert message(tmp_path / "nope.yaml").endswith(": no such file")
    assert message(tmp_path).endswith(": is a directory, not a file")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert message(fifo).endswith(": not a regular file")  # and it did not block
    big = tmp_path / "big.yaml"
    big.write_text("a: 1\n" * 10)
    assert message(big, limit=20).endswith(": 50 bytes, more than the limit of 20 bytes")
    binary = tmp_path / "blob.yaml"
    binary.write_bytes(b"a: \xff\xfe\n")
    assert "not UTF-8 text (byte 3)" in message(binary)


def test_yaml_errors_say_where_and_why(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("a: 1\nb: [2\nc: 3\n")
    assert "not valid YAML: line 3, column 2: " in message(f)
    f.write_text("a: 'x\x00y'\n")
    assert "not valid YAML: " in message(f)


def test_documents(tmp_path: Path) -> None:
    f = tmp_path / "docs.yaml"
    f.write_text("a: 1\n---\n---\nb: 2\n")
    assert load_all(str(f)) == [{"a": 1}, {"b": 2}]
    f.write_text("")
    assert load(str(f)) is None


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a: 2001-13-45\n", "month must be in 1..12"),
        ("a: 2001-02-30 10:00:00\n", "day is out of range for month"),
        ("a: " + "1" * 5000 + "\n", "a number of more than 4300 digits"),
        ("a: [-" + "1" * 5000 + "]\n", "a number of more than 4300 digits"),
    ],
)
def test_a_value_yaml_cannot_build_is_a_yaml_error(tmp_path: Path, text: str, why: str) -> None:
    """PyYAML raises ValueError, not YAMLError, for a date that does not exist or a
    number Python will not convert."""
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    assert message(f).endswith(f": not valid YAML: {why}")
    with pytest.raises(YamlFileError):
        load_all(str(f))


@pytest.mark.parametrize("text", ["a: !!timestamp x\n", "a: !!bool x\n", "a: !!int\n", "a: !!float x\n"])
def test_a_tag_its_value_does_not_fit_is_a_yaml_error(tmp_path: Path, text: str) -> None:
    """PyYAML's constructors fail with AttributeError, KeyError, IndexError or
    ValueError for an explicit tag on a value of the wrong form."""
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    assert ": not valid YAML: " in message(f)
