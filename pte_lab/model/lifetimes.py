"""Lifetimes read from the instruction stream.

Convention (the one pte_lab uses everywhere):

* ``first`` / ``last`` are the indices of the first and last instruction whose
  arguments name the value. TensorList and OptionalTensorList arguments name
  their items too; MoveCall (both ends), FreeCall and JumpFalseCall (its
  condition) count like any other instruction.
* Method inputs start at ``-1`` (they are written before the first
  instruction); method outputs end at ``N``, the instruction count (they are
  read after the last one).
* State that persists between calls (mutable buffers, KV caches: see
  :mod:`pte_lab.model.roles`) spans ``[-1, N]``.
* Loops: when an instruction jumps backwards from ``j`` to ``d``, any value
  alive before ``d`` and used inside ``[d, j]`` must survive every iteration,
  so its ``last`` is extended to ``j``.
* A value no instruction names and that is not an input, output or buffer has
  no lifetime (``None``).
* Views: ExecuTorch emits no instruction for a view (``remove_view_copy``); it
  plans the view at its base's offset. A planned tensor whose first naming
  instruction does not write it is such a view: its lifetime starts when its
  base is written, and the base stays alive as long as the view is used
  (:func:`resolve_views`). An instruction writes its out arguments, which a
  KernelCall names twice (as the ``out`` argument and as the returned value);
  a MoveCall writes its destination; a DelegateCall may write any argument.

ExecuTorch itself computes lifetimes on FX nodes, not instructions, and does
not store them; this convention gave no plan conflicts on exported programs.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter

from ..format import RawPlan


def instruction_uses(plan: RawPlan) -> tuple[dict[int, int], dict[int, int]]:
    """first and last instruction naming each value (lists expanded)."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    values = plan.values
    for i, ins in enumerate(plan.instructions):
        for a in ins.args:
            first.setdefault(a, i)
            last[a] = i
            v = values[a]
            if v.items:
                for it in v.items:
                    if it >= 0:
                        first.setdefault(it, i)
                        last[it] = i
    return first, last


def backward_jumps(plan: RawPlan) -> list[tuple[int, int]]:
    """(source, destination) of every JumpFalseCall that jumps backwards."""
    return [
        (i, ins.destination)
        for i, ins in enumerate(plan.instructions)
        if ins.kind == "JumpFalseCall" and ins.destination <= i
    ]


def lifetimes(plan: RawPlan, persistent, uses=None) -> tuple[dict[int, int], dict[int, int]]:
    """first/last per value under the convention above (new dicts).

    ``persistent`` are the values (mutable buffers) that live across calls;
    ``uses`` is :func:`instruction_uses` of the plan when the caller has it.
    """
    n = len(plan.instructions)
    first, last = uses if uses is not None else instruction_uses(plan)
    first, last = dict(first), dict(last)
    for v in plan.inputs:
        first[v] = -1
        last.setdefault(v, -1)
    for v in plan.outputs:
        first.setdefault(v, n)
        last[v] = n
    for v in persistent:
        first[v] = -1
        last[v] = n
    jumps = backward_jumps(plan)
    if jumps:
        _extend_over_loops(first, last, jumps)
    return first, last


def _extend_over_loops(first: dict[int, int], last: dict[int, int], jumps: list[tuple[int, int]]) -> None:
    """For every value: while some loop ``(src -> dst)`` has ``first < dst <= last < src``, ``last = src``.

    Every such loop stays eligible until ``last`` reaches its ``src``, so the fixed point is reached by
    jumping straight to the largest eligible ``src``: a range-maximum query over the loops sorted by
    ``dst`` (a sparse table), instead of re-scanning every value for every loop until nothing moves.
    """
    import numpy as np

    order = sorted(jumps, key=lambda j: j[1])
    dsts = np.array([d for _, d in order], dtype=np.int64)
    table = [np.array([s for s, _ in order], dtype=np.int64)]
    while 2 ** len(table) <= len(order):
        prev, half = table[-1], 2 ** (len(table) - 1)
        table.append(np.maximum(prev[:-half], prev[half:]))

    def max_src(lo: int, hi: int) -> int:  # max src over order[lo:hi]
        k = (hi - lo).bit_length() - 1
        return int(max(table[k][lo], table[k][hi - 2**k]))

    for v, f in first.items():
        lo = int(np.searchsorted(dsts, f, side="right"))  # loops starting after the value is first named
        while True:
            hi = int(np.searchsorted(dsts, last[v], side="right"))  # ... and at or before its last use
            if hi <= lo:
                break
            reach = max_src(lo, hi)
            if reach <= last[v]:
                break
            last[v] = reach


def _expanded(plan: RawPlan, args) -> list[int]:
    out = []
    for a in args:
        out.append(a)
        for it in plan.values[a].items:
            if it >= 0:
                out.append(it)
    return out


def written_at(plan: RawPlan, i: int) -> set[int]:
    """Values instruction ``i`` writes (for a DelegateCall: every argument, to be safe)."""
    ins = plan.instructions[i]
    if ins.kind == "MoveCall":
        return {ins.args[1]}
    if ins.kind == "KernelCall":
        counts = Counter(_expanded(plan, ins.args))
        return {v for v, c in counts.items() if c >= 2}
    if ins.kind == "DelegateCall":
        return set(_expanded(plan, ins.args))
    return set()


def resolve_views(plan: RawPlan, first: dict[int, int], last: dict[int, int], skip: set[int]) -> dict[int, int]:
    """Find views (see the module docs), fix lifetimes in place; returns ``{view: base}``.

    A view's base is the value at the same arena and offset whose lifetime
    started last before the view's first use (the lowest value index among
    equals). Per offset the values are kept sorted by ``(first, value)``, so
    each view costs a binary search, not a scan of every tensor that ever sat
    at that offset.
    """
    at: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for v, val in enumerate(plan.values):
        t = val.tensor
        if t is not None and t.mem_id is not None and v in first:
            at.setdefault((t.mem_id, t.offset), []).append((first[v], v))
    for lst in at.values():
        lst.sort()
    views: dict[int, int] = {}
    n = len(plan.instructions)
    for v in sorted((v for v in first if v not in skip), key=lambda v: first[v]):
        t = plan.values[v].tensor
        i = first[v]
        if t is None or t.mem_id is None or i < 0 or i >= n or v in written_at(plan, i):
            continue
        lst = at[(t.mem_id, t.offset)]
        pos = bisect_left(lst, (i, -1))  # the values whose lifetime starts before i (v's own starts at i)
        if pos == 0:
            continue  # read before anything writes it: nothing to tie it to
        latest = lst[pos - 1][0]
        base = lst[bisect_left(lst, (latest, -1))][1]
        views[v] = base
        del lst[bisect_left(lst, (i, v))]
        first[v] = first[base]
        insort(lst, (first[v], v))
        b = base
        while True:  # the base, and its own base, stay alive while the view is used
            last[b] = max(last[b], last[v])
            if b not in views:
                break
            b = views[b]
    return views
