"""Executing CPUID and XGETBV from Python, and replaying recorded dumps.

The native reader puts a few bytes of x86-64 machine code on a private anonymous page
(written while read-write, then switched to read+execute with ``mprotect``, so the page is
never writable and executable at once) and calls it through ctypes. No compiler and no
helper binary is needed at run time. Where the kernel or a security module refuses
executable memory, construction raises :class:`CpuidUnavailable` and the caller falls
back to ``/proc/cpuinfo``.

Everything that decodes registers takes a :class:`CpuidReader`, so tests replay a dump
recorded on a real machine (:class:`ReplayCpuid`) exactly as the live CPU would answer.
"""

from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from nfd.sources.protocols import CpuidReader as CpuidReader

Regs = tuple[int, int, int, int]


def __getattr__(name: str) -> object:
    # CpuidReader (a typing.Protocol) lives in nfd.sources.protocols so that discovery does
    # not import typing; it is still importable from here.
    if name == "CpuidReader":
        from nfd.sources.protocols import CpuidReader

        return CpuidReader
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CpuidUnavailable(RuntimeError):
    """CPUID cannot be executed here (not x86-64, or executable memory refused)."""


# void cpuid(uint32 leaf /*edi*/, uint32 subleaf /*esi*/, uint32 out[4] /*rdx*/)
#   push rbx; mov r8,rdx; mov eax,edi; mov ecx,esi; cpuid;
#   mov [r8],eax; mov [r8+4],ebx; mov [r8+8],ecx; mov [r8+12],edx; pop rbx; ret
_CPUID_CODE = bytes.fromhex(
    "53" "4989d0" "89f8" "89f1" "0fa2" "418900" "41895804" "41894808" "4189500c" "5b" "c3"
)  # fmt: skip
# uint64 xgetbv(uint32 index /*edi*/): mov ecx,edi; xgetbv; shl rdx,32; or rax,rdx; ret
_XGETBV_CODE = bytes.fromhex("89f9" "0f01d0" "48c1e220" "4809d0" "c3")  # fmt: skip

_X86_64 = {"x86_64", "amd64", "x64"}

# mman.h on Linux x86-64 (the only place this code runs): the values, not the mmap
# module, which would be one more import on discovery's path.
_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_ANONYMOUS = 0x02, 0x20


class NativeCpuid:
    """CPUID/XGETBV of the CPU this process runs on. Hold one per owner (the worker's cpu
    source keeps it for its lifetime); ``close()`` unmaps the code page."""

    def __init__(self) -> None:
        machine = os.uname().machine
        if machine.lower() not in _X86_64 or ctypes.sizeof(ctypes.c_void_p) != 8:
            raise CpuidUnavailable(f"CPUID needs x86-64, this is {machine or 'unknown'}")
        libc = ctypes.CDLL(None, use_errno=True)
        mmap_fn = libc.mmap
        mmap_fn.restype = ctypes.c_void_p
        mmap_fn.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
        ]
        self._mprotect = libc.mprotect
        self._mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self._munmap = libc.munmap
        self._munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self._size = os.sysconf("SC_PAGE_SIZE")
        addr = mmap_fn(None, self._size, _PROT_READ | _PROT_WRITE, _MAP_PRIVATE | _MAP_ANONYMOUS, -1, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            err = ctypes.get_errno()
            raise CpuidUnavailable(f"mmap of a code page failed: {os.strerror(err)}")
        self._addr: int | None = addr
        xgetbv_off = 64
        ctypes.memmove(addr, _CPUID_CODE, len(_CPUID_CODE))
        ctypes.memmove(addr + xgetbv_off, _XGETBV_CODE, len(_XGETBV_CODE))
        if self._mprotect(addr, self._size, _PROT_READ | _PROT_EXEC) != 0:
            err = ctypes.get_errno()
            self.close()
            raise CpuidUnavailable(
                f"executable memory refused ({os.strerror(err)}; SELinux execmem or seccomp?)"
            )
        proto = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32))
        self._cpuid_fn = proto(addr)
        self._xgetbv_fn = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint32)(addr + xgetbv_off)

    def cpuid(self, leaf: int, subleaf: int = 0) -> Regs:
        if self._addr is None:
            raise CpuidUnavailable("reader is closed")
        out = (ctypes.c_uint32 * 4)()  # per call: safe if threads share the reader
        self._cpuid_fn(leaf & 0xFFFFFFFF, subleaf & 0xFFFFFFFF, out)
        return (out[0], out[1], out[2], out[3])

    def xgetbv(self, index: int) -> int:
        if self._addr is None:
            raise CpuidUnavailable("reader is closed")
        return int(self._xgetbv_fn(index & 0xFFFFFFFF))

    def close(self) -> None:
        if self._addr is not None:
            self._munmap(self._addr, self._size)
            self._addr = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: ctypes may be gone already
            pass


class ReplayCpuid:
    """Answers from a recorded dump (see :func:`capture`); leaves not recorded read as
    zeros, as out-of-range leaves and subleaves do. For a leaf that does not depend on ECX
    (neither known to nor recorded with several subleaves) every subleaf reads as
    subleaf 0, as on the CPU."""

    def __init__(self, leaves: Mapping[tuple[int, int], Regs], *, xcr0: int = 0) -> None:
        self._leaves = dict(leaves)
        self._xcr0 = xcr0
        self._indexed = set(_SUBLEAVES) | {leaf for leaf, sub in self._leaves if sub != 0}

    def cpuid(self, leaf: int, subleaf: int = 0) -> Regs:
        got = self._leaves.get((leaf, subleaf))
        if got is None and leaf not in self._indexed:
            got = self._leaves.get((leaf, 0))
        return got if got is not None else (0, 0, 0, 0)

    def xgetbv(self, index: int) -> int:
        return self._xcr0 if index == 0 else 0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplayCpuid:
        """Load the JSON shape written by :func:`dump_to_dict`."""
        leaves: dict[tuple[int, int], Regs] = {}
        for key, regs in dict(data.get("leaves") or {}).items():
            leaf_s, _, sub_s = str(key).partition(".")
            vals = [int(str(r), 16) for r in regs]
            if len(vals) != 4:
                raise ValueError(f"cpuid dump: leaf {key}: expected 4 registers")
            leaves[(int(leaf_s, 16), int(sub_s or "0", 16))] = (vals[0], vals[1], vals[2], vals[3])
        return cls(leaves, xcr0=int(str(data.get("xcr0", "0")), 16))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ReplayCpuid:
        import json

        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))


# Leaves whose answer depends on ECX, and how many subleaves a dump records for each.
_SUBLEAVES: dict[int, int] = {
    0x4: 8, 0x7: 3, 0xB: 4, 0xD: 20, 0xF: 4, 0x10: 4, 0x12: 10, 0x14: 2, 0x17: 4,
    0x18: 8, 0x1D: 2, 0x1E: 2, 0x1F: 6, 0x20: 2, 0x23: 4, 0x24: 2,
    0x8000001D: 6, 0x80000020: 4, 0x80000026: 4,
}  # fmt: skip


def capture(reader: CpuidReader) -> dict[tuple[int, int], Regs]:
    """Every basic, hypervisor and extended leaf, and the subleaves that matter."""
    out: dict[tuple[int, int], Regs] = {}

    def take(leaf: int) -> None:
        for sub in range(_SUBLEAVES.get(leaf, 1)):
            out[(leaf, sub)] = reader.cpuid(leaf, sub)

    max_basic = min(reader.cpuid(0)[0], 0x3F)
    for leaf in range(max_basic + 1):
        take(leaf)
    hv_max = reader.cpuid(0x40000000)[0]
    hv_max = hv_max if 0x40000000 <= hv_max <= 0x400000FF else 0x40000000
    for leaf in range(0x40000000, max(hv_max, 0x4000000C) + 1):
        take(leaf)
    max_ext = reader.cpuid(0x80000000)[0]
    max_ext = max_ext if 0x80000000 <= max_ext <= 0x800000FF else 0x80000000
    for leaf in range(0x80000000, max_ext + 1):
        take(leaf)
    return out


def dump_to_dict(
    leaves: Mapping[tuple[int, int], Regs],
    *,
    xcr0: int,
    note: str = "",
    extra: Iterable[tuple[str, Any]] = (),
) -> dict[str, Any]:
    """The JSON shape of a dump: ``{"leaves": {"0000000d.01": [eax, ebx, ecx, edx]}, "xcr0": ...}``
    with registers as hex strings."""
    doc: dict[str, Any] = {"note": note} if note else {}
    doc.update(extra)
    doc["xcr0"] = f"0x{xcr0:x}"
    doc["leaves"] = {
        f"{leaf:08x}.{sub:02x}": [f"0x{r:08x}" for r in regs] for (leaf, sub), regs in sorted(leaves.items())
    }
    return doc
