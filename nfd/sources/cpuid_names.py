"""CPUID registers -> upstream's x86 facts: flag names, vendor, family/model, hypervisor.

Flag names and the leaf/bit each stands for follow the Go library klauspost/cpuid v2
(which upstream NFD uses), including its gating rules: AVX, AVX2, AVX-VNNI, XOP and
FMA4 need the OS to save YMM state (XCR0 bits 1-2); the AVX-512 and AMX group needs
XCR0 bits 1-2 and 5-7; BMI2 needs BMI1; the SVM, IBS and SEV groups need their parent
bit (or an AMD vendor). Where the library deviates from the SDM we follow the library,
because labels must match upstream's: e.g. it reports ``AMXFP8`` from CPUID.7.0:ECX[3]
(the PKU bit) and ``FXSROPT`` from CPUID.1:EDX[25] (the SSE bit).

Pure functions over a :class:`~nfd.sources.cpuid_x86.CpuidReader`: no I/O of their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Protocol

    from nfd.sources.cpuid_x86 import CpuidReader, Regs

    class _Leaf(Protocol):
        """A range-checked CPUID read: zeros for leaves above the CPU's maximum."""

        def __call__(self, n: int, sub: int = 0) -> Regs: ...


EAX, EBX, ECX, EDX = 0, 1, 2, 3


# (leaf, subleaf, register, bit, name) for bits that need no gate beyond the leaf being
# in range (basic leaves <= max basic leaf, extended <= max extended leaf).
_PLAIN: tuple[tuple[int, int, int, int, str], ...] = (
    # CPUID.1
    (0x1, 0, EDX, 0, "X87"), (0x1, 0, EDX, 8, "CMPXCHG8"), (0x1, 0, EDX, 11, "SYSEE"),
    (0x1, 0, EDX, 15, "CMOV"), (0x1, 0, EDX, 23, "MMX"), (0x1, 0, EDX, 24, "FXSR"),
    (0x1, 0, EDX, 25, "FXSROPT"), (0x1, 0, EDX, 25, "SSE"), (0x1, 0, EDX, 26, "SSE2"),
    (0x1, 0, ECX, 0, "SSE3"), (0x1, 0, ECX, 5, "VMX"), (0x1, 0, ECX, 9, "SSSE3"),
    (0x1, 0, ECX, 19, "SSE4"), (0x1, 0, ECX, 20, "SSE42"), (0x1, 0, ECX, 25, "AESNI"),
    (0x1, 0, ECX, 1, "CLMUL"), (0x1, 0, ECX, 22, "MOVBE"), (0x1, 0, ECX, 23, "POPCNT"),
    (0x1, 0, ECX, 30, "RDRAND"), (0x1, 0, ECX, 31, "HYPERVISOR"), (0x1, 0, ECX, 29, "F16C"),
    (0x1, 0, ECX, 13, "CX16"), (0x1, 0, ECX, 26, "XSAVE"), (0x1, 0, ECX, 27, "OSXSAVE"),
    # CPUID.7.0:EBX
    (0x7, 0, EBX, 2, "SGX"), (0x7, 0, EBX, 4, "HLE"), (0x7, 0, EBX, 9, "ERMS"),
    (0x7, 0, EBX, 11, "RTM"), (0x7, 0, EBX, 14, "MPX"), (0x7, 0, EBX, 18, "RDSEED"),
    (0x7, 0, EBX, 19, "ADX"), (0x7, 0, EBX, 29, "SHA"),
    # CPUID.7.0:ECX
    (0x7, 0, ECX, 5, "WAITPKG"), (0x7, 0, ECX, 7, "CETSS"), (0x7, 0, ECX, 8, "GFNI"),
    (0x7, 0, ECX, 9, "VAES"), (0x7, 0, ECX, 10, "VPCLMULQDQ"), (0x7, 0, ECX, 13, "TME"),
    (0x7, 0, ECX, 25, "CLDEMOTE"), (0x7, 0, ECX, 23, "KEYLOCKER"), (0x7, 0, ECX, 27, "MOVDIRI"),
    (0x7, 0, ECX, 28, "MOVDIR64B"), (0x7, 0, ECX, 29, "ENQCMD"), (0x7, 0, ECX, 30, "SGXLC"),
    # CPUID.7.0:EDX
    (0x7, 0, EDX, 4, "FSRM"), (0x7, 0, EDX, 9, "SRBDS_CTRL"), (0x7, 0, EDX, 10, "MD_CLEAR"),
    (0x7, 0, EDX, 11, "RTM_ALWAYS_ABORT"), (0x7, 0, EDX, 14, "SERIALIZE"),
    (0x7, 0, EDX, 15, "HYBRID_CPU"), (0x7, 0, EDX, 16, "TSXLDTRK"), (0x7, 0, EDX, 18, "PCONFIG"),
    (0x7, 0, EDX, 20, "CETIBT"), (0x7, 0, EDX, 26, "IBPB"), (0x7, 0, EDX, 27, "STIBP"),
    (0x7, 0, EDX, 28, "FLUSH_L1D"), (0x7, 0, EDX, 29, "IA32_ARCH_CAP"),
    (0x7, 0, EDX, 30, "IA32_CORE_CAP"), (0x7, 0, EDX, 31, "SPEC_CTRL_SSBD"),
    # CPUID.7.1:EAX / EDX
    (0x7, 1, EAX, 1, "SM3_X86"), (0x7, 1, EAX, 2, "SM4_X86"), (0x7, 1, EAX, 7, "CMPCCXADD"),
    (0x7, 1, EAX, 10, "MOVSB_ZL"), (0x7, 1, EAX, 11, "STOSB_SHORT"),
    (0x7, 1, EAX, 12, "CMPSB_SCADBS_SHORT"), (0x7, 1, EAX, 22, "HRESET"),
    (0x7, 1, EAX, 23, "AVXIFMA"), (0x7, 1, EAX, 26, "LAM"),
    (0x7, 1, EDX, 4, "AVXVNNIINT8"), (0x7, 1, EDX, 5, "AVXNECONVERT"),
    (0x7, 1, EDX, 6, "AMXTRANSPOSE"), (0x7, 1, EDX, 7, "AMXTF32"), (0x7, 1, EDX, 8, "AMXCOMPLEX"),
    (0x7, 1, EDX, 10, "AVXVNNIINT16"), (0x7, 1, EDX, 14, "PREFETCHI"), (0x7, 1, EDX, 19, "AVX10"),
    (0x7, 1, EDX, 21, "APX_F"),
    # CPUID.7.2:EDX (speculation controls Linux does not list)
    (0x7, 2, EDX, 0, "PSFD"), (0x7, 2, EDX, 1, "IDPRED_CTRL"), (0x7, 2, EDX, 2, "RRSBA_CTRL"),
    (0x7, 2, EDX, 4, "BHI_CTRL"), (0x7, 2, EDX, 5, "MCDT_NO"),
    # CPUID.80000001
    (0x80000001, 0, ECX, 5, "LZCNT"), (0x80000001, 0, ECX, 5, "POPCNT"),
    (0x80000001, 0, ECX, 0, "LAHF"), (0x80000001, 0, ECX, 2, "SVM"), (0x80000001, 0, ECX, 6, "SSE4A"),
    (0x80000001, 0, ECX, 10, "IBS"), (0x80000001, 0, ECX, 22, "TOPEXT"),
    (0x80000001, 0, EDX, 11, "SYSCALL"), (0x80000001, 0, EDX, 20, "NX"),
    (0x80000001, 0, EDX, 22, "MMXEXT"), (0x80000001, 0, EDX, 23, "MMX"),
    (0x80000001, 0, EDX, 24, "FXSR"), (0x80000001, 0, EDX, 25, "FXSROPT"),
    (0x80000001, 0, EDX, 27, "RDTSCP"), (0x80000001, 0, EDX, 30, "AMD3DNOWEXT"),
    (0x80000001, 0, EDX, 31, "AMD3DNOW"),
    # CPUID.80000007
    (0x80000007, 0, EBX, 0, "MCAOVERFLOW"), (0x80000007, 0, EBX, 1, "SUCCOR"),
    (0x80000007, 0, EBX, 2, "HWA"), (0x80000007, 0, EDX, 9, "CPBOOST"),
    # CPUID.80000008:EBX
    (0x80000008, 0, EBX, 28, "PSFD"), (0x80000008, 0, EBX, 27, "CPPC"),
    (0x80000008, 0, EBX, 24, "SPEC_CTRL_SSBD"), (0x80000008, 0, EBX, 23, "PPIN"),
    (0x80000008, 0, EBX, 21, "TLB_FLUSH_NESTED"), (0x80000008, 0, EBX, 20, "EFER_LMSLE_UNS"),
    (0x80000008, 0, EBX, 19, "IBRS_PROVIDES_SMP"), (0x80000008, 0, EBX, 18, "IBRS_PREFERRED"),
    (0x80000008, 0, EBX, 17, "STIBP_ALWAYSON"), (0x80000008, 0, EBX, 15, "STIBP"),
    (0x80000008, 0, EBX, 14, "IBRS"), (0x80000008, 0, EBX, 13, "INT_WBINVD"),
    (0x80000008, 0, EBX, 12, "IBPB"), (0x80000008, 0, EBX, 9, "WBNOINVD"),
    (0x80000008, 0, EBX, 8, "MCOMMIT"), (0x80000008, 0, EBX, 4, "RDPRU"),
    (0x80000008, 0, EBX, 3, "INVLPGB"), (0x80000008, 0, EBX, 1, "MSRIRC"),
    (0x80000008, 0, EBX, 0, "CLZERO"),
    # CPUID.8000001A:EAX
    (0x8000001A, 0, EAX, 0, "FP128"), (0x8000001A, 0, EAX, 1, "MOVU"), (0x8000001A, 0, EAX, 2, "FP256"),
)  # fmt: skip

# AVX-512 / AMX group: set only when the OS saves opmask and ZMM state.
_AVX512: tuple[tuple[int, int, int, int, str], ...] = (
    (0x7, 0, EBX, 16, "AVX512F"), (0x7, 0, EBX, 17, "AVX512DQ"), (0x7, 0, EBX, 21, "AVX512IFMA"),
    (0x7, 0, EBX, 26, "AVX512PF"), (0x7, 0, EBX, 27, "AVX512ER"), (0x7, 0, EBX, 28, "AVX512CD"),
    (0x7, 0, EBX, 30, "AVX512BW"), (0x7, 0, EBX, 31, "AVX512VL"),
    (0x7, 0, ECX, 1, "AVX512VBMI"), (0x7, 0, ECX, 3, "AMXFP8"), (0x7, 0, ECX, 6, "AVX512VBMI2"),
    (0x7, 0, ECX, 11, "AVX512VNNI"), (0x7, 0, ECX, 12, "AVX512BITALG"),
    (0x7, 0, ECX, 14, "AVX512VPOPCNTDQ"),
    (0x7, 0, EDX, 8, "AVX512VP2INTERSECT"), (0x7, 0, EDX, 22, "AMXBF16"),
    (0x7, 0, EDX, 23, "AVX512FP16"), (0x7, 0, EDX, 24, "AMXTILE"), (0x7, 0, EDX, 25, "AMXINT8"),
    (0x7, 1, EAX, 5, "AVX512BF16"), (0x7, 1, EAX, 19, "WRMSRNS"), (0x7, 1, EAX, 21, "AMXFP16"),
    (0x7, 1, EAX, 27, "MSRLIST"),
)  # fmt: skip

_SVM_EDX = ((0, "SVMNP"), (1, "LBRVIRT"), (2, "SVML"), (3, "NRIPS"), (4, "TSCRATEMSR"),
            (5, "VMCBCLEAN"), (6, "SVMFBASID"), (7, "SVMDA"), (10, "SVMPF"), (12, "SVMPFT"))  # fmt: skip
_IBS_EAX = ((0, "IBSFFV"), (1, "IBSFETCHSAM"), (2, "IBSOPSAM"), (3, "IBSRDWROPCNT"),
            (4, "IBSOPCNT"), (5, "IBSBRNTRGT"), (6, "IBSOPCNTEXT"), (7, "IBSRIPINVALIDCHK"),
            (8, "IBS_OPFUSE"), (9, "IBS_FETCH_CTLX"), (10, "IBS_OPDATA4"), (11, "IBS_ZEN4"))  # fmt: skip
_SEV_EAX = ((0, "SME"), (1, "SEV"), (2, "MSR_PAGEFLUSH"), (3, "SEV_ES"), (4, "SEV_SNP"),
            (5, "VMPL"), (10, "SME_COHERENT"), (11, "SEV_64BIT"), (12, "SEV_RESTRICTED"),
            (13, "SEV_ALTERNATIVE"), (14, "SEV_DEBUGSWAP"), (15, "IBS_PREVENTHOST"), (16, "VTE"),
            (24, "VMSA_REGPROT"))  # fmt: skip

# klauspost's vendor strings (CPUID.0 and the hypervisor leaf) -> its Vendor names.
VENDORS: dict[str, str] = {
    "AMDisbetter!": "AMD", "AuthenticAMD": "AMD", "CentaurHauls": "VIA", "GenuineIntel": "Intel",
    "TransmetaCPU": "Transmeta", "GenuineTMx86": "Transmeta", "Geode by NSC": "NSC",
    "VIA VIA VIA ": "VIA", "KVMKVMKVM": "KVM", "Linux KVM Hv": "KVM", "TCGTCGTCGTCG": "QEMU",
    "Microsoft Hv": "MSVM", "VMwareVMware": "VMware", "XenVMMXenVMM": "XenHVM",
    "bhyve bhyve ": "Bhyve", "HygonGenuine": "Hygon", "Vortex86 SoC": "SiS", "SiS SiS SiS ": "SiS",
    "RiseRiseRise": "SiS", "Genuine  RDC": "RDC", "QNXQVMBSQG": "QNX", "ACRNACRNACRN": "ACRN",
    "SRESRESRESRE": "SRE", "Apple VZ": "Apple",
}  # fmt: skip
UNKNOWN_VENDOR = "VendorUnknown"

# x86-64 micro-architecture levels, as klauspost/cpuid defines them; a level needs SYSEE
# or SYSCALL plus every flag of its set.
_LEVEL1 = frozenset({"CMOV", "CMPXCHG8", "X87", "FXSR", "MMX", "SSE", "SSE2"})
_LEVEL2 = _LEVEL1 | {"CX16", "LAHF", "POPCNT", "SSE3", "SSE4", "SSE42", "SSSE3"}
_LEVEL3 = _LEVEL2 | {"AVX", "AVX2", "BMI1", "BMI2", "F16C", "FMA3", "LZCNT", "MOVBE", "OSXSAVE"}
_LEVEL4 = _LEVEL3 | {"AVX512F", "AVX512BW", "AVX512CD", "AVX512DQ", "AVX512VL"}
_LEVELS = (_LEVEL4, _LEVEL3, _LEVEL2, _LEVEL1)


def x86_level(flags: Iterable[str]) -> int:
    fs = set(flags)
    if not fs & {"SYSEE", "SYSCALL"}:
        return 0
    for i, need in enumerate(_LEVELS):
        if need <= fs:
            return 4 - i
    return 0


def level_flags(level: int) -> list[str]:
    """Upstream labels every level up to the detected one: a v4 part is also v1..v3."""
    return [f"X86_64_V{n}" for n in range(1, level + 1)]


# No slots: one per cpu source; not compared, not printed (see docs/architecture.md, "Plain Python").
@dataclass(eq=False, repr=False)
class X86Facts:
    """What one CPUID read of an x86 CPU gives the cpu source."""

    vendor: str = UNKNOWN_VENDOR  # klauspost Vendor name: Intel, AMD, Hygon, VendorUnknown ...
    vendor_string: str = ""
    family: int = 0
    model: int = 0
    stepping: int = 0
    flags: frozenset[str] = field(default_factory=frozenset)
    avx10_level: int = 0
    hypervisor_vendor: str = UNKNOWN_VENDOR
    hypervisor_string: str = ""
    sgx_epc_bytes: int = 0
    rdt: tuple[tuple[str, str], ...] = ()
    nominal_base_mhz: int = 0  # CPUID.16h:EAX; 0 when not reported
    source: str = "cpuid"  # "cpuid", or "cpuinfo" when CPUID could not be executed

    @property
    def is_vm(self) -> bool:
        return "HYPERVISOR" in self.flags


def regs_string(*regs: int) -> str:
    """Registers as little-endian ASCII, cut at the first NUL (as the library reads them)."""
    raw = b"".join(r.to_bytes(4, "little") for r in regs)
    return raw.split(b"\0", 1)[0].decode("latin-1")


def _bit(value: int, bit: int) -> bool:
    return (value >> bit) & 1 == 1


def family_model(eax1: int) -> tuple[int, int, int]:
    family = (eax1 >> 8) & 0xF
    ext = family == 0x6
    if family == 0xF:
        family += (eax1 >> 20) & 0xFF
        ext = True
    model = (eax1 >> 4) & 0xF
    if ext:
        model += (eax1 >> 12) & 0xF0
    return family, model, eax1 & 0xF


def decode(r: CpuidReader) -> X86Facts:
    """Read everything the cpu source needs from CPUID, once."""
    max_basic, b0, c0, d0 = r.cpuid(0)
    vendor_string = regs_string(b0, d0, c0)
    vendor = VENDORS.get(vendor_string, UNKNOWN_VENDOR)
    max_ext = r.cpuid(0x80000000)[0]
    hb, hc, hd = r.cpuid(0x40000000)[1:]
    hv_string = regs_string(hb, hc, hd)
    hv_vendor = VENDORS.get(hv_string, UNKNOWN_VENDOR)

    def leaf(n: int, sub: int = 0) -> tuple[int, int, int, int]:
        in_range = n <= max_basic if n < 0x80000000 else n <= max_ext
        return r.cpuid(n, sub) if in_range else (0, 0, 0, 0)

    if max_basic < 1:
        return X86Facts(vendor=vendor, vendor_string=vendor_string, hypervisor_vendor=hv_vendor,
                        hypervisor_string=hv_string)  # fmt: skip
    eax1 = r.cpuid(1)[0]
    family, model, stepping = family_model(eax1)
    fs: set[str] = set()
    cache: dict[tuple[int, int], tuple[int, int, int, int]] = {}

    def regs(n: int, sub: int) -> tuple[int, int, int, int]:
        key = (n, sub)
        if key not in cache:
            cache[key] = leaf(n, sub)
        return cache[key]

    for n, sub, reg, bit, name in _PLAIN:
        if n == 0x7 and max_basic < 7:
            continue
        if _bit(regs(n, sub)[reg], bit):
            fs.add(name)
    if _bit(regs(7, 0)[EBX], 3):
        fs.add("BMI1")
        if _bit(regs(7, 0)[EBX], 8):
            fs.add("BMI2")

    c1, d1 = regs(1, 0)[ECX], regs(1, 0)[EDX]
    if (
        vendor in ("Intel", "AMD")
        and _bit(d1, 28)
        and max_basic >= 4
        and _threads_per_core(r, vendor, max_basic, max_ext, family) > 1
    ):
        fs.add("HTT")

    xsave_enabled = _bit(c1, 26) and _bit(c1, 27)  # XSAVE and OSXSAVE: XGETBV may run
    xcr0 = r.xgetbv(0) if xsave_enabled else 0
    if xsave_enabled and _bit(c1, 28) and xcr0 & 0x6 == 0x6:
        fs.add("AVX")
        old_intel = vendor == "Intel" and family == 6 and model < 60  # before Haswell
        old_amd = vendor == "AMD" and (family < 23 or (family == 23 and model < 49))  # before Zen 2
        if old_intel or old_amd:
            fs.add("AVXSLOW")
    if _bit(c1, 12) and _bit(c1, 27):
        fs.add("FMA3")

    if max_basic >= 7:
        if "AVX" in fs and _bit(regs(7, 0)[EBX], 5):
            fs.add("AVX2")
        if "AVX" in fs and _bit(regs(7, 1)[EAX], 4):
            fs.add("AVXVNNI")
        if xsave_enabled and (xcr0 >> 5) & 7 == 7 and (xcr0 >> 1) & 3 == 3:
            for n, sub, reg, bit, name in _AVX512:
                if _bit(regs(n, sub)[reg], bit):
                    fs.add(name)
        if "SGX" in fs and _bit(leaf(0x12, 0)[EAX], 12):
            fs.add("SGXPQC")
        if "KEYLOCKER" in fs and max_basic >= 0x19 and leaf(0x19, 0)[EBX] & 5 == 5:
            fs.add("KEYLOCKERW")
        if "AVX10" in fs and max_basic >= 0x24:
            eb = leaf(0x24, 0)[EBX]
            for bit, name in ((16, "AVX10_128"), (17, "AVX10_256"), (18, "AVX10_512")):
                if _bit(eb, bit):
                    fs.add(name)

    if max_basic >= 0xD and "XSAVE" in fs:
        ea = leaf(0xD, 1)[EAX]
        for bit, name in ((0, "XSAVEOPT"), (1, "XSAVEC"), (2, "XGETBV1"), (3, "XSAVES")):
            if _bit(ea, bit):
                fs.add(name)

    if max_ext >= 0x80000001 and "AVX" in fs:
        ce = regs(0x80000001, 0)[ECX]
        if _bit(ce, 11):
            fs.add("XOP")
        if _bit(ce, 16):
            fs.add("FMA4")
    if "SVM" in fs and max_ext >= 0x8000000A:
        de = leaf(0x8000000A)[EDX]
        fs.update(name for bit, name in _SVM_EDX if _bit(de, bit))
    if "IBS" in fs and max_ext >= 0x8000001B:
        ae = leaf(0x8000001B)[EAX]
        fs.update(name for bit, name in _IBS_EAX if _bit(ae, bit))
    if vendor == "AMD" and max_ext >= 0x8000001F:
        ae = leaf(0x8000001F)[EAX]
        fs.update(name for bit, name in _SEV_EAX if _bit(ae, bit))
    if vendor == "AMD" and max_ext >= 0x80000021:
        a21, _, c21, _ = leaf(0x80000021)
        for bit, name in ((31, "SRSO_MSR_FIX"), (30, "SRSO_USER_KERNEL_NO"), (29, "SRSO_NO"),
                          (28, "IBPB_BRTYPE"), (27, "SBPB"), (5, "TSA_VERW_CLEAR")):  # fmt: skip
            if _bit(a21, bit):
                fs.add(name)
        if _bit(c21, 1):
            fs.add("TSA_L1_NO")
        if _bit(c21, 2):
            fs.add("TSA_SQ_NO")
    # AMD parts older than family 19h, and family 1Ah models 00-4F / 60-7F, are not
    # affected by TSA but do not say so in CPUID.
    tsa_immune = family < 0x19 or (family == 0x1A and (model <= 0x4F or 0x60 <= model <= 0x7F))
    if vendor == "AMD" and tsa_immune:
        fs.update(("TSA_L1_NO", "TSA_SQ_NO"))

    if max_basic >= 0x20 and r.cpuid(0x4000000C)[EBX] == 0xBE3:
        fs.add("TDX_GUEST")  # Hyper-V reports TDX isolation here instead of leaf 21h
    if max_basic >= 0x21:
        _, b21, c21x, d21 = r.cpuid(0x21)
        if regs_string(b21, d21, c21x) == "IntelTDX    ":
            fs.add("TDX_GUEST")

    if max_basic >= 0xA:
        fs.update(_pmu_fixed_counters(*leaf(0xA)))

    avx10 = leaf(0x24, 0)[EBX] & 0xFF if "AVX10" in fs and max_basic >= 0x24 else 0
    fs.update(level_flags(x86_level(fs)))
    return X86Facts(
        vendor=vendor,
        vendor_string=vendor_string,
        family=family,
        model=model,
        stepping=stepping,
        flags=frozenset(fs),
        avx10_level=avx10,
        hypervisor_vendor=hv_vendor,
        hypervisor_string=hv_string,
        sgx_epc_bytes=_sgx_epc(leaf) if "SGX" in fs else 0,
        rdt=_rdt(leaf),
        nominal_base_mhz=leaf(0x16)[EAX] if max_basic >= 0x16 else 0,
    )


def _threads_per_core(r: CpuidReader, vendor: str, max_basic: int, max_ext: int, family: int) -> int:
    if max_basic < 0xB:
        if vendor != "Intel":
            return 1
        _, b, _, d = r.cpuid(1)
        if _bit(d, 28):
            logical = (b >> 16) & 0xFF
            if logical > 1:
                cores = (r.cpuid(4)[EAX] >> 26) + 1
                return logical // cores
        return 1
    b = r.cpuid(0xB, 0)[EBX]
    if b & 0xFFFF == 0:
        if vendor == "AMD" and _bit(r.cpuid(1)[EDX], 28) and family >= 23:
            if max_ext >= 0x8000001E:
                return ((r.cpuid(0x8000001E)[EBX] >> 8) & 0xFF) + 1
            return 2
        return 1
    return b & 0xFFFF


def _pmu_fixed_counters(eax: int, ebx: int, ecx: int, edx: int) -> list[str]:
    """Architectural performance monitoring (CPUID.0Ah) fixed counters, as flags."""
    version = eax & 0xFF
    n_fixed = edx & 0x1F if version > 1 else 0
    names = ("PMU_FIXEDCOUNTER_INSTRUCTIONS", "PMU_FIXEDCOUNTER_CYCLES",
             "PMU_FIXEDCOUNTER_REFCYCLES", "PMU_FIXEDCOUNTER_TOPDOWN_SLOTS")  # fmt: skip
    if version == 0:
        return []
    if ebx == 0:
        return list(names[:n_fixed]) if n_fixed in (3, 4) else []
    # EBX lists the *unavailable* architectural events: a clear bit means supported.
    return [name for bit, name in enumerate(names) if not _bit(ebx, bit)]


def _sgx_epc(leaf: _Leaf) -> int:
    total = 0
    for sub in range(2, 10):
        eax, _, ecx, edx = leaf(0x12, sub)
        kind = eax & 0xF
        if kind == 0:
            break
        if kind == 1:
            total += (ecx & 0xFFFFF000) + ((edx & 0x000FFFFF) << 32)
    return total


def _rdt(leaf: _Leaf) -> tuple[tuple[str, str], ...]:
    """Intel RDT capabilities (upstream's cpu.rdt attributes, without the resctrl part)."""
    ebx7 = leaf(7, 0)[EBX]
    out: list[tuple[str, str]] = []
    if _bit(ebx7, 12) and _bit(leaf(0xF, 0)[EDX], 1):
        out.append(("RDTMON", "true"))
        l3 = leaf(0xF, 1)[EDX]
        if _bit(l3, 0):
            out.append(("RDTCMT", "true"))
        if _bit(l3, 1) and _bit(l3, 2):
            out.append(("RDTMBM", "true"))
    if _bit(ebx7, 15):
        alloc = leaf(0x10, 0)[EBX]
        for bit, name in ((1, "RDTL3CA"), (2, "RDTL2CA"), (3, "RDTMBA")):
            if _bit(alloc, bit):
                out.append((name, "true"))
    return tuple(out)


# -- /proc/cpuinfo fallback ---------------------------------------------------------------

# Linux flag -> upstream name(s), for hosts where CPUID cannot be executed. Flags from
# leaves Linux does not list (PSFD, BHI_CTRL, MOVSB_ZL ...) are necessarily missing there.
LINUX_FLAGS: dict[str, tuple[str, ...]] = {
    "fpu": ("X87",), "cx8": ("CMPXCHG8",), "sep": ("SYSEE",), "cmov": ("CMOV",), "mmx": ("MMX",),
    "fxsr": ("FXSR",), "sse": ("SSE", "FXSROPT"), "sse2": ("SSE2",), "pni": ("SSE3",),
    "vmx": ("VMX",), "ssse3": ("SSSE3",), "sse4_1": ("SSE4",), "sse4_2": ("SSE42",),
    "aes": ("AESNI",), "pclmulqdq": ("CLMUL",), "movbe": ("MOVBE",), "popcnt": ("POPCNT",),
    "rdrand": ("RDRAND",), "hypervisor": ("HYPERVISOR",), "f16c": ("F16C",), "cx16": ("CX16",),
    "xsave": ("XSAVE", "OSXSAVE"), "avx": ("AVX",), "fma": ("FMA3",), "avx2": ("AVX2",),
    "bmi1": ("BMI1",), "bmi2": ("BMI2",), "sgx": ("SGX",), "hle": ("HLE",), "erms": ("ERMS",),
    "rtm": ("RTM",), "mpx": ("MPX",), "rdseed": ("RDSEED",), "adx": ("ADX",), "sha_ni": ("SHA",),
    "waitpkg": ("WAITPKG",), "user_shstk": ("CETSS",), "gfni": ("GFNI",), "vaes": ("VAES",),
    "vpclmulqdq": ("VPCLMULQDQ",), "tme": ("TME",), "cldemote": ("CLDEMOTE",),
    "movdiri": ("MOVDIRI",), "movdir64b": ("MOVDIR64B",), "enqcmd": ("ENQCMD",),
    "sgx_lc": ("SGXLC",), "fsrm": ("FSRM",), "md_clear": ("MD_CLEAR",),
    "rtm_always_abort": ("RTM_ALWAYS_ABORT",), "serialize": ("SERIALIZE",),
    "hybrid_cpu": ("HYBRID_CPU",), "tsxldtrk": ("TSXLDTRK",), "pconfig": ("PCONFIG",),
    "ibt": ("CETIBT",), "flush_l1d": ("FLUSH_L1D",), "arch_capabilities": ("IA32_ARCH_CAP",),
    "ibpb": ("IBPB",), "stibp": ("STIBP",), "ibrs": ("IBRS",), "ssbd": ("SPEC_CTRL_SSBD",),
    "avx_vnni": ("AVXVNNI",), "avx512f": ("AVX512F",), "avx512dq": ("AVX512DQ",),
    "avx512ifma": ("AVX512IFMA",), "avx512pf": ("AVX512PF",), "avx512er": ("AVX512ER",),
    "avx512cd": ("AVX512CD",), "avx512bw": ("AVX512BW",), "avx512vl": ("AVX512VL",),
    "avx512vbmi": ("AVX512VBMI",), "avx512_vbmi2": ("AVX512VBMI2",),
    "avx512_vnni": ("AVX512VNNI",), "avx512_bitalg": ("AVX512BITALG",),
    "avx512_vpopcntdq": ("AVX512VPOPCNTDQ",), "avx512_vp2intersect": ("AVX512VP2INTERSECT",),
    "avx512_bf16": ("AVX512BF16",), "avx512_fp16": ("AVX512FP16",), "amx_bf16": ("AMXBF16",),
    "amx_tile": ("AMXTILE",), "amx_int8": ("AMXINT8",), "amx_fp16": ("AMXFP16",),
    "avx_ifma": ("AVXIFMA",), "avx_vnni_int8": ("AVXVNNIINT8",), "avx_ne_convert": ("AVXNECONVERT",),
    "lam": ("LAM",), "wrmsrns": ("WRMSRNS",), "sm3": ("SM3_X86",), "sm4": ("SM4_X86",),
    "xsaveopt": ("XSAVEOPT",), "xsavec": ("XSAVEC",), "xgetbv1": ("XGETBV1",),
    "xsaves": ("XSAVES",), "abm": ("LZCNT", "POPCNT"), "lahf_lm": ("LAHF",), "svm": ("SVM",),
    "sse4a": ("SSE4A",), "ibs": ("IBS",), "topoext": ("TOPEXT",), "syscall": ("SYSCALL",),
    "nx": ("NX",), "mmxext": ("MMXEXT",), "fxsr_opt": ("FXSROPT",), "rdtscp": ("RDTSCP",),
    "3dnowext": ("AMD3DNOWEXT",), "3dnow": ("AMD3DNOW",), "xop": ("XOP",), "fma4": ("FMA4",),
    "cpb": ("CPBOOST",), "clzero": ("CLZERO",), "wbnoinvd": ("WBNOINVD",), "rdpru": ("RDPRU",),
    "mcommit": ("MCOMMIT",), "invlpgb": ("INVLPGB",), "cppc": ("CPPC",), "amd_ppin": ("PPIN",),
    "npt": ("SVMNP",), "lbrv": ("LBRVIRT",), "svm_lock": ("SVML",), "nrip_save": ("NRIPS",),
    "tsc_scale": ("TSCRATEMSR",), "vmcb_clean": ("VMCBCLEAN",), "flushbyasid": ("SVMFBASID",),
    "decodeassists": ("SVMDA",), "pausefilter": ("SVMPF",), "pfthreshold": ("SVMPFT",),
    "sme": ("SME",), "sev": ("SEV",), "sev_es": ("SEV_ES",), "sev_snp": ("SEV_SNP",),
    "vte": ("VTE",), "succor": ("SUCCOR",), "overflow_recov": ("MCAOVERFLOW",),
    "tdx_guest": ("TDX_GUEST",),
}  # fmt: skip

_AVX512_NAMES = frozenset(name for *_, name in _AVX512)


def facts_from_cpuinfo(text: str) -> X86Facts:
    """The same facts, as far as the first processor block of /proc/cpuinfo tells them."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        k, sep, v = line.partition(":")
        if sep:
            fields.setdefault(k.strip(), v.strip())
    fs: set[str] = set()
    for flag in fields.get("flags", "").split():
        fs.update(LINUX_FLAGS.get(flag, ()))
    # klauspost reads the PKU bit as AMXFP8, and only with AVX-512 state enabled.
    if "pku" in fields.get("flags", "").split() and "AVX512F" in fs:
        fs.add("AMXFP8")
    if "AVX" not in fs:
        fs -= {"AVX2", "AVXVNNI", "XOP", "FMA4"} | _AVX512_NAMES
    vendor_string = fields.get("vendor_id", "")
    vendor = VENDORS.get(vendor_string, UNKNOWN_VENDOR)
    family, model, stepping = (_int(fields.get(k)) for k in ("cpu family", "model", "stepping"))
    fs.update(level_flags(x86_level(fs)))
    return X86Facts(
        vendor=vendor, vendor_string=vendor_string, family=family, model=model, stepping=stepping,
        flags=frozenset(fs), source="cpuinfo",
    )  # fmt: skip


def _int(text: str | None) -> int:
    try:
        return int(text or "0", 0)
    except ValueError:
        return 0


def hypervisor_label(facts: X86Facts) -> str:
    """cpu.model hypervisor value for an x86 guest, as upstream derives it."""
    if facts.hypervisor_vendor != UNKNOWN_VENDOR:
        return facts.hypervisor_vendor.lower()
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "_", facts.hypervisor_string)
    return clean or "unknown"
