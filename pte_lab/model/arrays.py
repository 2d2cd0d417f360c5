"""Set operations on integer arrays that stay cheap on a method's few values.

``np.isin`` and ``np.unique(..., return_inverse=True)`` spend 10 to 16 microseconds choosing a method and
checking their arguments, whatever the size: on a method of a few tensors the analysis asks them dozens of
times, and a program of many small methods (one per delegated graph) pays that for each. These give the same
arrays as numpy's, by a direct comparison where the inputs are small, and by numpy's own where they are not
(so the work stays O(n log n) however large a file is).
"""

from __future__ import annotations

import numpy as np

#: element pairs compared directly (``len(a) * len(b)``) below which no sort is worth it
_PAIRS = 1024
#: entries below which distinct values are sorted in plain Python
_FEW = 64


def isin(a: np.ndarray, b) -> np.ndarray:
    """``np.isin(a, b)`` for a 1-D integer array ``a`` and integers ``b`` (an array or a sequence)."""
    b = np.asarray(b)
    if not len(b) or not len(a):
        return np.zeros(len(a), dtype=bool)
    if len(a) * len(b) <= _PAIRS:  # a set of b's few values, each of a's asked (a third of a broadcast's cost)
        found = frozenset(b.tolist())
        return np.fromiter(map(found.__contains__, a.tolist()), bool, len(a))
    return np.isin(a, b)


def unique(a: np.ndarray, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False):
    """``np.unique(a, ...)`` for a 1-D integer array: the distinct values sorted, then as asked, each
    value's first index, the index of each entry's value among them, and how many times each appears."""
    a = np.asarray(a)
    if len(a) > _FEW or a.ndim != 1 or a.dtype.kind not in "iu":
        return np.unique(a, return_index=return_index, return_inverse=return_inverse, return_counts=return_counts)
    values = a.tolist()
    distinct = sorted(set(values))
    out = [np.array(distinct, dtype=a.dtype)]
    if return_index:
        first: dict = {}
        for i, v in enumerate(values):
            first.setdefault(v, i)
        out.append(np.array([first[v] for v in distinct], dtype=np.intp))
    if return_inverse:
        rank = {v: k for k, v in enumerate(distinct)}
        out.append(np.array([rank[v] for v in values], dtype=np.intp))
    if return_counts:
        counts = dict.fromkeys(distinct, 0)
        for v in values:
            counts[v] += 1
        out.append(np.array(list(counts.values()), dtype=np.intp))
    return out[0] if len(out) == 1 else tuple(out)
