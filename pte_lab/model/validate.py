"""Plan validation: live tensors that overlap in memory, tensors outside arenas.

Two tensors conflict when they sit in the same arena, are alive at the same
instruction, and their byte ranges overlap without being the same storage: a
view and its base (see :func:`pte_lab.model.lifetimes.resolve_views`) share
on purpose. Without view information, tensors at the same offset are taken
to be the same storage. TensorFlow Lite
Micro's greedy planner runs this check after planning; ExecuTorch's memory
planning verifier exists but is off by default.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_CHUNK = 1 << 20  # candidate pairs examined at once (tests lower it)


@dataclass(frozen=True)
class Conflict:
    mem_id: int
    a: int  # value index
    b: int
    a_range: tuple[int, int]  # [offset, end)
    b_range: tuple[int, int]
    a_life: tuple[int, int]
    b_life: tuple[int, int]

    def __str__(self) -> str:
        return (
            f"arena {self.mem_id}: value {self.a} bytes [{self.a_range[0]}, {self.a_range[1]}) "
            f"alive {list(self.a_life)} overlaps value {self.b} bytes [{self.b_range[0]}, {self.b_range[1]}) "
            f"alive {list(self.b_life)}"
        )


def find_conflicts(values, mem_ids, offsets, nbytes, first, last, limit: int = 1000,
                   storage=None) -> list[Conflict]:
    """Conflicting pairs among planned tensors (arrays of equal length), at most ``limit``.

    ``storage`` (optional, same length) names each tensor's storage (a view's
    base, else itself): pairs with equal storage never conflict, others do even
    at the same offset. Without it, equal offsets mean the same storage.
    """
    values = np.asarray(values, dtype=np.int64)
    mem_ids = np.asarray(mem_ids, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    ends = offsets + np.asarray(nbytes, dtype=np.int64)
    first = np.asarray(first, dtype=np.int64)
    last = np.asarray(last, dtype=np.int64)
    same = offsets if storage is None else np.asarray(storage, dtype=np.int64)
    out: list[Conflict] = []
    for m in np.unique(mem_ids):
        sel = np.flatnonzero((mem_ids == m) & (ends > offsets))  # empty tensors take no bytes
        for x, y in _candidate_pairs(offsets[sel], ends[sel], first[sel], last[sel]):
            x, y = sel[x], sel[y]
            hit = ((same[x] != same[y]) & (offsets[x] < ends[y]) & (offsets[y] < ends[x])
                   & (first[x] <= last[y]) & (first[y] <= last[x]))
            for a, b in zip(x[hit], y[hit]):
                out.append(Conflict(int(m), int(values[a]), int(values[b]),
                                    (int(offsets[a]), int(ends[a])), (int(offsets[b]), int(ends[b])),
                                    (int(first[a]), int(last[a])), (int(first[b]), int(last[b]))))
                if len(out) >= limit:
                    return out
    return out


def _candidate_pairs(offsets, ends, first, last):
    """Yield chunks (x, y) of index pairs that overlap in bytes or in time, whichever is fewer.

    Sorted by start, the intervals that overlap interval ``i`` and start after it
    are ``i+1 .. stop[i]``: a pair overlapping in both dimensions is among them in
    either dimension, so the cheaper one is enumerated and the other is checked.
    """
    n = len(offsets)
    if n < 2:
        return
    by_bytes = _ranges(offsets, ends, inclusive=False)
    by_time = _ranges(first, last, inclusive=True)
    order, counts = min(by_bytes, by_time, key=lambda oc: int(oc[1].sum()))
    cum = np.cumsum(counts)
    i0 = 0
    while i0 < n:  # chunks keep memory bounded for any number of pairs
        base = cum[i0 - 1] if i0 else 0
        i1 = max(int(np.searchsorted(cum, base + _CHUNK, side="right")), i0 + 1)
        c = counts[i0:i1]
        ii = np.repeat(np.arange(i0, i1), c)
        if len(ii):
            block = np.repeat(cum[i0:i1] - c - base, c)
            jj = ii + 1 + (np.arange(len(ii)) - block)
            yield order[ii], order[jj]
        i0 = i1


def _ranges(start, end, inclusive: bool):
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    stop = np.searchsorted(s, e, side="right" if inclusive else "left")
    return order, np.maximum(stop - np.arange(1, len(order) + 1), 0)
