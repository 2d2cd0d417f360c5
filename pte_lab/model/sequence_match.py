"""Match two sequences of keys: the pairs of a longest common subsequence (LCS).

What :func:`pte_lab.model.diff.match_tensors` uses to pair the planned tensors of two versions of
a method: each tensor is a key (what makes it and its dtype) in instruction order, and
two tensors pair only when their keys are equal and every pair keeps the order of both sides.

The LCS is computed bit-parallel (Hyyrö's row recurrence on Python integers used as bit
vectors: one row of the dynamic program per element of the first sequence, each a handful of
big-integer operations over the second), then read back from the stored rows. Work and
memory: the common ends are trimmed first and keys found on one side only dropped; what is
left costs ``len(a) * len(b)`` bits of rows. Past :data:`MAX_CELLS` the two sequences are
cut into proportional blocks matched one by one: still a common subsequence (equal keys, order
kept), no longer guaranteed the longest.

A method's repeated layers make difflib's ``SequenceMatcher`` quadratic in practice (every key
occurs once per layer); this stays near-linear in the sequences' lengths times their width in
machine words.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

__all__ = ["match_sequences", "MAX_CELLS"]

#: the most bits of dynamic-program rows kept at once (32 MiB)
MAX_CELLS = 1 << 28


def _lcs(a: Sequence[int], b: Sequence[int]) -> list[tuple[int, int]]:
    """Index pairs of one longest common subsequence of ``a`` and ``b`` (ints), in order."""
    n, m = len(a), len(b)
    if not n or not m:
        return []
    full = (1 << m) - 1
    where: dict[int, int] = {}
    for j, x in enumerate(b):  # bit j set where b[j] == x
        where[x] = where.get(x, 0) | (1 << j)
    rows = [full]  # rows[i]: bit j clear where the LCS of a[:i] and b[:j+1] grows at column j
    v = full
    for x in a:
        mask = where.get(x)
        if mask:
            u = v & mask
            v = ((v + u) | (v - u)) & full
        rows.append(v)

    def length(i: int, j: int) -> int:  # LCS of a[:i] and b[:j]: the clear bits among the low j
        return j - (rows[i] & ((1 << j) - 1)).bit_count()

    pairs = []
    i, j = n, m
    while i and j:
        if a[i - 1] == b[j - 1]:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif length(i - 1, j) >= length(i, j - 1):
            i -= 1
        else:
            j -= 1
    pairs.reverse()
    return pairs


def match_sequences(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)`` with ``a[i] == b[j]``, increasing in both: a longest common subsequence
    (within :data:`MAX_CELLS`; see the module's docstring)."""
    lo = 0
    while lo < len(a) and lo < len(b) and a[lo] == b[lo]:
        lo += 1
    hi = 0
    while hi < len(a) - lo and hi < len(b) - lo and a[-1 - hi] == b[-1 - hi]:
        hi += 1
    pairs = [(i, i) for i in range(lo)]
    ids: dict[Hashable, int] = {}
    for k in b[lo:len(b) - hi]:
        ids.setdefault(k, len(ids))
    in_a = {k for k in a[lo:len(a) - hi] if k in ids}
    # keys on one side only can pair with nothing: drop them, keep where the rest came from
    ia = [i for i in range(lo, len(a) - hi) if a[i] in in_a]
    ib = [j for j in range(lo, len(b) - hi) if b[j] in in_a]
    xa, xb = [ids[a[i]] for i in ia], [ids[b[j]] for j in ib]
    blocks = max(1, -(-len(xa) * len(xb) // MAX_CELLS))
    for k in range(blocks):
        sa = slice(k * len(xa) // blocks, (k + 1) * len(xa) // blocks)
        sb = slice(k * len(xb) // blocks, (k + 1) * len(xb) // blocks)
        pairs += [(ia[sa.start + p], ib[sb.start + q]) for p, q in _lcs(xa[sa], xb[sb])]
    pairs += [(len(a) - hi + k, len(b) - hi + k) for k in range(hi)]
    return pairs
