"""Measuring memory around a runtime call: host (approximate) and device (exact or CUDA's own)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass
from functools import lru_cache


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


@lru_cache(maxsize=1)
def _mallinfo2():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _Mallinfo2
    return fn


def host_in_use() -> tuple[int, str]:
    """(bytes, how): bytes the C allocator has handed out, or the RSS where that is unknown.

    glibc's ``mallinfo2`` counts what malloc has handed out (heap and mmapped
    blocks: ExecuTorch's host arenas are std::vector allocations), which follows
    arena allocations closely; other allocations in the process add noise, so
    the figure is labelled approximate.
    """
    fn = _mallinfo2()
    if fn is not None:
        mi = fn()
        return int(mi.uordblks + mi.hblkhd), "approximate (glibc mallinfo2)"
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"), "approximate (RSS)"
    except OSError:
        return 0, "unavailable"


def host_available() -> int | None:
    """Bytes of host memory available to new allocations (MemAvailable), None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


@dataclass
class CudaProbe:
    """Free CUDA memory via torch, when torch sees a CUDA device."""

    @staticmethod
    def available() -> bool:
        try:
            import torch

            return torch.cuda.is_available()
        except Exception:  # noqa: BLE001 - no torch, broken driver: no CUDA
            return False

    @staticmethod
    def free(index: int = 0) -> int:
        import torch

        torch.cuda.synchronize(index)
        return int(torch.cuda.mem_get_info(index)[0])
