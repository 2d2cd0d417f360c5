"""Plan validation: live tensors that overlap in memory, tensors outside arenas.

Two tensors conflict when they sit in the same arena, are alive at the same
instruction, and their byte ranges overlap without being the same storage: a
view and its base (see :func:`pte_lab.model.lifetimes.resolve_views`) share
on purpose. Without view information, tensors at the same offset are taken
to be the same storage. TensorFlow Lite
Micro's greedy planner runs this check after planning; ExecuTorch's memory
planning verifier exists but is off by default.

The search is a sweep over time (:func:`overlapping_pairs`): two tensors alive
at once are both alive when the later one starts, so each tensor asks which of
the tensors alive at its first instruction share its bytes. The tensors alive
over a stretch of instructions are kept together (a segment tree over the
instructions where lifetimes start), sorted by offset; in a valid plan they
never share bytes, so the ones a tensor's bytes meet are one contiguous run.
Tensors that start at the same instruction are neighbours in byte order.
Work is ~ n log n plus the overlapping pairs looked at (conflicts, and pairs
sharing storage), never the pairs that overlap in bytes only or in time only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_CHUNK = 1 << 20  # candidate pairs examined at once (tests lower it)
_FIRST_CHUNK = 1 << 12  # ... the first time (callers stop at a limit: it doubles up to _CHUNK)
_ASKED = 1 << 18  # (tensor, tree node) questions asked at once
_FEW = 16  # tensors whose pairs are looked at one by one (at most 120 pairs)


@dataclass(frozen=True)
class Conflict:
    """Two planned tensors of one arena whose bytes overlap while both are alive: their value indices, byte
    ranges ``[offset, end)`` and lifetimes."""
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
    Tensors of no bytes, and tensors never alive (``first > last``), hold
    nothing and never conflict. In each pair ``a`` starts first (or at the
    same instruction, with the lower index).
    """
    values = np.asarray(values, dtype=np.int64)
    mem_ids = np.asarray(mem_ids, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    ends = offsets + np.asarray(nbytes, dtype=np.int64)
    first = np.asarray(first, dtype=np.int64)
    last = np.asarray(last, dtype=np.int64)
    same = offsets if storage is None else np.asarray(storage, dtype=np.int64)
    sel = np.flatnonzero((ends > offsets) & (first <= last))
    out: list[Conflict] = []
    for x, y in overlapping_pairs(mem_ids[sel], offsets[sel], ends[sel], first[sel], last[sel]):
        xs, ys = sel[x], sel[y]
        keep = np.flatnonzero(same[xs] != same[ys])[: limit - len(out)]
        for a, b in zip(xs[keep].tolist(), ys[keep].tolist()):
            out.append(Conflict(int(mem_ids[a]), int(values[a]), int(values[b]),
                                (int(offsets[a]), int(ends[a])), (int(offsets[b]), int(ends[b])),
                                (int(first[a]), int(last[a])), (int(first[b]), int(last[b]))))
            if len(out) >= limit:
                return sorted(out, key=_in_order)
    return sorted(out, key=_in_order)


def _in_order(c: Conflict):
    """Conflicts are listed arena by arena, in the order their overlaps begin."""
    return c.mem_id, c.b_life[0], c.a_life[0], c.a, c.b


def _byte_ranks(mem_ids, offsets, ends):
    """Byte ranges of every arena on one axis: ``(mem_id, byte)`` numbered in order.

    Ranges overlap on that axis exactly when they are in the same arena and
    overlap in bytes there.
    """
    n = len(offsets)
    arena = np.concatenate([mem_ids, mem_ids])
    byte = np.concatenate([offsets, ends])
    order = np.lexsort((byte, arena))
    a, b = arena[order], byte[order]
    new = np.ones(2 * n, dtype=bool)
    new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    rank = np.empty(2 * n, dtype=np.int64)
    rank[order] = np.cumsum(new) - 1
    return rank[:n], rank[n:]


def overlapping_pairs(mem_ids, offsets, ends, first, last):
    """Yield chunks ``(a, b)`` of index pairs in the same arena whose bytes ``[offset, end)`` (not
    empty) overlap and whose lifetimes ``[first, last]`` (not empty) overlap, each pair once.

    Pairs that start at one instruction are neighbours in byte order within
    their start (:func:`_starting_together`); for the others, the later one
    finds the earlier one alive when it starts (:func:`_alive_before`).
    """
    if len(offsets) <= _FEW:
        yield from _few_pairs(mem_ids, offsets, ends, first, last)
        return
    lo, hi = _byte_ranks(mem_ids, offsets, ends)
    yield from _starting_together(lo, hi, first)
    yield from _alive_before(lo, hi, first, last)


def _few_pairs(mem_ids, offsets, ends, first, last):
    """The same pairs for a few tensors, each pair looked at in plain Python (a method of a few tensors, where
    the sweep's dozens of array steps cost more than the pairs): ``a`` the one that starts first, the lower
    index of two that start together."""
    rows = list(zip(*(np.asarray(x).tolist() for x in (mem_ids, offsets, ends, first, last))))
    pairs = [(i, j) if f <= g else (j, i)
             for i, (m, o, e, f, l) in enumerate(rows) for j, (n, p, q, g, k) in enumerate(rows[i + 1:], i + 1)
             if m == n and o < q and p < e and o < e and p < q and f <= k and g <= l and f <= l and g <= k]
    if pairs:
        a, b = np.array(pairs, dtype=np.int64).T
        yield a, b


def _starting_together(lo, hi, first):
    """Pairs with the same ``first`` whose ranges overlap: sorted by (first, lo), the ranges meeting
    range ``i`` and sorted after it are ``i+1 .. stop[i]``."""
    width = int(hi.max(initial=0)) + 1
    key = first * width + lo  # first >= -1 and width > every lo, hi: increasing in (first, lo)
    order = np.argsort(key, kind="stable")
    key = key[order]
    stop = np.searchsorted(key, (first * width + hi)[order], side="left")
    begin = np.arange(1, len(order) + 1)
    for i, j in _runs(np.arange(len(order)), begin, np.maximum(stop, begin)):
        a, b = order[i], order[j]
        yield np.minimum(a, b), np.maximum(a, b)


def _alive_before(lo, hi, first, last):
    """Pairs where ``b`` starts later than ``a`` and while ``a`` is alive, their ranges meeting.

    Each ``b``, in the order lifetimes start, asks the nodes on its leaf's path
    of a segment tree over the distinct first instructions (a lifetime is held
    at the nodes tiling the instructions after its first, up to its last) for
    the lifetimes that meet its bytes.
    """
    starts = np.unique(first)
    leaf = np.searchsorted(starts, first)
    size = 1 << max(len(starts) - 1, 0).bit_length()
    held = _Held(*_tree_nodes(leaf + 1, np.searchsorted(starts, last, side="right"), size), lo, hi, size)
    askers = np.argsort(first, kind="stable")
    step = max(1, _ASKED // size.bit_length())
    for k in range(0, len(askers), step):
        who, node = held.path(askers[k : k + step], leaf)
        begin, end = held.runs(node, lo[who], hi[who])
        for b, at in _runs(who, begin, end):
            a = held.item[at]
            keep = lo[b] < hi[a]
            yield a[keep], b[keep]


def _tree_nodes(lo, hi, size):
    """(item, node) pairs: the nodes of a segment tree over ``size`` leaves (heap numbering: the root
    is 1, leaf ``k`` is ``size + k``) that tile each item's leaf range ``[lo, hi)``; at most two per level."""
    items, nodes = [], []
    idx = np.arange(len(lo))
    lo, hi = lo + size, hi + size
    while len(idx):
        take = (lo & 1).astype(bool) & (lo < hi)
        items.append(idx[take])
        nodes.append(lo[take])
        lo = lo + take
        take = (hi & 1).astype(bool) & (lo < hi)
        hi = hi - take
        items.append(idx[take])
        nodes.append(hi[take])
        lo, hi = lo >> 1, hi >> 1
        more = lo < hi
        idx, lo, hi = idx[more], lo[more], hi[more]
    return np.concatenate(items or [idx]), np.concatenate(nodes or [idx])


class _Held:
    """What each tree node holds, sorted by node then ``lo``, with per node the running maximum of
    ``hi`` (``reach``): the items meeting ``[a, b)`` at a node are among one run of positions, and
    are exactly that run when the node's items are disjoint (a valid plan's are: they are alive at once)."""

    def __init__(self, item, node, lo, hi, size):
        self.width = int(hi.max(initial=0)) + 1
        key = node * self.width + lo[item]
        order = np.argsort(key, kind="stable")
        self.item, node = item[order], node[order]
        self.start = key[order]
        self.reach = np.maximum.accumulate(node * self.width + hi[self.item])  # never reaches the next node
        self.holds = np.zeros(2 * size, dtype=bool)
        self.holds[node] = True

    def path(self, askers, leaf):
        """(asker, node) for each asker and each node from its leaf to the root that holds anything."""
        levels = len(self.holds).bit_length() - 1
        node = (leaf[askers] + len(self.holds) // 2)[:, None] >> np.arange(levels)
        busy = self.holds[node]
        return np.broadcast_to(askers[:, None], node.shape)[busy], node[busy]

    def runs(self, node, a, b):
        """For each query (node, [a, b)): the run ``[begin, end)`` of held positions to look at."""
        base = node * self.width
        begin = np.searchsorted(self.reach, base + a, side="right")
        end = np.searchsorted(self.start, base + b, side="left")
        return begin, np.maximum(end, begin)


def _runs(who, begin, end):
    """Yield chunks (who, position) of every position in ``[begin, end)`` of each ``who``."""
    counts = end - begin
    asked = np.flatnonzero(counts)
    who, begin, counts = who[asked], begin[asked], counts[asked]
    cum = np.cumsum(counts)
    i0, n, chunk = 0, len(counts), min(_FIRST_CHUNK, _CHUNK)
    while i0 < n:  # chunks keep memory bounded for any number of pairs
        done = int(cum[i0 - 1]) if i0 else 0
        i1 = max(int(np.searchsorted(cum, done + chunk, side="right")), i0 + 1)
        chunk = min(2 * chunk, _CHUNK)
        c = counts[i0:i1]
        step = np.arange(int(cum[i1 - 1]) - done) - np.repeat(cum[i0:i1] - c - done, c)
        yield np.repeat(who[i0:i1], c), np.repeat(begin[i0:i1], c) + step
        i0 = i1
