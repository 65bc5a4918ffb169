"""The kernel feature source: version, kconfig, modules, SELinux and KVM.

Features (upstream's names):
- ``kernel.version``: ``full``, ``major``, ``minor``, ``revision``;
- ``kernel.config``: every ``CONFIG_<OPT>=<value>`` of the running kernel's config, the
  ``CONFIG_`` prefix dropped and surrounding quotes removed (``y``/``m`` kept as they are);
- ``kernel.loadedmodule``: names in ``/proc/modules``;
- ``kernel.enabledmodule``: loaded modules plus ``modules.builtin`` (only when that file
  can be read, as upstream);
- ``kernel.selinux``: ``enabled`` (``true`` when ``/sys/fs/selinux/enforce`` says 1);
- ``kernel.kvm``: ``enabled`` (``/sys/devices/virtual/misc/kvm`` exists).
"""

from __future__ import annotations

import logging
import re

from nfd import hostfiles
from nfd.config import SourcesConfig
from nfd.features import Features, Labels
from nfd.hostroot import HostPath, HostRoot

log = logging.getLogger(__name__)

_PIECE = 16384  # bytes of the kernel config parsed at a time


def parse_version(release: str) -> dict[str, str]:
    """``full`` as a valid label value, and its numeric parts. Parts that the release
    string lacks are empty strings, as upstream has them."""
    full = re.sub(r"[^A-Za-z0-9_.-]", "_", release.strip()).strip("-_.")
    out = {"full": full}
    # MAJOR[.MINOR[.REVISION]][-anything]
    numbers = full.partition("-")[0].split(".")
    if len(numbers) <= 3 and all(n.isdecimal() for n in numbers):
        numbers += ["", ""]
        out["major"], out["minor"], out["revision"] = numbers[:3]
    return out


def parse_kconfig(data: bytes) -> dict[str, str]:
    """``CONFIG_X=v`` lines -> ``{X: v}`` with quotes trimmed from both ends of ``v``."""
    out: dict[str, str] = {}
    # A piece at a time (cut after a newline), so that the transient copies stay small:
    # the whole file's text, split, would leave a few hundred KiB of the worker's heap
    # resident after the first pass.
    start, size = 0, len(data)
    while start < size:
        end = data.find(b"\n", start + _PIECE)
        end = size if end < 0 else end + 1
        text = data[start:end].decode("utf-8", "replace")
        # Splitting at line starts of "CONFIG_" skips the comment lines (most of the file)
        # without looking at each: a third faster than a line loop.
        for chunk in ("\n" + text).split("\nCONFIG_")[1:]:
            name, sep, value = chunk.partition("\n")[0].partition("=")
            if sep:
                out[name] = value.strip('"')
        start = end
    return out


def _kconfig_candidates(host: HostRoot, config: SourcesConfig, release: str | None) -> list[HostPath]:
    paths: list[HostPath] = []
    if config.kernel.kconfig_file:
        paths.append(HostPath(config.kernel.kconfig_file))
    paths.append(host.proc / "config.gz")
    usr = host.usr_lib.parent
    if release:
        paths += [
            usr / "src" / f"linux-{release}" / ".config",
            usr / "src/linux/.config",
            host.usr_lib / "modules" / release / "config",
            host.usr_lib / "ostree-boot" / f"config-{release}",
            host.usr_lib / "kernel" / f"config-{release}",
            usr / "src" / f"linux-headers-{release}" / ".config",
            host.lib / "modules" / release / "build/.config",
            host.boot / f"config-{release}",
        ]
    else:
        paths.append(usr / "src/linux/.config")
    return paths


class KconfigReader:
    """Reads and parses the kernel config, remembering the last parse.

    Decompressing and parsing ``/proc/config.gz`` is most of this source's time; the
    file changes only with the kernel, so a pass whose raw bytes equal the last pass's
    reuses that parse (the comparison is exact, not a timestamp)."""

    def __init__(self) -> None:
        self._last: tuple[HostPath, bytes, dict[str, str]] | None = None

    def read(self, host: HostRoot, config: SourcesConfig, release: str | None) -> dict[str, str] | None:
        """The first kernel config found along upstream's search path, parsed."""
        for candidate in _kconfig_candidates(host, config, release):
            path = host.resolve(candidate)
            raw = hostfiles.read_bytes(path) if path is not None else None
            if path is None or raw is None:
                continue
            last = self._last
            if last is not None and last[0] == path and last[1] == raw:
                return dict(last[2])
            parsed = _parse_raw(path, raw)
            if parsed is None:
                continue
            self._last = (path, raw, parsed)
            return dict(parsed)
        return None


def _parse_raw(path: HostPath, raw: bytes) -> dict[str, str] | None:
    if path.endswith(".gz"):
        import zlib  # /proc/config.gz only

        # wbits 16+MAX_WBITS: a gzip stream; one call, no GzipFile overhead. Bounded as
        # every read is: a small file may inflate to anything.
        unzip = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            raw = unzip.decompress(raw, hostfiles.MAX_BYTES)
        except zlib.error as e:
            log.warning("cannot decompress %s: %s", path, e)
            return None
        if unzip.unconsumed_tail:
            log.warning("cannot decompress %s: more than %d bytes", path, hostfiles.MAX_BYTES)
            return None
    return parse_kconfig(raw)


def _loaded_modules(host: HostRoot) -> list[str] | None:
    text = hostfiles.read_line(str(host.proc / "modules"))
    if text is None:
        return None
    return [line.split(None, 1)[0] for line in text.splitlines() if line.strip()]


def _builtin_modules(host: HostRoot, release: str) -> list[str] | None:
    path = host.resolve(host.lib / "modules" / release / "modules.builtin")
    text = hostfiles.read_line(path) if path else None
    if text is None:
        return None
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.endswith(".ko"):
            out.append(line.rsplit("/", 1)[-1][:-3])
    return out


def _selinux_enabled(host: HostRoot) -> bool | None:
    if not (host.sys / "fs").is_dir():
        return None  # cannot tell: upstream leaves the feature out
    base = host.sys / "fs" / "selinux"
    if not base.exists():
        return False
    status = hostfiles.attr(str(base / "enforce"))
    if status is None:
        return None
    return status.startswith("1")


class KernelSource:
    name = "kernel"

    def __init__(self) -> None:
        self._kconfig = KconfigReader()

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        f = Features()
        release = hostfiles.attr(str(host.proc / "sys/kernel/osrelease"))
        if release:
            f.set_attributes("kernel.version", parse_version(release))
        else:
            log.info("kernel release unknown: %s is missing", host.proc / "sys/kernel/osrelease")

        kconfig = self._kconfig.read(host, config, release)
        if kconfig is not None:
            f.attributes["kernel.config"] = kconfig
        else:
            log.info("no kernel config found")

        loaded = _loaded_modules(host)
        if loaded is not None:
            f.set_flags("kernel.loadedmodule", loaded)
        builtin = _builtin_modules(host, release) if release else None
        if builtin is not None:
            f.set_flags("kernel.enabledmodule", [*(loaded or ()), *builtin])

        selinux = _selinux_enabled(host)
        if selinux is not None:
            f.set_attributes("kernel.selinux", {"enabled": "true" if selinux else "false"})
        f.set_attributes(
            "kernel.kvm", {"enabled": str((host.sys / "devices/virtual/misc/kvm").exists()).lower()}
        )
        return f

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        out: Labels = {}
        for k, v in features.attributes.get("kernel.version", {}).items():
            out[f"version.{k}"] = v
        kconfig = features.attributes.get("kernel.config", {})
        for opt in config.kernel.config_opts:
            if opt in kconfig:
                value = kconfig[opt]
                # Upstream's labels say "true" for built-in and module options alike.
                out[f"config.{opt}"] = "true" if value in ("y", "m") else value
        if features.attributes.get("kernel.selinux", {}).get("enabled") == "true":
            out["selinux.enabled"] = "true"
        return out
