"""Measuring memory around a runtime call: host and device.

Host bytes are exact where pte_lab's allocation counter is preloaded (the
isolated worker): every heap allocation and every anonymous mapping is
counted. Elsewhere they come from glibc's statistics and are approximate.
Device bytes are exact on the emulated device, CUDA's own figure on a GPU.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass
from functools import lru_cache

from .. import mallinfo
from .native import counts_fields


class Counts(ctypes.Structure):
    """What the allocation counter has seen: ``struct pte_lab_counts``, its fields read from
    ``native/pte_lab_counts.h`` (the record's one home)."""

    _fields_ = [(n, ctypes.c_int64) for n in counts_fields()]

    def as_dict(self) -> dict[str, int]:
        return {n: int(getattr(self, n)) for n, _ in self._fields_}


#: how host bytes are measured where the counter is preloaded
EXACT_HOST = "exact (allocation counter: heap + anonymous mappings)"


@lru_cache(maxsize=1)
def _counter():
    """The preloaded allocation counter's (reader, host bytes) functions, or None (not preloaded:
    in-process runs)."""
    try:
        lib = ctypes.CDLL(None)
        read, host = lib.pte_lab_counter_read, lib.pte_lab_counter_host_bytes
    except (OSError, AttributeError):
        return None
    read.argtypes = [ctypes.POINTER(Counts)]
    read.restype = None
    host.argtypes = []
    host.restype = ctypes.c_int64
    return read, host


def counts() -> dict[str, int] | None:
    """The counter's figures now (None without the counter)."""
    fns = _counter()
    if fns is None:
        return None
    out = Counts()
    fns[0](ctypes.byref(out))
    return out.as_dict()


def file_rss(path: str) -> int | None:
    """Bytes of ``path`` mapped into this process and resident (the kernel's Rss, /proc/self/smaps)."""
    target = os.path.realpath(path)
    total, inside = 0, False
    try:
        # the paths there are the file system's bytes: decoded as os.fsdecode does, so that a name that is not
        # UTF-8 still compares equal to realpath's
        with open("/proc/self/smaps", encoding=sys.getfilesystemencoding(), errors="surrogateescape") as f:
            for line in f:
                head = line.split(None, 5)
                if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                    inside = len(head) == 6 and head[5].strip() == target
                elif inside and line.startswith("Rss:"):
                    total += int(line.split()[1]) * 1024
    except OSError:
        return None
    return total


def host_in_use() -> tuple[int, str]:
    """(bytes, how): host bytes taken: exact with the counter, else what glibc has handed out, else RSS.

    glibc's ``mallinfo2`` counts what malloc has handed out (heap and mmapped
    blocks: ExecuTorch's host arenas are std::vector allocations), which follows
    arena allocations closely; other allocations in the process add noise, so
    the figure is labelled approximate.
    """
    fns = _counter()
    if fns is not None:
        return int(fns[1]()), EXACT_HOST
    heap = mallinfo.handed_out()
    if heap is not None:
        return heap, mallinfo.HOW
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
