"""Which planned tensors are inputs, outputs, views, or state kept between calls: the one place.

Roles (the ``role`` column of :attr:`pte_lab.model.Method.tensors`):

``input`` / ``output`` / ``input_output``
    named by the method's ``inputs`` / ``outputs`` lists.
``mutable_buffer``
    state kept between calls (see :func:`state_values`): mutable buffers, KV
    caches updated in place, and views of them. It lives over the whole
    method, ``[-1, N]``: no plan may reuse its bytes within a call.
``view``
    an intermediate that ExecuTorch planned at its base's offset and emitted
    no instruction for (see :func:`pte_lab.model.lifetimes.resolve_views`).
``intermediate``
    any other planned tensor an instruction names.
``unused``
    a planned tensor nothing names.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from ..format import RawPlan
from ..vocabulary import Role, InstructionKind
from .arrays import isin, unique
from .dtypes import SCALAR_TYPES
from .dtypes import nbytes as _nbytes
from .lifetimes import expanded, holding, holds_nothing, named_in, named_twice

#: every role, in the order above (:class:`pte_lab.vocabulary.Role`)
ROLES = tuple(Role)


def _in_place(name: str, overload: str) -> bool:
    """``aten::index_put_``, ``aten::copy_``...: writes its first argument and returns it."""
    return name.endswith("_") and not overload.endswith("out")


def declared_state(plan: RawPlan) -> frozenset[int]:
    """Planned values the file itself marks as state between calls.

    A planned tensor that is not a method input or output holds state when it
    carries initial data (``data_buffer_idx > 0``) or a fully qualified name
    (``emit_mutable_buffer_names``), or when an in-place kernel (``aten::copy_``,
    ``index_put_``...: a name ending in ``_``, not an ``out`` overload) writes
    its first argument and returns it.
    """
    io = set(plan.inputs) | set(plan.outputs)
    marked = holding(plan) & np.fromiter((r.tensor is not None and (r.tensor.data_buffer_idx > 0 or bool(r.tensor.fqn))
                                          for r in plan.records), bool, len(plan.records))  # per record
    state = set(np.flatnonzero(marked[plan.record_of]).tolist()) - io
    ops = plan.operators
    for ins in plan.instructions:
        if ins.kind == InstructionKind.KERNEL_CALL and len(ins.args) >= 2:
            if _in_place(*ops[ins.target]) and ins.args[0] == ins.args[-1]:
                v = ins.args[0]
                t = plan.values[v].tensor
                if t is not None and t.mem_id is not None and v not in io and not holds_nothing(t):
                    state.add(v)
    return frozenset(state)


def reads_at(plan: RawPlan, i: int) -> set[int]:
    """Values instruction ``i`` reads (TensorList items included).

    A KernelCall names every schema argument, then its return value(s) last
    (``llama::update_cache.out`` is ``[value, cache, start_pos, out, out]``):
    a value named twice is an ``out`` argument (written), the last argument is
    written, every other value is read; an in-place kernel also reads its first
    argument. A MoveCall reads its source, a JumpFalseCall its condition. A
    DelegateCall's arguments are its inputs then its outputs, which the file
    does not tell apart: none is counted as read.
    """
    ins = plan.instructions[i]
    if ins.kind == InstructionKind.KERNEL_CALL:
        if not ins.args:
            return set()
        named, again = named_twice(expanded(plan, ins.args))
        reads = named - again - set(expanded(plan, ins.args[-1:]))
        if _in_place(*plan.operators[ins.target]):
            reads.add(ins.args[0])
        return reads
    if ins.kind in (InstructionKind.MOVE_CALL, InstructionKind.JUMP_FALSE_CALL):
        return {ins.args[0]}
    return set()


def found_state(plan: RawPlan, first_use: dict[int, int], starts: dict[int, int],
                declared: frozenset[int]) -> frozenset[int]:
    """Planned tensors that hold state between calls though the file does not say so.

    A planned tensor that is not a method input or declared state
    (:func:`declared_state`) holds state when its first use in a call reads it
    while nothing has written its bytes earlier in that call: no other
    tensor's lifetime (``starts``: value -> the time its lifetime starts,
    inputs at -1) covering any of its bytes started before that use. That is
    what a KV cache updated in place by any operator looks like, named or not,
    with initial data or not. A view reads bytes its base wrote, and a kernel's
    scratch buffer is read where earlier activations lived: neither is state.
    ``first_use`` maps a value to the first instruction naming it. Empty
    tensors are never state.
    """
    candidates = np.flatnonzero(holding(plan)[plan.record_of])
    candidates = candidates[~isin(candidates, np.fromiter(set(plan.inputs) | declared, np.int64))]
    at = np.fromiter(map(first_use.get, candidates.tolist(), repeat(-1)), np.int64, len(candidates))
    candidates, at = candidates[at >= 0], at[at >= 0]
    read = named_in(plan, candidates, at, lambda i: reads_at(plan, i))
    found, at = candidates[read], at[read]
    if not len(found):
        return frozenset()
    return frozenset((found[~_written_before(plan, starts, found, at)]).tolist())


def state_values(declared: frozenset[int], found: frozenset[int], views: dict[int, int]) -> frozenset[int]:
    """Every planned value that holds state between calls: the one rule.

    Declared state (:func:`declared_state`), state found from how the
    instructions use it (:func:`found_state`), and views of either
    (``views``: view -> base, from :func:`pte_lab.model.lifetimes.resolve_views`).
    """
    state = set(declared) | found
    state.update(v for v, base in views.items() if base in state)
    return frozenset(state)


def _written_before(plan: RawPlan, starts: dict[int, int], candidates: np.ndarray,
                    first_use: np.ndarray) -> np.ndarray:
    """Whether some of each candidate's bytes were covered by another tensor's lifetime before its first
    use (``first_use``, one per candidate).

    Per arena, the byte range is cut at every tensor's start and end; each
    piece is given the earliest start of the tensors covering it (ranges in
    order of start, each piece claimed once), then each candidate's range asks
    for the earliest start over its pieces (a sparse table). Values sharing a
    tensor record share a range: work ~ distinct ranges x log.
    """
    earliest_of = _earliest_start_per_range(plan, starts)
    span_of = {k: _range_of(plan.records[k].tensor) for k in set(plan.record_of[candidates].tolist())}
    arenas = {key[0] for key in span_of.values()}
    # every arena at once: a byte is (mem_id, offset), so no range reaches into another arena's bytes
    ranges = sorted((s, (m, a), (m, b)) for (m, a, b), s in earliest_of.items() if m in arenas)
    keys = list(dict.fromkeys(span_of.values()))
    got = _earliest_over(ranges, [((m, a), (m, b)) for m, a, b in keys])
    earliest_in = dict(zip(keys, got))  # candidate range -> the earliest start over its bytes
    records = plan.record_of[candidates]
    distinct, at = unique(records, return_inverse=True)
    earliest = np.fromiter((earliest_in[span_of[k]] for k in distinct.tolist()), np.int64, len(distinct))
    return earliest[at.reshape(-1)] < first_use


def _range_of(t) -> tuple[int, int, int]:
    return t.mem_id, t.offset, t.offset + _span(t)


def _earliest_start_per_range(plan: RawPlan, starts: dict[int, int]) -> dict[tuple, int]:
    """(mem_id, offset, end) -> the earliest start of a tensor holding bytes there (one look per record)."""
    v = np.fromiter(starts.keys(), np.int64, len(starts))
    s = np.fromiter(starts.values(), np.int64, len(starts))
    rec = plan.record_of[v]
    keep = holding(plan)[rec]
    order = np.lexsort((s[keep], rec[keep]))
    rec, s = rec[keep][order], s[keep][order]
    head = np.ones(len(rec), dtype=bool)
    head[1:] = rec[1:] != rec[:-1]  # each record's earliest start comes first
    out: dict[tuple, int] = {}
    for k, e in zip(rec[head].tolist(), s[head].tolist()):
        key = _range_of(plan.records[k].tensor)
        if out.get(key, e + 1) > e:
            out[key] = e
    return out


_NEVER = int(np.iinfo(np.int64).max)  # no tensor covers these bytes


def _earliest_over(ranges: list[tuple], keys: list[tuple]) -> list[int]:
    """For each key ``(a, b)``: the earliest start over its bytes, from ``ranges`` ``(start, a, b)`` sorted by
    start (``a`` and ``b`` any ordered positions: ``(mem_id, offset)`` for every arena at once)."""
    if len(ranges) * len(keys) <= 64:  # a few: directly
        return [min((s for s, a, b in ranges if a < b and a < hi and lo < b), default=_NEVER) for lo, hi in keys]
    cuts = sorted({x for _, a, b in ranges for x in (a, b)})
    index = {x: k for k, x in enumerate(cuts)}
    earliest = np.full(len(cuts) - 1, _NEVER, dtype=np.int64)
    nxt = list(range(len(cuts)))  # the next piece not yet claimed, at or after k (path-halved)
    for s, a, b in ranges:
        k, stop = index[a], index[b]
        while True:
            while nxt[k] != k:
                nxt[k] = nxt[nxt[k]]
                k = nxt[k]
            if k >= stop:
                break
            earliest[k] = s
            nxt[k] = k + 1
    table = [earliest]
    while 2 ** len(table) <= len(earliest):
        prev, half = table[-1], 2 ** (len(table) - 1)
        table.append(np.minimum(prev[:-half], prev[half:]))
    lo = np.array([index[a] for a, _ in keys], dtype=np.int64)
    hi = np.array([index[b] for _, b in keys], dtype=np.int64)
    level = np.frexp((hi - lo).astype(np.float64))[1] - 1  # floor(log2(hi - lo)), exact below 2**53
    best = np.empty(len(keys), dtype=np.int64)
    for k in np.unique(level).tolist():
        sel = level == k
        best[sel] = np.minimum(table[k][lo[sel]], table[k][hi[sel] - 2**k])
    return best.tolist()


def _span(t) -> int:
    """Bytes a tensor covers, from its shape and dtype (unknown dtypes count one byte per element)."""
    return _nbytes(t.sizes, SCALAR_TYPES.get(t.scalar_type, ("", 1))[1])


#: planned values up to which :func:`roles_of` asks each value's rules in plain Python (numpy's masks cost more
#: on a few)
_FEW_ROLES = 32


def _role(v: int, named: bool, inputs: set, outputs: set, state: set, views) -> Role:
    """The role of one value: the first rule of :func:`roles_of` that holds."""
    if v in state:
        return Role.MUTABLE_BUFFER
    if v in inputs:
        return Role.INPUT_OUTPUT if v in outputs else Role.INPUT
    if v in outputs:
        return Role.OUTPUT
    if not named:
        return Role.UNUSED
    return Role.VIEW if v in views else Role.INTERMEDIATE


def roles_of(values, *, inputs, outputs, state, named, views) -> np.ndarray:
    """The role of each planned value (an object array of :class:`~pte_lab.vocabulary.Role`): ``values`` an int array,
    ``named`` whether some instruction names each (it has a lifetime), ``views`` view -> base."""
    if len(values) <= _FEW_ROLES:  # a few: each value's rules asked in plain Python, in the same order
        ins, outs, held = set(inputs), set(outputs), set(state)
        out = np.empty(len(values), dtype=object)
        out[:] = [_role(v, n, ins, outs, held, views) for v, n in zip(values.tolist(), named.tolist())]
        return out

    def among(chosen):
        return isin(values, np.fromiter(chosen, np.int64))

    is_in, is_out = among(inputs), among(outputs)
    out = np.full(len(values), Role.INTERMEDIATE, dtype=object)
    # the first rule that holds names the role (np.select's order): the rules set from the last to the first
    for holds, role in ((among(views), Role.VIEW), (~named, Role.UNUSED), (is_out, Role.OUTPUT), (is_in, Role.INPUT),
                        (is_in & is_out, Role.INPUT_OUTPUT), (among(state), Role.MUTABLE_BUFFER)):
        out[holds] = role
    return out
