"""The cpu feature source: CPUID flags, model, topology, C/P-states, security, SST, RDT.

Features and labels follow upstream NFD v0.19's cpu source (``cpu.cpuid``, ``cpu.model``,
``cpu.cstate`` ...). On x86-64 the CPUID instruction is executed directly
(:mod:`nfd.sources.cpuid_x86`) and decoded with klauspost/cpuid's names and rules
(:mod:`nfd.sources.cpuid_names`); elsewhere flags come from AT_HWCAP/AT_HWCAP2
(:mod:`nfd.sources.cpu_hwcap`). CPU facts that cannot change while the worker runs are read
once per source instance; sysfs state (C/P-states, SGX/TDX/SEV parameters, topology) is
read on every discovery.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nfd.config import SourcesConfig
from nfd.features import Features, Labels
from nfd.hostfiles import read_bytes, read_line, read_text
from nfd.hostroot import HostRoot
from nfd.policy import label_value_error
from nfd.sources import cpu_sysfs
from nfd.sources.cpuid_names import UNKNOWN_VENDOR, X86Facts, decode, facts_from_cpuinfo, hypervisor_label

if TYPE_CHECKING:
    from nfd.sources.cpu_pyinfo import CpuInfo
    from nfd.sources.cpuid_x86 import CpuidReader

log = logging.getLogger(__name__)

# Security attributes kept for rules (extended resources) but never labelled, as upstream.
_SECURITY_NO_LABEL = frozenset({"tdx.total_keys", "sgx.epc", "sev.encrypted_state_ids", "sev.asids"})


def normalize_arch(machine: str) -> str:
    """``uname -m`` spellings -> the names used here (x86_64, arm64, arm, ppc64le, s390x)."""
    m = machine.strip().lower()
    if m in ("x86_64", "amd64", "x64"):
        return "x86_64"
    if m in ("aarch64", "arm64", "aarch64_be"):
        return "arm64"
    if m.startswith("arm"):
        return "arm"
    if m in ("ppc64le", "ppc64el", "powerpc64le"):
        return "ppc64le"
    return m or "unknown"


# No slots: one per cpu source; not compared, not printed (see docs/architecture.md, "Plain Python").
@dataclass(eq=False, repr=False)
class StaticFacts:
    """What one read of the CPU gives; kept for the source instance's lifetime."""

    arch: str
    flags: frozenset[str] = frozenset()
    cpuid_attrs: dict[str, str] | None = None  # None: the architecture has no cpuid attributes
    vendor: str = UNKNOWN_VENDOR
    family: int = 0
    model: int = 0
    x86: X86Facts | None = None
    notes: tuple[str, ...] = field(default=())


class CpuSource:
    name = "cpu"

    def __init__(
        self, *, reader: CpuidReader | None = None, arch: str | None = None, cpu_info: CpuInfo | None = None
    ) -> None:
        """``reader`` answers CPUID (default: the CPU itself, on x86-64); ``arch`` overrides
        the machine architecture (tests replaying another machine's facts); ``cpu_info``
        describes the CPU on architectures without a reader of nfd's own (default:
        py-cpuinfo, on the machine itself only)."""
        self._reader = reader
        self._cpu_info = cpu_info
        self._arch = normalize_arch(arch if arch is not None else os.uname().machine)
        self._static: tuple[HostRoot, StaticFacts] | None = None
        self._native_refused = False  # CPUID could not be executed: do not retry or re-log

    # -- discovery ------------------------------------------------------------------------
    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        st = self.static_facts(host)
        f = Features()
        f.set_flags("cpu.cpuid", st.flags)
        if st.cpuid_attrs is not None:
            f.set_attributes("cpu.cpuid", st.cpuid_attrs)
        f.set_attributes("cpu.model", self._model(host, st))
        cstate = cpu_sysfs.cstate(host) if st.arch == "x86_64" else {}
        if cstate is not None:
            f.set_attributes("cpu.cstate", cstate)
        f.set_attributes("cpu.pstate", cpu_sysfs.pstate(host) if st.arch == "x86_64" else {})
        f.set_attributes("cpu.rdt", cpu_sysfs.rdt(host, st.x86) if st.x86 else {})
        f.set_attributes("cpu.security", cpu_sysfs.security(host, st.arch, st.x86))
        f.set_attributes("cpu.sst", cpu_sysfs.sst(host, st.x86) if st.x86 else {})
        f.set_attributes("cpu.topology", cpu_sysfs.topology(host))
        f.set_attributes("cpu.coprocessor", cpu_sysfs.coprocessor(host) if st.arch == "ppc64le" else {})
        hybrid = cpu_sysfs.hybrid(host)
        if hybrid:
            f.set_attributes("cpu.hybrid", hybrid)
        return f

    def static_facts(self, host: HostRoot) -> StaticFacts:
        if self._static is None or self._static[0] != host:
            self._static = (host, self._read_static(host))
        return self._static[1]

    def _read_static(self, host: HostRoot) -> StaticFacts:
        if self._arch == "x86_64":
            x86 = self._x86_facts(host)
            attrs = {"AVX10_VERSION": str(x86.avx10_level)} if x86.avx10_level > 0 else {}
            return StaticFacts(
                arch="x86_64", flags=x86.flags, cpuid_attrs=attrs, vendor=x86.vendor,
                family=x86.family, model=x86.model, x86=x86,
            )  # fmt: skip
        return self._other_facts(host)

    def _x86_facts(self, host: HostRoot) -> X86Facts:
        reader = self._reader
        if reader is None and not self._native_refused:
            # Imported here: only x86-64 executes CPUID (ctypes), only other CPUs read HWCAP.
            from nfd.sources.cpuid_x86 import CpuidUnavailable, NativeCpuid

            try:
                reader = self._reader = NativeCpuid()
            except CpuidUnavailable as e:
                self._native_refused = True
                log.warning("cannot execute CPUID (%s); cpu flags come from /proc/cpuinfo instead", e)
        if reader is None:
            return facts_from_cpuinfo(read_text(host.proc / "cpuinfo") or "")
        return decode(reader)

    def _other_facts(self, host: HostRoot) -> StaticFacts:
        from nfd.sources.cpu_hwcap import (
            AT_HWCAP,
            AT_HWCAP2,
            HWCAP_TABLES,
            arm_model_from_midr,
            cpuinfo_fields,
            flags_from_cpuinfo_features,
            flags_from_hwcap,
            midr_from_cpuinfo,
            parse_auxv,
        )

        arch = self._arch
        fields = cpuinfo_fields(read_text(host.proc / "cpuinfo") or "")
        flags: list[str] = []
        if arch in HWCAP_TABLES:
            auxv = parse_auxv(read_bytes(host.proc / "self" / "auxv") or b"")
            if AT_HWCAP in auxv:
                flags = flags_from_hwcap(arch, auxv[AT_HWCAP], auxv.get(AT_HWCAP2, 0))
            else:
                words = (fields.get("Features") or fields.get("features") or "").split()
                flags = flags_from_cpuinfo_features(arch, words)
        else:  # no reader of our own for this architecture: py-cpuinfo's
            from nfd.sources.cpu_pyinfo import other_arch_flags

            flags = other_arch_flags(host, self._cpu_info)
        vendor, family, model = UNKNOWN_VENDOR, 0, 0
        if arch == "arm64":
            midr_text = read_line(host.sys / "devices/system/cpu/cpu0/regs/identification/midr_el1")
            midr: int | None = None
            if midr_text:
                try:
                    midr = int(midr_text, 16)
                except ValueError:
                    midr = None
            if midr is None:
                midr = midr_from_cpuinfo(fields)
            if midr is not None:
                m = arm_model_from_midr(midr)
                vendor, family, model = m.vendor, m.family, m.model
        return StaticFacts(arch=arch, flags=frozenset(flags), vendor=vendor, family=family, model=model)

    def _model(self, host: HostRoot, st: StaticFacts) -> dict[str, str]:
        out = {"vendor_id": st.vendor, "family": str(st.family), "id": str(st.model)}
        out["hypervisor"] = _hypervisor(host, st)
        return out

    # -- labels ---------------------------------------------------------------------------
    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        cfg = config.cpu.cpuid
        labels: Labels = {}
        whitelist = set(cfg.attribute_whitelist)
        blacklist = set(cfg.attribute_blacklist)
        for flag in sorted(features.flags.get("cpu.cpuid", ())):
            if (flag in whitelist) if whitelist else (flag not in blacklist):
                labels[f"cpuid.{flag}"] = "true"
        attrs = features.attributes
        for k, v in attrs.get("cpu.cpuid", {}).items():
            labels[f"cpuid.{k}"] = v
        for k, v in attrs.get("cpu.model", {}).items():
            labels[f"model.{k}"] = v
        for k, v in attrs.get("cpu.cstate", {}).items():
            labels[f"cstate.{k}"] = v
        for k, v in attrs.get("cpu.pstate", {}).items():
            labels[f"pstate.{k}"] = v
        for k, v in attrs.get("cpu.security", {}).items():
            if k not in _SECURITY_NO_LABEL:
                labels[f"security.{k}"] = v
        for k, v in attrs.get("cpu.sst", {}).items():
            labels[f"power.sst_{k}"] = v
        ht = attrs.get("cpu.topology", {}).get("hardware_multithreading")
        if ht is not None:
            labels["hardware_multithreading"] = ht
        nx = attrs.get("cpu.coprocessor", {}).get("nx_gzip")
        if nx is not None:
            labels["coprocessor.nx_gzip"] = nx
        # Hybrid parts (not in upstream v0.19): which logical CPUs are of each core type.
        for kind, cpus in attrs.get("cpu.hybrid", {}).items():
            if label_value_error(cpus) is None:
                labels[kind] = cpus
        return labels


# -- the parts read on every discovery ------------------------------------------------------


def _hypervisor(host: HostRoot, st: StaticFacts) -> str:
    """s390x names its hypervisor in /proc/sysinfo; x86 guests in the CPUID hypervisor leaf;
    anything else is taken as bare metal ("none"), as upstream does."""
    sysinfo = read_text(host.proc / "sysinfo")
    if sysinfo is not None:
        for line in sysinfo.splitlines():
            if "Control Program:" in line:
                value = line.split(":", 1)[1].strip()
                if value:
                    return re.sub(r"[^A-Za-z0-9_.-]+", "_", value)
                break
    if st.x86 is not None and st.x86.is_vm:
        return hypervisor_label(st.x86) if st.x86.source == "cpuid" else "unknown"
    return "none"
