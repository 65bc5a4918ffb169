"""CPU flags from py-cpuinfo, for architectures nfd has no reader of its own for:
neither CPUID (x86-64) nor an HWCAP table (arm64, ppc64le, s390x). py-cpuinfo knows how
each system reports its CPU (``/proc/cpuinfo``, ``lscpu``, ``sysctl`` ...), so a RISC-V
or LoongArch node still gets its ``cpu.cpuid`` flags.

py-cpuinfo asks the running machine, in a child process of its own, in a second or two:
the cpu source calls this once per process (static facts), and only for the machine it
runs on, never for a ``--host-root`` copy of another node.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from nfd.hostfiles import read_line
from nfd.hostroot import HostRoot
from nfd.policy import label_value_error

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    CpuInfo = Callable[[], Mapping[str, Any]]

log = logging.getLogger(__name__)


def py_cpuinfo() -> Mapping[str, Any]:
    """py-cpuinfo's report on this machine."""
    import cpuinfo

    report: Mapping[str, Any] = cpuinfo.get_cpu_info()
    return report


def flags_from_cpuinfo_report(info: CpuInfo = py_cpuinfo) -> frozenset[str]:
    """The report's flags, upper-cased as nfd's other CPU readers name them; names that
    could not be label names are left out. A failing report means no flags."""
    try:
        report = info()
    except Exception as e:  # py-cpuinfo runs tools and parses their output: anything can fail
        log.warning("py-cpuinfo could not describe this CPU: %s: %s", type(e).__name__, e)
        return frozenset()
    flags = report.get("flags")
    if not isinstance(flags, list):
        return frozenset()
    return frozenset(f.upper() for f in flags if isinstance(f, str) and f and label_value_error(f) is None)


def other_arch_flags(host: HostRoot, info: CpuInfo | None = None) -> list[str]:
    """Flags for a CPU nfd has no reader for: from ``info`` when given (tests),
    otherwise from py-cpuinfo when ``host`` is this machine, else none."""
    if info is not None:
        return sorted(flags_from_cpuinfo_report(info))
    if not this_machine(host):
        return []
    return sorted(flags_from_cpuinfo_report())


def this_machine(host: HostRoot) -> bool:
    """Whether ``host`` is the machine this process runs on (the host's /proc mounted in
    a container is; a copy of another node's files is not): the same boot."""
    if host == HostRoot():
        return True
    boot = "sys/kernel/random/boot_id"
    mine = read_line(HostRoot().proc / boot)
    return bool(mine) and read_line(host.proc / boot) == mine
