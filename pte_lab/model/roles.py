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

from collections import Counter

from ..format import RawPlan

ROLES = ("input", "output", "input_output", "intermediate", "mutable_buffer", "view", "unused")


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
    state = set()
    for v, val in enumerate(plan.values):
        t = val.tensor
        if t is None or t.mem_id is None or v in io:
            continue
        if t.data_buffer_idx > 0 or t.fqn:
            state.add(v)
    ops = plan.operators
    for ins in plan.instructions:
        if ins.kind == "KernelCall" and len(ins.args) >= 2:
            if _in_place(*ops[ins.target]) and ins.args[0] == ins.args[-1]:
                v = ins.args[0]
                t = plan.values[v].tensor
                if t is not None and t.mem_id is not None and v not in io:
                    state.add(v)
    return frozenset(state)


def _expanded(plan: RawPlan, args) -> list[int]:
    out = []
    for a in args:
        out.append(a)
        out.extend(it for it in plan.values[a].items if it >= 0)
    return out


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
    if ins.kind == "KernelCall":
        if not ins.args:
            return set()
        named = _expanded(plan, ins.args)
        written = set(_expanded(plan, ins.args[-1:]))
        reads = {v for v, c in Counter(named).items() if c == 1} - written
        if _in_place(*plan.operators[ins.target]):
            reads.add(ins.args[0])
        return reads
    if ins.kind in ("MoveCall", "JumpFalseCall"):
        return {ins.args[0]}
    return set()


def state_values(plan: RawPlan, first_use: dict[int, int], views: dict[int, int],
                 declared: frozenset[int] | None = None) -> frozenset[int]:
    """Every planned value that holds state between calls: the one rule.

    :func:`declared_state`, plus each planned tensor that is not a method
    input and whose first use in a call reads it while nothing has written its
    bytes earlier in that call (it is no view of an earlier value: ``views``
    from :func:`pte_lab.model.lifetimes.resolve_views`). That is what a KV
    cache updated in place by any operator looks like, named or not, with
    initial data or not. Views of state are state too. ``first_use`` maps a
    value to the first instruction naming it.
    """
    state = set(declared_state(plan) if declared is None else declared)
    inputs = set(plan.inputs)
    reads: dict[int, set[int]] = {}
    for v, val in enumerate(plan.values):
        t = val.tensor
        if t is None or t.mem_id is None or v in inputs or v in state or v in views:
            continue
        i = first_use.get(v)
        if i is None:
            continue
        if i not in reads:
            reads[i] = reads_at(plan, i)
        if v in reads[i]:
            state.add(v)
    for v in views:
        root = v
        while root in views:
            root = views[root]
        if root in state:
            state.add(v)
    return frozenset(state)


def role_of(value: int, *, inputs: set[int], outputs: set[int], state: frozenset[int], named: bool,
            view: bool) -> str:
    """The role of one planned value (``named``: some instruction names it)."""
    if value in state:
        return "mutable_buffer"
    if value in inputs:
        return "input_output" if value in outputs else "input"
    if value in outputs:
        return "output"
    if not named:
        return "unused"
    return "view" if view else "intermediate"
