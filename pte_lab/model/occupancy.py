"""Bytes occupied in an arena at each instruction, and the lower bound.

At instruction ``t`` the occupied bytes are the length of the union of
``[offset, offset + nbytes)`` over the tensors alive at ``t``: aliases (tensors
sharing bytes) count once. The maximum over ``t`` is ``peak_bytes``: no plan
with these lifetimes can use less, so ``efficiency = size / peak_bytes`` says
how far a plan is from the bound (1.0 is perfect).
"""

from __future__ import annotations

import numpy as np


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of half-open intervals ``[starts[i], ends[i])``."""
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    e = ends[order]
    reach = np.maximum.accumulate(e)
    prev = np.empty_like(reach)
    prev[0] = s[0]
    prev[1:] = reach[:-1]
    return int(np.maximum(0, e - np.maximum(s, prev)).sum())


def occupancy(offsets, nbytes, first, last, n_instructions: int) -> np.ndarray:
    """Occupied bytes at each time ``-1 .. n_instructions`` (array index = time + 1).

    All arguments are equal-length integer arrays of the tensors of one arena.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    ends = offsets + np.asarray(nbytes, dtype=np.int64)
    first = np.asarray(first, dtype=np.int64)
    last = np.asarray(last, dtype=np.int64)
    out = np.zeros(n_instructions + 2, dtype=np.int64)
    if len(offsets) == 0:
        return out
    # The live set only changes where a lifetime starts or just after one ends.
    changes = np.unique(np.concatenate([first, last + 1]))
    changes = changes[(changes >= -1) & (changes <= n_instructions)]
    bounds = list(changes) + [n_instructions + 1]
    for t, t_next in zip(bounds[:-1], bounds[1:]):
        live = (first <= t) & (last >= t)
        if live.any():
            out[t + 1 : t_next + 1] = union_length(offsets[live], ends[live])
    return out
