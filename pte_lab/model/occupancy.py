"""Bytes occupied in an arena at each instruction, and the lower bound.

At instruction ``t`` the occupied bytes are the length of the union of
``[offset, offset + nbytes)`` over the tensors alive at ``t``: aliases (tensors
sharing bytes) count once. The maximum over ``t`` is ``peak_bytes``: no plan
with these lifetimes can use less, so ``size_over_peak = size / peak_bytes`` says
how far a plan is from the bound (1.0 is perfect).
"""

from __future__ import annotations

import numpy as np

from .validate import overlapping_pairs


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


def occupied_bytes(offsets, nbytes, first, last, n_instructions: int) -> np.ndarray:
    """Occupied bytes at each time ``-1 .. n_instructions`` (array index = time + 1).

    All arguments are equal-length integer arrays of the tensors of one arena.
    """
    if len(offsets) <= _FEW:
        return _few(*(np.asarray(x).tolist() for x in (offsets, nbytes, first, last)), n_instructions)
    s = np.asarray(offsets, dtype=np.int64)
    e = s + np.asarray(nbytes, dtype=np.int64)
    first = np.asarray(first, dtype=np.int64)
    last = np.asarray(last, dtype=np.int64)
    alive = (first <= last) & (e > s) & (first <= n_instructions) & (last >= -1)
    s, e = s[alive], e[alive]
    first, last = np.clip(first[alive], -1, n_instructions), np.clip(last[alive], -1, n_instructions)
    times = n_instructions + 2
    if len(s) == 0:
        return np.zeros(times, dtype=np.int64)
    return _by_parts(s, e, first, last, n_instructions)


_FEW = 8  # tensors measured in plain Python at each time the live set changes


def _few(offsets, nbytes, first, last, n_instructions):
    """:func:`occupied_bytes` of a few tensors (lists): those alive, lifetimes clipped to the method, the union
    measured in plain Python where the live set changes (a lifetime starts, or one ended just before), held until
    the next change."""
    rows = [(s, s + n, max(-1, min(f, n_instructions)), max(-1, min(k, n_instructions)))
            for s, n, f, k in zip(offsets, nbytes, first, last)
            if f <= k and n > 0 and f <= n_instructions and k >= -1]
    changes = sorted({f for _, _, f, _ in rows} | {k + 1 for _, _, _, k in rows if k < n_instructions})
    out = np.zeros(n_instructions + 2, dtype=np.int64)
    for t, t_next in zip(changes, changes[1:] + [n_instructions + 1]):
        covered, reach = 0, None
        for a, b in sorted((a, b) for a, b, f, k in rows if f <= t <= k):
            if reach is None or a >= reach:
                covered += b - a
                reach = b
            elif b > reach:
                covered += b - reach
                reach = b
        out[t + 1 : t_next + 1] = covered
    return out


def peak(offsets, nbytes, first, last, n_instructions: int, small: int = 64) -> int:
    """``occupied_bytes(...).max()``, without the per-instruction array when there are few tensors (see
    :func:`peak_and_time`)."""
    return peak_and_time(offsets, nbytes, first, last, n_instructions, small)[0]


def peak_and_time(offsets, nbytes, first, last, n_instructions: int, small: int = 64) -> tuple[int, int]:
    """(``occupied_bytes(...).max()``, the first time it is reached: ``occupied_bytes(...).argmax() - 1``), without the
    per-instruction array when there are few tensors; (0, -1) when nothing is ever alive.

    The bytes alive only grow when a tensor's lifetime starts, so the peak is
    first reached at one of those instructions: for ``small`` tensors or fewer
    the union is measured there alone, earliest first.
    """
    if len(offsets) > small:
        occ = occupied_bytes(offsets, nbytes, first, last, n_instructions)
        at = int(occ.argmax())
        return int(occ[at]), at - 1
    if len(offsets) <= 8:  # a few tensors (a file may list 100,000 arenas of one each): in plain Python
        ts = [(s, s + n, f, l) for s, n, f, l in zip(*(np.asarray(x).tolist() for x in (offsets, nbytes, first, last)))
              if f <= l and n > 0 and f <= n_instructions and l >= -1]
        best, when = 0, -1
        for t in sorted({max(-1, min(f, n_instructions)) for _, _, f, _ in ts}):
            covered, reach = 0, None
            for s, e in sorted((s, e) for s, e, f, l in ts if f <= t <= l):
                if reach is None or s >= reach:
                    covered += e - s
                    reach = e
                elif e > reach:
                    covered += e - reach
                    reach = e
            if covered > best:
                best, when = covered, t
        return best, when
    s = np.asarray(offsets, dtype=np.int64)
    e = s + np.asarray(nbytes, dtype=np.int64)
    first = np.asarray(first, dtype=np.int64)
    last = np.asarray(last, dtype=np.int64)
    alive = (first <= last) & (e > s) & (first <= n_instructions) & (last >= -1)
    s, e, first, last = s[alive], e[alive], first[alive], last[alive]
    best, when = 0, -1
    for t in np.unique(np.clip(first, -1, n_instructions)).tolist():  # sorted: the earliest peak is kept
        live = (first <= t) & (last >= t)
        covered = union_length(s[live], e[live])
        if covered > best:
            best, when = covered, t
    return best, when


_GRID_CELLS = 1 << 24  # time x byte-segment cells for the vectorised path (64 MiB of int32)
_TANGLED_PAIRS = 4096  # overlapping pairs (aliases aside) whose union is measured apart from the rest


def _by_parts(s, e, first, last, n_instructions):
    """Alive tensors (lifetimes clipped to the method) that share no bytes while alive add up; the few
    that do are measured exactly (:func:`_union`).

    Aliases (the same bytes, lifetimes meeting: a view and its base) are one
    tensor first; when more than ``_TANGLED_PAIRS`` pairs still overlap, the
    whole arena is measured exactly.
    """
    if (n_instructions + 2) * len(np.unique(np.concatenate([s, e]))) <= _GRID_CELLS:
        return _union(s, e, first, last, n_instructions)  # small enough for the grid at once
    s, e, first, last = _merge_aliases(s, e, first, last)
    tangled = _tangled(s, e, first, last)
    if tangled is None:
        return _union(s, e, first, last, n_instructions)
    apart = ~tangled
    return (_summed(e[apart] - s[apart], first[apart], last[apart], n_instructions)
            + _union(s[tangled], e[tangled], first[tangled], last[tangled], n_instructions))


def _merge_aliases(s, e, first, last):
    """One tensor per run of tensors with the same bytes whose lifetimes overlap or touch."""
    order = np.lexsort((first, e, s))
    s, e, first, last = s[order], e[order], first[order], last[order]
    other = np.ones(len(s), dtype=bool)  # other bytes than the tensor before
    other[1:] = (s[1:] != s[:-1]) | (e[1:] != e[:-1])
    group = np.cumsum(other)
    span = int(last.max(initial=0)) + 2  # last >= -1: group * span + last grows from group to group
    reach = np.maximum.accumulate(group * span + last) - group * span  # the latest last so far in the group
    new = other
    new[1:] |= first[1:] > reach[:-1] + 1
    runs = np.flatnonzero(new)
    return s[runs], e[runs], first[runs], np.maximum.reduceat(last, runs) if len(runs) else last[runs]


def _tangled(s, e, first, last):
    """Which tensors share bytes with another while both are alive; None past ``_TANGLED_PAIRS`` pairs."""
    tangled = np.zeros(len(s), dtype=bool)
    seen = 0
    for a, b in overlapping_pairs(np.zeros_like(s), s, e, first, last):
        seen += len(a)
        if seen > _TANGLED_PAIRS:
            return None
        tangled[a] = tangled[b] = True
    return tangled


def _summed(nbytes, first, last, n_instructions):
    """Bytes alive at each time when no two alive tensors share bytes: a running sum."""
    change = np.zeros(n_instructions + 3, dtype=np.int64)
    np.add.at(change, first + 1, nbytes)
    np.add.at(change, last + 2, -nbytes)
    return np.cumsum(change[:-1])


def _union(s, e, first, last, n_instructions):
    """Bytes covered at each time, aliases once: on a grid when it is small enough, else swept."""
    times = n_instructions + 2
    bounds = np.unique(np.concatenate([s, e]))
    if times * len(bounds) <= _GRID_CELLS:
        return _by_grid(s, e, first, last, times, bounds)
    return _by_sweep(s, e, first, last, n_instructions)


def _by_grid(s, e, first, last, times, bounds):
    """Coverage counts on a (time x elementary byte segment) grid, via 2-D prefix sums."""
    k = len(bounds) - 1
    a = np.searchsorted(bounds, s)
    b = np.searchsorted(bounds, e)
    r0, r1 = (first + 1) * (k + 1), (last + 2) * (k + 1)  # rows of the flattened grid
    grid = np.zeros((times + 1) * (k + 1), dtype=np.int32)
    for corners, sign in (((r0 + a, r1 + b), 1), ((r0 + b, r1 + a), -1)):
        cell, n = np.unique(np.concatenate(corners), return_counts=True)  # np.add.at, without its slowness
        grid[cell] += sign * n.astype(np.int32)
    cover = grid.reshape(times + 1, k + 1).cumsum(axis=0).cumsum(axis=1)[:times, :k]
    return (cover > 0).astype(np.int64) @ np.diff(bounds)


def _by_sweep(s, e, first, last, n_instructions):
    """Union length per change point, for grids too large to hold."""
    order = np.argsort(s, kind="stable")  # sorted once: no sort per instruction
    s, e, first, last = s[order], e[order], first[order], last[order]
    out = np.zeros(n_instructions + 2, dtype=np.int64)
    # The live set only changes where a lifetime starts or just after one ends.
    changes = np.unique(np.concatenate([first, last + 1]))
    changes = changes[(changes >= -1) & (changes <= n_instructions)]
    bounds = changes.tolist() + [n_instructions + 1]
    for t, t_next in zip(bounds[:-1], bounds[1:]):
        live = (first <= t) & (last >= t)
        ls, le = s[live], e[live]
        if len(ls):
            reach = np.maximum.accumulate(le)
            covered = le[0] - ls[0] + np.maximum(0, le[1:] - np.maximum(ls[1:], reach[:-1])).sum()
            out[t + 1 : t_next + 1] = covered
    return out
