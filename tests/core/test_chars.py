"""Values from files in one-line messages and on a terminal."""

from nfd.chars import printable, shown


def test_a_value_in_a_message_stays_short() -> None:
    assert shown(2**63) == "9223372036854775808"  # 64 bits: printed
    assert shown(10**5000) == "a number of 16610 bits"
    assert shown("x" * 100) == "'" + "x" * 56 + "..."  # 60 characters
    assert shown(float("nan")) == "nan" and shown(None) == "None"


def test_control_characters_are_escaped() -> None:
    assert printable("eth0") == "eth0"
    assert printable("a\x1b[2Jb\nc") == "a\\x1b[2Jb\\nc"
