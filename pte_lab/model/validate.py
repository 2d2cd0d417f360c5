"""Plan validation: live tensors that overlap in memory, tensors outside arenas.

Two tensors conflict when they sit in the same arena, are alive at the same
instruction, and their byte ranges overlap without being the same storage
(same offset: an alias that the planner shares on purpose). TensorFlow Lite
Micro's greedy planner runs this check after planning; ExecuTorch's memory
planning verifier exists but is off by default.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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


def find_conflicts(values, mem_ids, offsets, nbytes, first, last, limit: int = 1000) -> list[Conflict]:
    """Conflicting pairs among planned tensors (arrays of equal length), at most ``limit``."""
    values = np.asarray(values, dtype=np.int64)
    mem_ids = np.asarray(mem_ids, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    ends = offsets + np.asarray(nbytes, dtype=np.int64)
    first = np.asarray(first, dtype=np.int64)
    last = np.asarray(last, dtype=np.int64)
    out: list[Conflict] = []
    for m in np.unique(mem_ids):
        sel = np.flatnonzero((mem_ids == m) & (ends > offsets))  # empty tensors take no bytes
        order = sel[np.argsort(offsets[sel], kind="stable")]
        o, e, f, l = offsets[order], ends[order], first[order], last[order]
        for i in range(len(order)):
            # candidates: later in offset order, starting before this one ends
            j_end = np.searchsorted(o, e[i], side="left")
            if j_end <= i + 1:
                continue
            j = np.arange(i + 1, j_end)
            hit = j[(o[j] != o[i]) & (f[j] <= l[i]) & (l[j] >= f[i])]
            for k in hit:
                a, b = order[i], order[k]
                out.append(Conflict(int(m), int(values[a]), int(values[b]),
                                    (int(offsets[a]), int(ends[a])), (int(offsets[b]), int(ends[b])),
                                    (int(first[a]), int(last[a])), (int(first[b]), int(last[b]))))
                if len(out) >= limit:
                    return out
    return out
