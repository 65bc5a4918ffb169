"""Parsers on discovery's path that use str methods instead of regular expressions, held
to the expressions they replaced on real-world and awkward inputs."""

import re

import pytest

from nfd.hw.accel_pci import _modalias_ids
from nfd.sources.kernel import parse_version
from nfd.sources.system import parse_os_release

KERNEL_VERSION = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?(-.*)?")
OS_VERSION = re.compile(r"(\d+)(?:\.(\d+))?(?:\..*)?")
MODALIAS = re.compile(
    r"pci:v0000([0-9A-Fa-f]{4})d0000([0-9A-Fa-f]{4})sv0000([0-9A-Fa-f]{4})sd0000([0-9A-Fa-f]{4})"
    r"bc([0-9A-Fa-f]{2})sc([0-9A-Fa-f]{2})i([0-9A-Fa-f]{2})"
)

RELEASES = [
    "6.1.0-18-amd64", "5.15.0-1057-azure", "6.18.44-fc-v657", "4.18.0-513.el8.x86_64",
    "6.8.0", "6.8", "6", "6.8.0.1", "6..1", "6.1.0+deb12", "6.1.0-rc1+", "v6.1", "", "-1",
    "5.10.0_custom", "6.1-", "٣.1.0",
]  # fmt: skip


@pytest.mark.parametrize("release", RELEASES)
def test_kernel_version_parts(release: str) -> None:
    got = parse_version(release)
    m = KERNEL_VERSION.fullmatch(got["full"])
    if m and got["full"].isascii():
        assert (got["major"], got["minor"], got["revision"]) == (m[1], m[2] or "", m[3] or "")
    else:
        assert "major" not in got


VERSION_IDS = ["12", "22.04", "9.3.1", "8.1a", "12.x", "1.", "1.2.", "1.2x.3", "rolling", "", ".1", "3.18.4"]


@pytest.mark.parametrize("version", VERSION_IDS)
def test_os_release_version_parts(version: str) -> None:
    got = parse_os_release(f'NAME="Some OS"\nVERSION_ID="{version}"\n')
    m = OS_VERSION.fullmatch(version)
    assert got.get("VERSION_ID.major") == (m[1] if m else None)
    assert got.get("VERSION_ID.minor") == (m[2] if m else None)


def test_os_release_lines() -> None:
    text = "ID=debian\nID_LIKE=\"rhel fedora\"\n# comment\nBAD KEY=x\nEMPTY=\n=novalue\nPRETTY_NAME='X 1'\n"
    assert parse_os_release(text) == {"ID": "debian", "ID_LIKE": "rhel fedora", "PRETTY_NAME": "X 1"}


MODALIASES = [
    "pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i00",
    "pci:v00008086d00000D58sv00008086sd00000001bc02sc00i00",
    "pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i0",
    "pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i000",
    "pci:v000110DEd00002330sv000010DEsd000016C1bc03sc02i00",
    "pci:v000010DEd0000233Gsv000010DEsd000016C1bc03sc02i00",
    "pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02x00",
    "usb:v1D6Bp0003d0606dc09dsc00dp03ic09isc00ip00in00",
    "",
]


@pytest.mark.parametrize("text", MODALIASES)
def test_modalias_fields(text: str) -> None:
    m = MODALIAS.fullmatch(text)
    assert _modalias_ids(text) == (m.groups() if m else None)
