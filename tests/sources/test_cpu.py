"""The cpu source: CPUID decoding against recorded and documented machines, upstream's
baseline labels, other architectures, sysfs-driven features, and the live machine."""

from __future__ import annotations

import json
import logging
import platform
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from nfd.config import CpuConfig, CpuidConfig, SourcesConfig, WorkerConfig
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.labels import node_labels
from nfd.sources import cpu_sysfs
from nfd.sources import cpuid_x86 as cpuid_x86_mod
from nfd.sources.cpu import CpuSource, normalize_arch
from nfd.sources.cpu_hwcap import (
    AT_HWCAP,
    AT_HWCAP2,
    arm_model_from_midr,
    flags_from_hwcap,
    midr_from_cpuinfo,
    parse_auxv,
)
from nfd.sources.cpuid_names import X86Facts, decode, facts_from_cpuinfo, regs_string, x86_level
from nfd.sources.cpuid_x86 import CpuidUnavailable, NativeCpuid, ReplayCpuid, capture, dump_to_dict

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
HOSTS = FIXTURES / "hosts"
BASELINE = FIXTURES / "upstream-baseline"
ON_X86_64 = platform.machine().lower() in ("x86_64", "amd64")

Regs = tuple[int, int, int, int]


def host(name: str) -> HostRoot:
    return HostRoot.under(HOSTS / name)


def replay(name: str) -> ReplayCpuid:
    return ReplayCpuid.from_file(HOSTS / name / "cpuid.json")


def run(src: CpuSource, h: HostRoot, cfg: SourcesConfig | None = None) -> tuple[Features, dict[str, str]]:
    cfg = cfg or SourcesConfig()
    f = src.discover(h, cfg)
    return f, src.labels(f, cfg)


def bits(*ns: int) -> int:
    return sum(1 << n for n in ns)


def synthetic(
    extra: dict[tuple[int, int], Regs], *, xcr0: int = 0xE7, vendor: str = "GenuineIntel"
) -> ReplayCpuid:
    """A small Intel-like CPU: SSE..SSE4.2, MOVBE, F16C, XSAVE/OSXSAVE/AVX, max leaf 0x24."""
    raw = vendor.encode()
    b, d, c = (int.from_bytes(raw[i : i + 4], "little") for i in (0, 4, 8))
    leaves: dict[tuple[int, int], Regs] = {
        (0, 0): (0x24, b, c, d),
        (1, 0): (
            0x000806F8,
            0,
            bits(0, 9, 12, 13, 19, 20, 22, 23, 26, 27, 28, 29),
            bits(0, 8, 11, 15, 23, 24, 25, 26),
        ),
        (0x80000000, 0): (0x80000008, 0, 0, 0),
        (0x80000001, 0): (0, 0, bits(0, 5), bits(11, 20, 29)),
    }
    leaves.update(extra)
    return ReplayCpuid(leaves, xcr0=xcr0)


# -- the executor and dumps ---------------------------------------------------------------


@pytest.mark.skipif(not ON_X86_64, reason="executes the x86 CPUID instruction")
def test_native_cpuid_reads_the_vendor_linux_reports() -> None:
    r = NativeCpuid()
    try:
        max_leaf, b, c, d = r.cpuid(0)
        vendor = regs_string(b, d, c)
        cpuinfo = Path("/proc/cpuinfo").read_text()
        assert f"vendor_id\t: {vendor}" in cpuinfo
        assert max_leaf >= 1
        # XCR0 always has x87 state on; SSE state whenever the OS uses XSAVE.
        if r.cpuid(1)[2] >> 27 & 1:
            assert r.xgetbv(0) & 0b11 == 0b11
    finally:
        r.close()
    with pytest.raises(CpuidUnavailable):
        r.cpuid(0)


def test_dump_round_trip_and_replay_rules() -> None:
    leaves = {(0, 0): (7, 1, 2, 3), (7, 0): (1, 5, 6, 7), (0x80000000, 0): (0x80000001, 0, 0, 0)}
    doc = json.loads(json.dumps(dump_to_dict(leaves, xcr0=0x2E7)))
    r = ReplayCpuid.from_dict(doc)
    assert r.cpuid(0) == (7, 1, 2, 3)
    assert r.cpuid(0, 5) == (7, 1, 2, 3)  # leaf 0 ignores ECX
    assert r.cpuid(7, 0) == (1, 5, 6, 7)
    assert r.cpuid(7, 1) == (0, 0, 0, 0)  # leaf 7 is subleaf-indexed: unrecorded subleaf is zero
    assert r.cpuid(0x12345) == (0, 0, 0, 0)
    assert r.xgetbv(0) == 0x2E7
    assert capture(r)[(7, 0)] == (1, 5, 6, 7)


# -- this machine, recorded ----------------------------------------------------------------


def test_recorded_dump_of_this_machine_replays() -> None:
    """The recorded dump agrees with what Linux and py-cpuinfo said about the same CPU."""
    name = "epyc-milan-kvm"
    facts = decode(replay(name))
    cpuinfo = (HOSTS / name / "proc/cpuinfo").read_text()
    from_linux = facts_from_cpuinfo(cpuinfo)
    py = json.loads((HOSTS / name / "py-cpuinfo.json").read_text())
    assert (facts.vendor_string, facts.family, facts.model) == (
        py["vendor_id_raw"],
        py["family"],
        py["model"],
    )
    assert (facts.vendor, from_linux.vendor) == ("AMD", "AMD")
    # Every flag Linux lists, in upstream's names, is found by reading CPUID directly ...
    assert from_linux.flags <= facts.flags
    # ... and CPUID shows more than Linux lists (e.g. CPUID.80000008:EBX[28] PSFD here).
    assert "PSFD" in facts.flags - from_linux.flags
    assert facts.hypervisor_vendor == "KVM"

    f, labels = run(CpuSource(reader=replay(name), arch="x86_64"), host(name))
    assert labels["model.vendor_id"] == "AMD"
    assert labels["model.hypervisor"] == "kvm"
    assert labels["cpuid.X86_64_V3"] == "true"
    assert "cpuid.X86_64_V4" not in labels  # no AVX-512 on this part
    assert labels["hardware_multithreading"] == "false"
    assert f.attributes["cpu.topology"] == {"hardware_multithreading": "false", "socket_count": "1"}


# -- the upstream baseline machine ---------------------------------------------------------


def _baseline_cpu_labels() -> dict[str, str]:
    out = {}
    for line in (BASELINE / "labels.txt").read_text().splitlines():
        if line.startswith("feature.node.kubernetes.io/cpu-"):
            k, v = line.split("=", 1)
            out[k] = v
    return out


def test_baseline_machine_gives_upstreams_cpu_labels_exactly() -> None:
    src = CpuSource(reader=replay("emr-kvm"), arch="x86_64")
    f = src.discover(host("emr-kvm"), SourcesConfig())
    got = node_labels([src], f, WorkerConfig()).labels
    assert got == _baseline_cpu_labels()


def test_baseline_machine_gives_upstreams_cpu_features_exactly() -> None:
    src = CpuSource(reader=replay("emr-kvm"), arch="x86_64")
    f = src.discover(host("emr-kvm"), SourcesConfig())
    upstream = Features.from_json((BASELINE / "features.json").read_text()).only(["cpu"])
    assert f.flags == upstream.flags
    assert f.attributes == upstream.attributes
    assert f.instances == upstream.instances == {}


def test_baseline_machine_from_proc_cpuinfo_misses_only_what_linux_does_not_list() -> None:
    """Without CPUID, /proc/cpuinfo gives the same model and most flags; what it cannot
    give are flags of CPUID bits Linux does not print."""
    from_cpuid = decode(replay("emr-kvm"))
    from_linux = facts_from_cpuinfo((HOSTS / "emr-kvm/proc/cpuinfo").read_text())
    assert (from_linux.vendor, from_linux.family, from_linux.model) == ("Intel", 6, 207)
    assert from_linux.flags <= from_cpuid.flags
    not_in_linux = {"PSFD", "IDPRED_CTRL", "RRSBA_CTRL", "BHI_CTRL", "MOVSB_ZL", "STOSB_SHORT",
                    "CMPSB_SCADBS_SHORT", "CETSS", "CETIBT", "FXSROPT"}  # fmt: skip
    # CETSS/CETIBT: Linux prints user_shstk/ibt only when it enables them. FXSROPT is
    # reported with SSE here, so it is the one difference that is not Linux's doing.
    assert from_cpuid.flags - from_linux.flags <= not_in_linux
    assert {"PSFD", "BHI_CTRL", "MOVSB_ZL"} <= from_cpuid.flags - from_linux.flags


# -- hand-made machines ----------------------------------------------------------------------


def test_hybrid_alder_lake() -> None:
    f, labels = run(CpuSource(reader=replay("adl-hybrid"), arch="x86_64"), host("adl-hybrid"))
    assert "HYBRID_CPU" in f.flags["cpu.cpuid"]
    assert labels["cpuid.HYBRID_CPU"] == "true"
    assert (labels["cpu_core"], labels["cpu_atom"]) == ("0-15", "16-23")
    assert f.attributes["cpu.hybrid"] == {"cpu_core": "0-15", "cpu_atom": "16-23"}
    assert labels["model.id"] == "151"
    assert labels["model.hypervisor"] == "none"
    assert "cpuid.X86_64_V3" in labels and "cpuid.X86_64_V4" not in labels
    assert not any(k.startswith("cpuid.AVX512") for k in labels)
    assert labels["cstate.enabled"] == "true"
    assert (labels["pstate.status"], labels["pstate.turbo"], labels["pstate.scaling_governor"]) == (
        "active", "true", "powersave",
    )  # fmt: skip
    assert labels["hardware_multithreading"] == "true"


def test_non_hybrid_parts_have_no_hybrid_feature() -> None:
    f, labels = run(CpuSource(reader=replay("emr-kvm"), arch="x86_64"), host("emr-kvm"))
    assert "cpu.hybrid" not in f.attributes
    assert "cpu_core" not in labels and "cpu_atom" not in labels


def test_two_socket_sgx_server() -> None:
    f, labels = run(CpuSource(reader=replay("icx-2s-sgx"), arch="x86_64"), host("icx-2s-sgx"))
    assert f.attributes["cpu.topology"] == {"hardware_multithreading": "true", "socket_count": "2"}
    assert f.attributes["cpu.security"] == {"sgx.enabled": "true", "sgx.epc": str(2 * 64 << 30)}
    assert labels["security.sgx.enabled"] == "true"
    assert "security.sgx.epc" not in labels  # kept for rules only, as upstream
    assert f.attributes["cpu.sst"] == {"bf.enabled": "true"}
    assert labels["power.sst_bf.enabled"] == "true"
    assert f.attributes["cpu.rdt"] == {
        "RDTMON": "true", "RDTCMT": "true", "RDTMBM": "true", "RDTL3CA": "true", "RDTMBA": "true",
        "RDTL3CA_NUM_CLOSID": "15",
    }  # fmt: skip
    assert not any(k.startswith("rdt") for k in labels)  # upstream labels no RDT
    assert labels["pstate.scaling_governor"] == "performance"
    assert labels["cstate.enabled"] == "true"
    assert labels["model.hypervisor"] == "none"
    # Blacklisted by default: in the raw features, not in labels.
    assert {"SGX", "SGXLC", "HTT"} <= f.flags["cpu.cpuid"]
    assert "cpuid.SGX" not in labels and "cpuid.HTT" not in labels
    assert labels["cpuid.X86_64_V4"] == "true"


def test_arm64_graviton2() -> None:
    f, labels = run(CpuSource(arch="aarch64"), host("graviton2-arm64"))
    assert f.flags["cpu.cpuid"] == {
        "FP", "ASIMD", "EVTSTRM", "AES", "PMULL", "SHA1", "SHA2", "CRC32", "ATOMICS", "FPHP",
        "ASIMDHP", "CPUID", "ASIMDRDM", "LRCPC", "DCPOP", "ASIMDDP", "SSBS",
    }  # fmt: skip
    assert f.attributes["cpu.model"] == {
        "vendor_id": "ARM",
        "family": "63",
        "id": "3340",
        "hypervisor": "none",
    }
    assert "cpu.cpuid" not in f.attributes  # no cpuid attributes on arm64, as upstream
    assert labels["hardware_multithreading"] == "false"
    assert labels["cpuid.ASIMD"] == "true"


def test_arm64_model_from_cpuinfo_when_midr_is_not_exported(tmp_path: Path) -> None:
    shutil.copytree(HOSTS / "graviton2-arm64", tmp_path / "h")
    shutil.rmtree(tmp_path / "h/sys/devices/system/cpu")
    f, _ = run(CpuSource(arch="arm64"), HostRoot.under(tmp_path / "h"))
    assert f.attributes["cpu.model"]["vendor_id"] == "ARM"
    assert (f.attributes["cpu.model"]["family"], f.attributes["cpu.model"]["id"]) == ("63", "3340")


def test_arm64_flags_from_the_auxiliary_vector(tmp_path: Path) -> None:
    hwcap, hwcap2 = bits(0, 1, 22), bits(1, 13)  # FP ASIMD SVE / SVE2 I8MM
    auxv = struct.pack("<QQQQQQ", AT_HWCAP, hwcap, AT_HWCAP2, hwcap2, 0, 0)
    assert parse_auxv(auxv, byteorder="little", word=8) == {AT_HWCAP: hwcap, AT_HWCAP2: hwcap2}
    auxv32 = struct.pack(">IIII", AT_HWCAP, 0x1000, 0, 0)  # a 32-bit big-endian vector
    assert parse_auxv(auxv32, byteorder="big", word=4) == {AT_HWCAP: 0x1000}
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/auxv").write_bytes(
        auxv
        if sys.byteorder == "little"
        else struct.pack(">QQQQQQ", AT_HWCAP, hwcap, AT_HWCAP2, hwcap2, 0, 0)
    )
    f, _ = run(CpuSource(arch="arm64"), HostRoot.under(tmp_path))
    assert f.flags["cpu.cpuid"] == {"FP", "ASIMD", "SVE", "SVE2", "I8MM"}
    assert flags_from_hwcap("arm", bits(12), bits(0)) == ["NEON", "AES"]
    assert flags_from_hwcap("ppc64le", 1 << 28, 1 << 17) == ["ALTIVEC", "MMA"]


def test_arm_vendor_table() -> None:
    assert arm_model_from_midr(0xC00FAC30).vendor == "Ampere"
    assert arm_model_from_midr(0x48FFD010).vendor == "VendorUnknown"  # HiSilicon: unknown upstream too
    assert (
        midr_from_cpuinfo({"CPU implementer": "0x41", "CPU variant": "0x1", "CPU part": "0xd40"})
        == 0x411FD400
    )


def test_power9_nx_gzip_and_no_flags() -> None:
    f, labels = run(CpuSource(arch="ppc64le"), host("power9-ppc64le"))
    assert labels["coprocessor.nx_gzip"] == "true"
    assert f.flags["cpu.cpuid"] == set()
    assert f.attributes["cpu.model"] == {
        "vendor_id": "VendorUnknown",
        "family": "0",
        "id": "0",
        "hypervisor": "none",
    }
    assert labels["hardware_multithreading"] == "true"


def test_s390x_hypervisor_and_secure_execution() -> None:
    f, labels = run(CpuSource(arch="s390x"), host("z15-s390x"))
    assert labels["model.hypervisor"] == "z_VM_7.3.0"
    assert labels["security.se.enabled"] == "true"
    assert {"ZARCH", "VX", "VXE2", "SIE"} <= f.flags["cpu.cpuid"]


@pytest.mark.parametrize("arch", ["riscv64", "mips64", "loongarch64", ""])
def test_unknown_architectures_never_crash(arch: str, tmp_path: Path) -> None:
    f, labels = run(CpuSource(arch=arch), HostRoot.under(tmp_path))
    assert f.flags["cpu.cpuid"] == set()
    assert labels["model.vendor_id"] == "VendorUnknown"
    assert f.attributes["cpu.topology"] == {}
    assert "hardware_multithreading" not in labels


def test_arch_names() -> None:
    assert [normalize_arch(m) for m in ("x86_64", "AMD64", "aarch64", "armv7l", "ppc64le", "s390x")] == [
        "x86_64", "x86_64", "arm64", "arm", "ppc64le", "s390x",
    ]  # fmt: skip


# -- decoding rules ------------------------------------------------------------------------


def test_avx_needs_os_support_for_ymm_and_avx512_for_zmm() -> None:
    leaf7 = {(7, 0): (0, bits(3, 5, 8, 16, 17, 28, 30, 31), 0, 0)}  # BMI1 AVX2 BMI2 AVX512 F DQ CD BW VL
    full = decode(synthetic(leaf7, xcr0=0xE7))
    assert {"AVX", "AVX2", "AVX512F", "AVX512VL", "X86_64_V4"} <= full.flags
    no_zmm = decode(synthetic(leaf7, xcr0=0x7))
    assert {"AVX", "AVX2"} <= no_zmm.flags and "AVX512F" not in no_zmm.flags
    assert "X86_64_V3" in no_zmm.flags and "X86_64_V4" not in no_zmm.flags
    no_ymm = decode(synthetic(leaf7, xcr0=0x3))
    assert not {"AVX", "AVX2", "AVX512F"} & no_ymm.flags
    assert {"BMI1", "BMI2"} <= no_ymm.flags  # no OS state needed
    assert "X86_64_V2" in no_ymm.flags and "X86_64_V3" not in no_ymm.flags


def test_levels_are_cumulative_and_need_syscall() -> None:
    base = {"CMOV", "CMPXCHG8", "X87", "FXSR", "MMX", "SSE", "SSE2"}
    assert x86_level(base) == 0
    assert x86_level(base | {"SYSCALL"}) == 1
    f = decode(synthetic({}))
    assert {"X86_64_V1", "X86_64_V2"} <= f.flags


def test_avx10_version_attribute_and_label() -> None:
    r = synthetic(
        {(7, 0): (1, 0, 0, 0), (7, 1): (0, 0, 0, bits(19)), (0x24, 0): (0, bits(16, 17, 18) | 2, 0, 0)}
    )
    f, labels = run(CpuSource(reader=r, arch="x86_64"), HostRoot.under("/nonexistent"))
    assert f.attributes["cpu.cpuid"] == {"AVX10_VERSION": "2"}
    assert labels["cpuid.AVX10_VERSION"] == "2"
    assert {"AVX10", "AVX10_128", "AVX10_256", "AVX10_512"} <= f.flags["cpu.cpuid"]
    assert "cpuid.AVX10" not in labels and labels["cpuid.AVX10_512"] == "true"


def test_tdx_guest_and_host_and_sev_host(tmp_path: Path) -> None:
    tdx_id = [int.from_bytes(b"IntelTDX    "[i : i + 4], "little") for i in (0, 4, 8)]
    r = synthetic({(0x21, 0): (0, tdx_id[0], tdx_id[2], tdx_id[1])})
    mod = tmp_path / "sys/module"
    (mod / "kvm_intel/parameters").mkdir(parents=True)
    (mod / "kvm_intel/parameters/tdx").write_text("Y\n")
    (mod / "kvm_amd/parameters").mkdir(parents=True)
    for p, v in (("sev", "Y\n"), ("sev_es", "1\n"), ("sev_snp", "N\n")):
        (mod / "kvm_amd/parameters" / p).write_text(v)
    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/misc.capacity").write_text("sev 509\nsev_es 99\ntdx 31\n")
    f, labels = run(CpuSource(reader=r, arch="x86_64"), HostRoot.under(tmp_path))
    assert "TDX_GUEST" in f.flags["cpu.cpuid"]
    assert f.attributes["cpu.security"] == {
        "tdx.enabled": "true", "tdx.total_keys": "31", "tdx.protected": "true", "sev.enabled": "true",
        "sev.asids": "509", "sev.es.enabled": "true", "sev.encrypted_state_ids": "99",
    }  # fmt: skip
    assert {k for k in labels if k.startswith("security.")} == {
        "security.tdx.enabled", "security.tdx.protected", "security.sev.enabled", "security.sev.es.enabled",
    }  # fmt: skip


def test_whitelist_replaces_blacklist() -> None:
    src = CpuSource(reader=replay("emr-kvm"), arch="x86_64")
    f = src.discover(host("emr-kvm"), SourcesConfig())
    only = SourcesConfig(cpu=CpuConfig(cpuid=CpuidConfig(attribute_whitelist=("AVX512F", "SSE2", "NOPE"))))
    labels = src.labels(f, only)
    assert {k for k in labels if k.startswith("cpuid.")} == {"cpuid.AVX512F", "cpuid.SSE2"}
    none_hidden = SourcesConfig(cpu=CpuConfig(cpuid=CpuidConfig(attribute_blacklist=())))
    assert {f"cpuid.{x}" for x in f.flags["cpu.cpuid"]} <= set(src.labels(f, none_hidden))


# -- sysfs edge cases ----------------------------------------------------------------------


def _sys(tmp_path: Path, files: dict[str, str]) -> HostRoot:
    for rel, text in files.items():
        p = tmp_path / "sys" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return HostRoot.under(tmp_path)


def test_pstate_passive_and_disagreeing_governors(tmp_path: Path) -> None:
    base = "devices/system/cpu/"
    h = _sys(tmp_path, {
        base + "intel_pstate/status": "active\n", base + "intel_pstate/no_turbo": "1\n",
        base + "cpufreq/policy0/affected_cpus": "0\n", base + "cpufreq/policy0/scaling_governor": "performance\n",
        base + "cpufreq/policy1/affected_cpus": "1\n", base + "cpufreq/policy1/scaling_governor": "powersave\n",
        base + "cpufreq/policy2/affected_cpus": "\n", base + "cpufreq/policy2/scaling_governor": "schedutil\n",
    })  # fmt: skip
    assert cpu_sysfs.pstate(h) == {"status": "active", "turbo": "false"}
    (tmp_path / "sys" / base / "intel_pstate/status").write_text("passive\n")
    assert cpu_sysfs.pstate(h) == {"status": "passive", "turbo": "false"}
    (tmp_path / "sys" / base / "intel_pstate/status").write_text("off\n")
    assert cpu_sysfs.pstate(h) == {}


def test_cstate_rules(tmp_path: Path) -> None:
    assert cpu_sysfs.cstate(HostRoot.under(tmp_path)) is None  # no sysfs: feature left out
    h = _sys(tmp_path, {"devices/system/cpu/online": "0\n"})
    assert cpu_sysfs.cstate(h) == {}  # no cpuidle
    h = _sys(tmp_path, {"devices/system/cpu/cpuidle/current_driver": "intel_idle\n",
                        "module/intel_idle/parameters/max_cstate": "0\n"})  # fmt: skip
    assert cpu_sysfs.cstate(h) == {"enabled": "false"}


def test_topology_gives_up_on_an_unreadable_cpu(tmp_path: Path) -> None:
    h = _sys(tmp_path, {"bus/cpu/devices/cpu0/topology/thread_siblings_list": "0\n",
                        "bus/cpu/devices/cpu0/topology/physical_package_id": "0\n",
                        "bus/cpu/devices/cpu1/topology/thread_siblings_list": "1\n"})  # fmt: skip
    assert cpu_sysfs.topology(h) == {}


# -- reading once, falling back --------------------------------------------------------------


class CountingReader:
    def __init__(self, inner: ReplayCpuid) -> None:
        self.inner, self.calls = inner, 0

    def cpuid(self, leaf: int, subleaf: int = 0) -> Regs:
        self.calls += 1
        return self.inner.cpuid(leaf, subleaf)

    def xgetbv(self, index: int) -> int:
        return self.inner.xgetbv(index)


def test_cpuid_is_read_once_per_source_instance() -> None:
    r = CountingReader(replay("emr-kvm"))
    src = CpuSource(reader=r, arch="x86_64")
    first = src.discover(host("emr-kvm"), SourcesConfig())
    after_first = r.calls
    assert after_first > 0
    again = src.discover(host("emr-kvm"), SourcesConfig())
    assert r.calls == after_first
    assert first == again
    CpuSource(reader=r, arch="x86_64").discover(host("emr-kvm"), SourcesConfig())
    assert r.calls == 2 * after_first  # a new instance reads again: no module-level cache


def test_no_executable_memory_falls_back_to_proc_cpuinfo(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse() -> NativeCpuid:
        raise CpuidUnavailable("executable memory refused (Permission denied)")

    monkeypatch.setattr(cpuid_x86_mod, "NativeCpuid", refuse)  # imported when first needed
    src = CpuSource(arch="x86_64")
    with caplog.at_level(logging.WARNING):
        f, labels = run(src, host("emr-kvm"))
        run(src, host("emr-kvm"))
        run(src, host("epyc-milan-kvm"))  # another host root: static facts re-read, no new warning
    assert len([r for r in caplog.records if "cannot execute CPUID" in r.getMessage()]) == 1
    assert labels["model.id"] == "207" and labels["model.vendor_id"] == "Intel"
    assert labels["cpuid.AVX512F"] == "true" and labels["cpuid.X86_64_V4"] == "true"
    assert labels["model.hypervisor"] == "unknown"  # the hypervisor leaf is out of reach
    assert "PSFD" not in f.flags["cpu.cpuid"]


def test_facts_default_is_unknown_vendor() -> None:
    assert X86Facts().vendor == "VendorUnknown" and not X86Facts().is_vm


# -- the live machine ----------------------------------------------------------------------


@pytest.mark.skipif(not ON_X86_64, reason="invariants of an x86-64 host")
def test_live_machine_invariants() -> None:
    f, labels = run(CpuSource(), HostRoot())
    flags = f.flags["cpu.cpuid"]
    assert "X86_64_V1" in flags and {"SSE2", "CMOV", "SYSCALL"} <= flags
    model = f.attributes["cpu.model"]
    assert model["vendor_id"] in {"Intel", "AMD", "Hygon", "VIA"}
    assert int(model["family"]) > 0 and int(model["id"]) >= 0
    assert model["hypervisor"] == ("none" if "HYPERVISOR" not in flags else model["hypervisor"])
    assert labels["hardware_multithreading"] in ("true", "false")
    assert int(f.attributes["cpu.topology"]["socket_count"]) >= 1
    # Independent oracle: py-cpuinfo (slow, so only here) reads the same CPU.
    import cpuinfo

    info = cpuinfo.get_cpu_info()
    assert (int(model["family"]), int(model["id"])) == (info["family"], info["model"])
    linux = facts_from_cpuinfo(Path("/proc/cpuinfo").read_text())
    assert linux.flags <= flags


def test_cli_prints_cpu_labels() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "nfd", "discover", "--sources", "cpu"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    lines = out.stdout.splitlines()
    assert any(line.startswith("feature.node.kubernetes.io/cpu-model.vendor_id=") for line in lines)
    assert all(line.startswith("feature.node.kubernetes.io/cpu-") for line in lines)
    if ON_X86_64:
        assert "feature.node.kubernetes.io/cpu-cpuid.X86_64_V1=true" in lines


# -- architectures without a reader of nfd's own: py-cpuinfo ----------------------------


def test_an_architecture_without_a_reader_gets_py_cpuinfos_flags() -> None:
    report = {"flags": ["rv64", "i", "m", "zba", "not a name!", 3]}
    src = CpuSource(arch="riscv64", cpu_info=lambda: report)
    f, labels = run(src, host("this-vm"))
    assert set(f.flags["cpu.cpuid"]) == {"RV64", "I", "M", "ZBA"}
    assert labels["cpuid.ZBA"] == "true"


def test_py_cpuinfo_describes_this_machine_only() -> None:
    import cpuinfo

    from nfd.sources.cpu_pyinfo import other_arch_flags, this_machine

    expected = {f.upper() for f in cpuinfo.get_cpu_info()["flags"] if f.replace("_", "").isalnum()}
    got = set(other_arch_flags(HostRoot()))  # py-cpuinfo itself, on the machine under test
    assert got and got <= expected | {f.upper() for f in cpuinfo.get_cpu_info()["flags"]}
    assert len(got) >= len(expected) * 0.9
    # A copy of another node's files is not this machine: no flags, py-cpuinfo not asked.
    assert not this_machine(host("this-vm"))
    assert other_arch_flags(host("this-vm")) == []


def test_a_failing_py_cpuinfo_costs_the_flags_only(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> dict[str, object]:
        raise RuntimeError("lscpu not found")

    with caplog.at_level(logging.WARNING):
        f, _ = run(CpuSource(arch="riscv64", cpu_info=broken), host("this-vm"))
    assert f.flags["cpu.cpuid"] == set() and "cpu.model" in f.attributes
    assert "lscpu not found" in caplog.text
