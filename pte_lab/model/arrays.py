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


def isin(a: np.ndarray, b) -> np.ndarray:
    """``np.isin(a, b)`` for a 1-D integer array ``a`` and integers ``b`` (an array or a sequence)."""
    b = np.asarray(b)
    if not len(b) or not len(a):
        return np.zeros(len(a), dtype=bool)
    if len(a) * len(b) <= _PAIRS:
        return (a[:, None] == b).any(axis=1)
    return np.isin(a, b)
