"""The str-method checks that replace regular expressions on discovery's path, against
the expressions they replace."""

import re

import pytest

from nfd.chars import (
    ALNUM,
    NAME_CHARS,
    is_dns1123_label,
    is_label_value,
    is_name,
    keep_only,
    only,
    replace_others,
    shown,
)

SAMPLES = [
    "", "a", "A", "0", "-", "_", ".", "a-b", "a_b", "a.b", "-a", "a-", ".a", "a.", "ab",
    "Ab9", "a b", "a/b", "é", "aé", "a\n", "\na", "a\nb", "x" * 63, "x" * 64, "GenuineIntel",
    "KVMKVMKVM\x00\x00\x00", "Microsoft Hv", "6.1.0-18-amd64", "a--b", "a..b", "1", "٣",
]  # fmt: skip

NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
VALUE = re.compile(r"|[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
DNS1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@pytest.mark.parametrize("text", SAMPLES + [s.lower() for s in SAMPLES] + [s.upper() for s in SAMPLES])
def test_checks_agree_with_kubernetes_expressions(text: str) -> None:
    assert is_name(text) == bool(NAME.fullmatch(text))
    assert is_label_value(text) == bool(VALUE.fullmatch(text))
    assert is_dns1123_label(text) == bool(DNS1123.fullmatch(text))


@pytest.mark.parametrize("text", SAMPLES)
def test_clean_ups_agree_with_substitutions(text: str) -> None:
    assert replace_others(text, NAME_CHARS, "_") == re.sub(r"[^-A-Za-z0-9_.]", "_", text)
    assert replace_others(text, NAME_CHARS, "_", runs=True) == re.sub(r"[^-A-Za-z0-9_.]+", "_", text)
    assert keep_only(text, ALNUM + "-_. ") == re.sub(r"[^A-Za-z0-9\-_. ]", "", text)


def test_only() -> None:
    assert only("", "ab") and only("abba", "ab") and not only("abc", "ab") and not only("cab", "ab")


def test_a_value_in_a_message_stays_short() -> None:
    assert shown(2**63) == "9223372036854775808"  # 64 bits: printed
    assert shown(10**5000) == "a number of 16610 bits"
    assert shown("x" * 100) == "'" + "x" * 56 + "..."  # 60 characters
    assert shown(float("nan")) == "nan" and shown(None) == "None"
