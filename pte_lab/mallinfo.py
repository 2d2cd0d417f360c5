"""What glibc's malloc has handed out (``mallinfo2``): the host bytes pte_lab reports where its allocation counter
is not preloaded. The one home of glibc's ``struct mallinfo2``.

Standard library only and no pte_lab import, on purpose: the device-placement steps
(``pte_lab/experiments/_placement_steps.py``), which run under any interpreter without importing pte_lab, load
this file by its path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache

__all__ = ["Mallinfo2", "handed_out", "HOW"]

#: how a figure from :func:`handed_out` was measured, wherever it is shown: other allocations of the process
#: add noise to it
HOW = "approximate (glibc mallinfo2)"


class Mallinfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (``malloc.h``, glibc 2.33 on)."""

    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


@lru_cache(maxsize=1)
def _mallinfo2():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = Mallinfo2
    return fn


def handed_out() -> int | None:
    """Bytes glibc's malloc has handed out (heap and mmapped blocks: ``uordblks + hblkhd``), or None where the C
    library has no ``mallinfo2`` (not glibc, or older than 2.33)."""
    fn = _mallinfo2()
    if fn is None:
        return None
    mi = fn()
    return int(mi.uordblks + mi.hblkhd)
