"""The cpu source's state read from sysfs (and a few proc files) on every discovery:
C-states, P-states, RDT, security (SGX, TDX, SEV, SE), SST, topology, coprocessors and
hybrid core types. What cannot change while the worker runs is read once, in
:mod:`nfd.sources.cpu`."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from nfd.hostfiles import list_dir, read_bytes, read_line, read_text
from nfd.hostroot import HostRoot

if TYPE_CHECKING:
    from nfd.sources.cpuid_names import X86Facts

log = logging.getLogger(__name__)


def cstate(host: HostRoot) -> dict[str, str] | None:
    """None (feature left out) where upstream reports an error; {} where it finds nothing."""
    base = host.sys / "devices/system/cpu"
    if not base.exists():
        return None
    idle = base / "cpuidle"
    if not idle.exists():
        return {}
    driver = read_line(idle / "current_driver")
    if driver is None:
        return None
    if driver != "intel_idle":
        return {}
    raw = read_line(host.sys / "module/intel_idle/parameters/max_cstate")
    try:
        return {"enabled": "true" if int(raw or "") > 0 else "false"}
    except ValueError:
        log.warning("cpu: cannot read intel_idle max_cstate (%r)", raw)
        return None


def pstate(host: HostRoot) -> dict[str, str]:
    base = host.sys / "devices/system/cpu"
    pdir = base / "intel_pstate"
    if not base.exists() or not pdir.exists():
        return {}
    status = read_line(pdir / "status")
    if status is None or status == "off":
        return {}
    out = {"status": status}
    no_turbo = read_line(pdir / "no_turbo")
    if no_turbo:
        out["turbo"] = "true" if no_turbo.startswith("0") else "false"
    if status != "active":
        return out
    governor = ""
    for policy in list_dir(base / "cpufreq"):
        pol = base / "cpufreq" / policy
        if not (read_line(pol / "affected_cpus") or ""):
            continue
        gov = read_line(pol / "scaling_governor")
        if gov is None:
            continue
        if governor and gov != governor:  # policies disagree: no single value to report
            governor = ""
            break
        governor = gov
    if governor:
        out["scaling_governor"] = governor
    return out


def rdt(host: HostRoot, x86: X86Facts) -> dict[str, str]:
    out = dict(x86.rdt)
    if "RDTL3CA" in out:
        closids = read_line(host.sys / "fs/resctrl/info/L3/num_closids")
        if closids and closids.isdigit():
            out["RDTL3CA_NUM_CLOSID"] = str(int(closids) - 1)  # less the default group
    return out


def _misc_capacity(host: HostRoot, resource: str) -> int | None:
    """cgroup v2 misc.capacity entry; upstream matches the line by prefix, so do we."""
    for rel in ("fs/cgroup/misc.capacity", "fs/cgroup/misc/misc.capacity"):
        text = read_text(host.sys / rel)
        if text is None:
            continue
        for line in text.splitlines():
            if line.startswith(resource):
                parts = line.split(" ")
                try:
                    return int(parts[1])
                except (IndexError, ValueError):
                    return None
        return None
    return None


def _kvm_param_on(host: HostRoot, module: str, param: str) -> bool:
    raw = read_bytes(host.sys / "module" / module / "parameters" / param)
    return raw is not None and raw[:1] in (b"1", b"Y")


def security(host: HostRoot, arch: str, x86: X86Facts | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if arch == "s390x":
        if read_text(host.sys / "firmware/uv/prot_virt_host") == "1\n":
            out["se.enabled"] = "true"
        return out
    if x86 is None:
        return out
    if x86.sgx_epc_bytes > 0:
        out["sgx.enabled"] = "true"
        out["sgx.epc"] = str(x86.sgx_epc_bytes)
    if read_text(host.sys / "module/kvm_intel/parameters/tdx") == "Y\n":
        out["tdx.enabled"] = "true"
        keys = _misc_capacity(host, "tdx")
        if keys is not None:
            out["tdx.total_keys"] = str(keys)
    if "TDX_GUEST" in x86.flags:
        out["tdx.protected"] = "true"
    if _kvm_param_on(host, "kvm_amd", "sev"):
        out["sev.enabled"] = "true"
        asids = _misc_capacity(host, "sev")
        if asids is not None:
            out["sev.asids"] = str(asids)
    if _kvm_param_on(host, "kvm_amd", "sev_es"):
        out["sev.es.enabled"] = "true"
        ids = _misc_capacity(host, "sev_es")
        if ids is not None:
            out["sev.encrypted_state_ids"] = str(ids)
    if _kvm_param_on(host, "kvm_amd", "sev_snp"):
        out["sev.snp.enabled"] = "true"
    return out


def sst(host: HostRoot, x86: X86Facts) -> dict[str, str]:
    """SST-BF is on when some CPU's base frequency is above the nominal one from CPUID."""
    devices = host.sys / "bus/cpu/devices"
    for cpu in list_dir(devices):
        raw = read_line(devices / cpu / "cpufreq/base_frequency")
        if raw is None:
            continue
        try:
            khz = int(raw)
        except ValueError:
            log.warning("cpu: SST-BF: %s/cpufreq/base_frequency is not an integer", cpu)
            return {}
        if x86.nominal_base_mhz == 0:
            log.warning("cpu: SST-BF: nominal base frequency missing from CPUID")
            return {}
        if khz // 1000 > x86.nominal_base_mhz:
            return {"bf.enabled": "true"}
    return {}


def topology(host: HostRoot) -> dict[str, str]:
    devices = host.sys / "bus/cpu/devices"
    if not devices.is_dir():
        return {}
    ht = False
    packages: set[str] = set()
    for cpu in list_dir(devices):
        siblings = read_text(devices / cpu / "topology/thread_siblings_list")
        package = read_line(devices / cpu / "topology/physical_package_id")
        if siblings is None or package is None:
            return {}  # upstream gives up on the first unreadable CPU
        ht = ht or "," in siblings or "-" in siblings
        packages.add(package)
    return {"hardware_multithreading": "true" if ht else "false", "socket_count": str(len(packages))}


def coprocessor(host: HostRoot) -> dict[str, str]:
    if os.path.exists(host.sys / "devices/vio/ibm,compression-v1/nx_gzip_caps"):
        return {"nx_gzip": "true"}
    return {}


def hybrid(host: HostRoot) -> dict[str, str]:
    """Intel hybrid parts: the kernel's per-core-type PMU devices list their CPUs. Only
    reported when both core types exist."""
    kinds = {k: read_line(host.sys / "devices" / k / "cpus") for k in ("cpu_core", "cpu_atom")}
    if all(kinds.values()):
        return {k: v for k, v in kinds.items() if v}
    return {}
