"""The system feature source: os-release, node name and DMI ids.

- ``system.osrelease``: every ``KEY=value`` of ``/etc/os-release`` (quotes trimmed, as
  upstream: lines with an empty value are left out), plus ``VERSION_ID.major`` and
  ``VERSION_ID.minor`` when ``VERSION_ID`` starts with numbers;
- ``system.name``: ``nodename`` (``NODE_NAME`` from the environment, as upstream, else
  the host's hostname);
- ``system.dmiid``: ``sys_vendor``, ``product_name`` from ``/sys/devices/virtual/dmi/id``
  where the machine has them.

Labels: ``os_release.ID``, ``os_release.VERSION_ID``, ``.VERSION_ID.major``, ``.minor``.
"""

from __future__ import annotations

import os

from nfd import hostfiles
from nfd.config import SourcesConfig
from nfd.features import Features, Labels
from nfd.hostroot import HostRoot

LABELLED_KEYS = ("ID", "VERSION_ID", "VERSION_ID.major", "VERSION_ID.minor")
DMI_KEYS = ("sys_vendor", "product_name")


def parse_os_release(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        # KEY=value, KEY made of letters, digits and "_"; lines of anything else skipped
        if sep and value and key.replace("_", "a").isalnum():
            out[key] = value.strip("\"'")
    # VERSION_ID "22.04" -> major 22, minor 04; "12" -> major only; "rolling" -> neither
    version = out.get("VERSION_ID", "").split(".", 2)
    if version[0].isdecimal():
        out["VERSION_ID.major"] = version[0]
        if len(version) > 1 and version[1].isdecimal():
            out["VERSION_ID.minor"] = version[1]
    return out


def _node_name(host: HostRoot) -> str:
    env = os.environ.get("NODE_NAME")
    if env:
        return env
    return hostfiles.attr(str(host.proc / "sys/kernel/hostname")) or os.uname().nodename


class SystemSource:
    name = "system"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        f = Features()
        f.set_attributes("system.name", {"nodename": _node_name(host)})
        # os-release lives in /etc, or only in /usr/lib where /etc's is a dangling link;
        # its links are the host's (often absolute), followed inside the host root.
        text = None
        for candidate in (host.etc / "os-release", host.usr_lib / "os-release"):
            path = host.resolve(candidate)
            text = hostfiles.read_line(path) if path else None
            if text is not None:
                break
        if text is not None:
            f.set_attributes("system.osrelease", parse_os_release(text))
        dmi = {}
        for key in DMI_KEYS:
            value = hostfiles.attr(str(host.sys / "devices/virtual/dmi/id" / key))
            if value is not None:
                dmi[key] = value
        if dmi:
            f.set_attributes("system.dmiid", dmi)
        return f

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        release = features.attributes.get("system.osrelease", {})
        return {f"os_release.{k}": release[k] for k in LABELLED_KEYS if k in release}
