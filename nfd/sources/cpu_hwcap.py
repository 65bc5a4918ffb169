"""CPU flags and model of non-x86 machines: AT_HWCAP/AT_HWCAP2 bits (or the Features line
of /proc/cpuinfo when the auxiliary vector cannot be read) under upstream's names, and
the arm64 vendor from the MIDR implementer code.

Pure tables and parsers; the cpu source does the reading.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

AT_HWCAP = 16
AT_HWCAP2 = 26

# Bit n of AT_HWCAP / AT_HWCAP2 -> upstream's name (kernel uapi hwcap.h order).
_ARM64_HWCAP = (
    "FP ASIMD EVTSTRM AES PMULL SHA1 SHA2 CRC32 ATOMICS FPHP ASIMDHP CPUID ASIMDRDM JSCVT "
    "FCMA LRCPC DCPOP SHA3 SM3 SM4 ASIMDDP SHA512 SVE ASIMDFHM DIT USCAT ILRCPC FLAGM SSBS "
    "SB PACA PACG"
)
_ARM64_HWCAP2 = (
    "DCPODP SVE2 SVEAES SVEPMULL SVEBITPERM SVESHA3 SVESM4 FLAGM2 FRINT SVEI8MM SVEF32MM "
    "SVEF64MM SVEBF16 I8MM BF16 DGH RNG BTI MTE ECV AFP RPRES MTE3 SME SMEI16I64 SMEF64F64 "
    "SMEI8I32 SMEF16F32 SMEB16F32 SMEF32F32 SMEFA64 WFXT EBF16 SVEEBF16"
)
_ARM_HWCAP = (
    "SWP HALF THUMB 26BIT FASTMUL FPA VFP EDSP JAVA IWMMXT CRUNCH THUMBEE NEON VFPv3 "
    "VFPv3D16 TLS VFPv4 IDIVA IDIVT VFPD32 LPAE EVTSTRM"
)
_ARM_HWCAP2 = "AES PMULL SHA1 SHA2 CRC32"
# powerpc: the kernel numbers these from the top bit down.
_PPC_HWCAP = {
    31: "PPC32", 30: "PPC64", 29: "PPC601", 28: "ALTIVEC", 27: "FPU", 26: "MMU", 25: "4xxMAC",
    24: "UCACHE", 23: "SPE", 22: "EFPFLOAT", 21: "EFPDOUBLE", 20: "NOTB", 19: "POWER4",
    18: "POWER5", 17: "POWER5+", 16: "CELLBE", 15: "BOOKE", 14: "SMT", 13: "IC_SNOOP",
    12: "ARCH_2_05", 11: "PA6T", 10: "DFP", 9: "POWER6X", 8: "ARCH_2_06", 7: "VSX",
    6: "ARCHPMU", 1: "TRUE_LE", 0: "PPCLE",
}  # fmt: skip
_PPC_HWCAP2 = {
    31: "ARCH_2_07", 30: "HTM", 29: "DSCR", 28: "EBB", 27: "ISEL", 26: "TAR", 25: "VCRYPTO",
    24: "HTM-NOSC", 23: "ARCH_3_00", 22: "IEEE128", 21: "DARN", 20: "SCV",
    19: "HTM-NO-SUSPEND", 18: "ARCH_3_1", 17: "MMA",
}  # fmt: skip
_S390_HWCAP = (
    "ESAN3 ZARCH STFLE MSA LDISP EIMM DFP EDAT ETF3EH HIGHGPRS TE VX VXD VXE GS VXE2 VXP "
    "SORT DFLT VXP2 NNPA PCIMIO SIE"
)


def _numbered(names: str) -> dict[int, str]:
    """Space-separated names, bit 0 first."""
    return dict(enumerate(names.split(" ")))


# arch -> (AT_HWCAP table, AT_HWCAP2 table); upstream reads HWCAP2 on arm, arm64 and ppc64le.
HWCAP_TABLES: dict[str, tuple[Mapping[int, str], Mapping[int, str]]] = {
    "arm64": (_numbered(_ARM64_HWCAP), _numbered(_ARM64_HWCAP2)),
    "arm": (_numbered(_ARM_HWCAP), _numbered(_ARM_HWCAP2)),
    "ppc64le": (_PPC_HWCAP, _PPC_HWCAP2),
    "s390x": (_numbered(_S390_HWCAP), {}),
}

# /proc/cpuinfo spells a few flags differently from upstream's names.
_CPUINFO_ALIASES = {"fastmult": "FASTMUL"}


def flags_from_hwcap(arch: str, hwcap: int, hwcap2: int) -> list[str]:
    tables = HWCAP_TABLES.get(arch)
    if tables is None:
        return []
    t1, t2 = tables
    return [t1[b] for b in sorted(t1) if hwcap >> b & 1] + [t2[b] for b in sorted(t2) if hwcap2 >> b & 1]


def flags_from_cpuinfo_features(arch: str, features: Iterable[str]) -> list[str]:
    """Kernel feature words (``asimd``, ``vfpv3``, ``vxe2`` ...) mapped to upstream's names;
    words upstream has no name for are left out, as the HWCAP path leaves unknown bits out."""
    tables = HWCAP_TABLES.get(arch)
    if tables is None:
        return []
    known = {n.lower(): n for t in tables for n in t.values()}
    known.update(_CPUINFO_ALIASES)
    out: list[str] = []
    for word in features:
        name = known.get(word.lower())
        if name and name not in out:
            out.append(name)
    return out


def parse_auxv(
    data: bytes, *, byteorder: str = sys.byteorder, word: int = struct.calcsize("P")
) -> dict[int, int]:
    """(type, value) pairs of an auxiliary vector (``/proc/self/auxv``): pairs of native
    words (8 bytes on 64-bit, 4 on 32-bit systems) in the machine's own byte order."""
    fmt = ("<" if byteorder == "little" else ">") + ("QQ" if word == 8 else "II")
    step = 2 * word
    out: dict[int, int] = {}
    for i in range(0, len(data) - step + 1, step):
        key, val = struct.unpack_from(fmt, data, i)
        if key == 0:  # AT_NULL ends the vector
            break
        out[key] = val
    return out


def cpuinfo_fields(text: str) -> dict[str, str]:
    """``key : value`` lines of /proc/cpuinfo; the first value of each key wins."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            fields.setdefault(k.strip(), v.strip())
    return fields


# MIDR implementer code -> klauspost's Vendor name.
ARM_IMPLEMENTERS = {
    0xC0: "Ampere", 0x41: "ARM", 0x42: "Broadcom", 0x43: "Cavium", 0x44: "DEC", 0x46: "Fujitsu",
    0x49: "Infineon", 0x4D: "Motorola", 0x4E: "NVIDIA", 0x50: "AMCC", 0x51: "Qualcomm",
    0x56: "Marvell", 0x69: "Intel",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ArmModel:
    vendor: str
    family: int
    model: int


def arm_model_from_midr(midr: int) -> ArmModel:
    """Vendor from the implementer byte; family is MIDR bits 23:16 (variant and
    architecture), model the part number, as klauspost/cpuid reads them."""
    return ArmModel(
        vendor=ARM_IMPLEMENTERS.get((midr >> 24) & 0xFF, "VendorUnknown"),
        family=(midr >> 16) & 0xFF,
        model=(midr >> 4) & 0xFFF,
    )


def midr_from_cpuinfo(fields: Mapping[str, str]) -> int | None:
    """Rebuild MIDR_EL1 from /proc/cpuinfo's CPU implementer/variant/part/revision lines.
    The architecture field of an AArch64 MIDR is always 0xF; cpuinfo prints 8 instead."""
    try:
        impl = int(fields["CPU implementer"], 0)
        variant = int(fields.get("CPU variant", "0"), 0)
        part = int(fields.get("CPU part", "0"), 0)
        rev = int(fields.get("CPU revision", "0"), 0)
    except (KeyError, ValueError):
        return None
    return (impl << 24) | (variant << 20) | (0xF << 16) | (part << 4) | rev
