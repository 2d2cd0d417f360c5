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
  ``pte_lab.model.roles``) spans ``[-1, N]``.
* Loops: when an instruction jumps backwards from ``j`` to ``d``, any value
  alive before ``d`` and used inside ``[d, j]`` must survive every iteration,
  so its ``last`` is extended to ``j``.
* A value no instruction names and that is not an input, output or buffer has
  no lifetime (``None``).
* Views: ExecuTorch emits no instruction for a view (``remove_view_copy``); it
  plans the view at its base's offset, with its base's dtype and byte count
  (exir's ``_ViewSpec`` requires both). A planned tensor whose first naming
  instruction does not write it, sitting where a tensor of the same dtype and
  size was written earlier, is such a view: its lifetime starts when its base
  is written, and the base stays alive as long as the view is used
  (``resolve_views``). An instruction writes its out arguments, which a
  KernelCall names twice (as the ``out`` argument and as the returned value);
  a MoveCall writes its destination; a DelegateCall may write any argument.
  Anything else read at its first use (a kernel's scratch buffer, planned by
  exir like any other allocation) lives where it is named.
* Empty tensors (a dimension of 0: no bytes) hold nothing: they are never a
  view or a base, never state, never conflict, and never extend a lifetime.
  Cortex-M kernels take such scratch buffers, planned at the offset of
  whatever activation is live there.

ExecuTorch itself computes lifetimes on FX nodes, not instructions, and does
not store them; this convention gave no plan conflicts on exported programs.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import chain

import numpy as np

from ..format import RawPlan
from ..vocabulary import InstructionKind
from .arrays import isin, unique
from .dtypes import nbytes as _nbytes


def instruction_uses(plan: RawPlan) -> tuple[dict[int, int], dict[int, int]]:
    """first and last instruction naming each value (list items are named where their list is).

    One pass over each distinct instruction's arguments (a file may name one
    instruction record at many places: only its first and last place count),
    then one over each list's items (a list named by many instructions is not
    expanded at each of them).
    """
    seen_first: dict[int, int] = {}
    seen_last: dict[int, int] = {}
    record: dict[int, object] = {}
    for i, ins in enumerate(plan.instructions):
        k = id(ins)
        if k not in seen_first:
            seen_first[k] = i
            record[k] = ins
        seen_last[k] = i
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for k, i in sorted(seen_last.items(), key=lambda kv: kv[1]):  # later places overwrite earlier ones
        last.update(dict.fromkeys(record[k].args, i))
    for k, i in sorted(seen_first.items(), key=lambda kv: -kv[1]):
        first.update(dict.fromkeys(record[k].args, i))
    values = plan.values
    lists = [(a, first[a], last[a]) for a in plan.lists if a in first]  # lists named directly, one level
    for a, fa, la in lists:
        for it in values[a].items:
            if it >= 0:
                if first.get(it, fa + 1) > fa:
                    first[it] = fa
                if last.get(it, la - 1) < la:
                    last[it] = la
    return first, last


def backward_jumps(plan: RawPlan) -> list[tuple[int, int]]:
    """(source, destination) of every JumpFalseCall that jumps backwards."""
    return [
        (i, ins.destination)
        for i, ins in enumerate(plan.instructions)
        if ins.kind == InstructionKind.JUMP_FALSE_CALL and ins.destination <= i
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

    The loops a value can use are those with ``dst > first``; from ``last`` they chain as merged intervals
    ``[dst, src]`` do, so the fixed point is the end of the merged block of those loops that contains
    ``last`` (``last`` itself when none does). Values are taken in decreasing ``first``, loops added in
    decreasing ``dst`` to a stack of merged blocks (each loop merges into it once), and each value asks for
    its block with one binary search: O((values + loops) log) however long a chain of loops is.
    """
    order = sorted(jumps, key=lambda j: -j[1])  # by dst, largest first
    neg_start: list[int] = []  # the blocks, as a stack: -start increasing (the smallest start on top)
    ends: list[int] = []
    k = 0
    for v, f in sorted(first.items(), key=lambda kv: -kv[1]):
        while k < len(order) and order[k][1] > f:  # every loop this value may use, merged in
            src, dst = order[k]
            k += 1
            while neg_start and -neg_start[-1] <= src:  # the new loop reaches the block above it: one block
                neg_start.pop()
                src = max(src, ends.pop())
            neg_start.append(-dst)
            ends.append(src)
        lv = last[v]
        i = bisect_left(neg_start, -lv)  # the block with the largest start <= last
        if i < len(ends) and ends[i] > lv:
            last[v] = ends[i]


def expanded(plan: RawPlan, args) -> tuple[int, ...]:
    """``args`` with the items of the lists among them after each list."""
    if plan.lists.isdisjoint(args):
        return args
    values = plan.values
    out = []
    for a in args:
        out.append(a)
        out.extend(it for it in values[a].items if it >= 0)
    return tuple(out)


def written_at(plan: RawPlan, i: int) -> set[int]:
    """Values instruction ``i`` writes (for a DelegateCall: every argument, to be safe)."""
    return _written(plan, plan.instructions[i])


class Writes:
    """``writes(i)``: :func:`written_at` of a plan, worked out once per instruction record (a file may
    name one record at many places)."""

    def __init__(self, plan: RawPlan):
        self._plan = plan
        self._memo: dict[int, frozenset[int]] = plan.memo.setdefault("writes", {})  # one per plan: shared

    def __call__(self, i: int) -> frozenset[int]:
        ins = self._plan.instructions[i]
        w = self._memo.get(id(ins))
        if w is None:
            w = self._memo[id(ins)] = frozenset(_written(self._plan, ins))
        return w


def _written(plan: RawPlan, ins) -> set[int]:
    if ins.kind == InstructionKind.MOVE_CALL:
        return {ins.args[1]}
    if ins.kind == InstructionKind.KERNEL_CALL:
        return named_twice(expanded(plan, ins.args))[1]
    if ins.kind == InstructionKind.DELEGATE_CALL:
        return set(expanded(plan, ins.args))
    return set()


def named_twice(named) -> tuple[set[int], set[int]]:
    """(the values ``named`` names, those it names more than once): a set each, in one pass."""
    seen: set[int] = set()
    again: set[int] = set()
    for v in named:
        (again if v in seen else seen).add(v)
    return seen, again


def holds_nothing(t) -> bool:
    """A tensor with a dimension of 0: no bytes (its planned offset means nothing)."""
    return 0 in t.sizes


def holding(plan: RawPlan) -> np.ndarray:
    """For each distinct value record (``plan.records``): a tensor planned in an arena that holds bytes
    (worked out once per plan: roles and lifetimes each ask)."""
    got = plan.memo.get("holding")
    if got is None:
        got = plan.memo["holding"] = np.fromiter(
            (r.tensor is not None and r.tensor.mem_id is not None and not holds_nothing(r.tensor)
             for r in plan.records), bool, len(plan.records))
        got.flags.writeable = False
    return got


def record_places(plan: RawPlan, records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mem_id, offset) arrays of the given (planned) tensor records (looked up once per distinct record)."""
    distinct, at = unique(records, return_inverse=True)
    ts = [plan.records[k].tensor for k in distinct.tolist()]
    at = at.reshape(-1)
    return (np.fromiter((t.mem_id for t in ts), np.int64, len(ts))[at],
            np.fromiter((t.offset for t in ts), np.int64, len(ts))[at])


_FEW = 16  # values below which named_in asks each one in plain Python


def named_in(plan: RawPlan, values: np.ndarray, steps: np.ndarray, sets) -> np.ndarray:
    """Whether each ``values[k]`` is in ``sets(steps[k])`` (a set of values per instruction), each
    instruction's set asked for once."""
    if len(values) <= _FEW:  # a few: each asked in plain Python
        answers: dict[int, object] = {}
        out = []
        for v, i in zip(values.tolist(), steps.tolist()):
            got = answers.get(i)
            if got is None:
                got = answers[i] = sets(i)
            out.append(v in got)
        return np.array(out, dtype=bool)
    width = len(plan.values) + 1
    asked = unique(steps)
    answers = [sets(i) for i in asked.tolist()]
    sizes = np.fromiter(map(len, answers), np.int64, len(answers))
    pairs = np.repeat(asked * width, sizes) + np.fromiter(chain.from_iterable(answers), np.int64, int(sizes.sum()))
    return isin(steps * width + values, pairs)


def _same_bytes(a, b) -> bool:
    """exir's ``_ViewSpec`` rule: a view has its base's dtype and byte count."""
    return a.scalar_type == b.scalar_type and (a.sizes == b.sizes or _nbytes(a.sizes, 1) == _nbytes(b.sizes, 1))


def resolve_views(plan: RawPlan, first: dict[int, int], last: dict[int, int], held: set[int]) -> dict[int, int]:
    """Find views (see the module docs), fix lifetimes in place; returns ``{view: base}``.

    ``held`` are the values that hold data before the call's first instruction
    (inputs, state). A base is a tensor that holds data: one of those, or one
    an instruction wrote where it is first named; a tensor read at its first
    use (a view, a scratch buffer) is never a base. A view's base is the
    holder at the same arena and offset whose lifetime started last before the
    view's first use (the lowest value index among equals), with the view's
    dtype and byte count. One sort of every tensor by (arena, offset, start);
    each instruction's written values are worked out once.
    """
    v, f, rec = _started(plan, first)
    reader = _read_first(plan, v, f, held)
    if not reader.any():  # every tensor is written or held where it is first named: no view, nothing to place
        return {}
    v, f, rec, place, reader = _placed(plan, v, f, rec, reader)
    when = place * (len(plan.instructions) + 2) + f + 1  # (place, start) in one increasing key
    holders = np.flatnonzero(~reader)
    holders = holders[_changes(when[holders])]  # the first holder (lowest value) at each place and time
    readers = np.flatnonzero(reader)
    j = np.searchsorted(when[holders], when[readers]) - 1  # the last holder started before, at that place
    ok = j >= 0
    ok[ok] = place[holders[j[ok]]] == place[readers[ok]]
    readers, bases = readers[ok], holders[j[ok]]
    views = {int(v[r]): int(v[b]) for r, b in zip(readers.tolist(), bases.tolist())
             if rec[r] == rec[b] or _same_bytes(plan.values[v[b]].tensor, plan.values[v[r]].tensor)}
    views = dict(sorted(views.items()))
    for view, base in views.items():  # bases are never views: one step to the storage
        first[view] = first[base]
        if last[view] > last[base]:
            last[base] = last[view]
    return views


def _started(plan: RawPlan, first: dict[int, int]):
    """(value, start, record) of every planned tensor holding bytes that has a lifetime."""
    v = np.fromiter(first.keys(), np.int64, len(first))
    f = np.fromiter(first.values(), np.int64, len(first))
    rec = plan.record_of[v]
    keep = holding(plan)[rec]
    return v[keep], f[keep], rec[keep]


def _placed(plan: RawPlan, v, f, rec, *more):
    """``v, f, rec`` (from :func:`_started`) and any ``more`` columns sorted by (arena, offset, start, value),
    with ``place`` after ``rec``: the (arena, offset) pairs numbered in that order."""
    mem_id, offset = record_places(plan, rec)
    order = np.lexsort((v, f, offset, mem_id))
    return (v[order], f[order], rec[order], np.cumsum(_changes(mem_id[order], offset[order])),
            *(x[order] for x in more))


def _read_first(plan: RawPlan, v: np.ndarray, f: np.ndarray, held: set[int]) -> np.ndarray:
    """Which values are read where they are first named: not held before the call, first named by an
    instruction that does not write them."""
    n = len(plan.instructions)
    ask = np.flatnonzero((f >= 0) & (f < n) & ~isin(v, np.fromiter(held, np.int64, len(held))))
    out = np.zeros(len(v), dtype=bool)
    out[ask] = ~named_in(plan, v[ask], f[ask], Writes(plan))
    return out


def _changes(*keys: np.ndarray) -> np.ndarray:
    """True at the first entry and where any key differs from the entry before."""
    out = np.zeros(len(keys[0]), dtype=bool)
    out[:1] = True
    for k in keys:
        out[1:] |= k[1:] != k[:-1]
    return out
