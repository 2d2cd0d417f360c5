"""Which planned tensors are inputs, outputs, views, or state kept between calls: the one place.

Roles (the ``role`` column of :attr:`pte_lab.model.Method.tensors`):

``input`` / ``output`` / ``input_output``
    named by the method's ``inputs`` / ``outputs`` lists.
``mutable_buffer``
    state kept between calls (see :func:`state_values`): it lives over the
    whole method, ``[-1, N]``.
``view``
    an intermediate that ExecuTorch planned at its base's offset and emitted
    no instruction for (see :func:`pte_lab.model.lifetimes.resolve_views`).
``intermediate``
    any other planned tensor an instruction names.
``unused``
    a planned tensor nothing names.
"""

from __future__ import annotations

from ..format import RawPlan

ROLES = ("input", "output", "input_output", "intermediate", "mutable_buffer", "view", "unused")


def state_values(plan: RawPlan) -> frozenset[int]:
    """Planned values that hold state between calls (mutable buffers).

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
            name, overload = ops[ins.target]
            if name.endswith("_") and not overload.endswith("out") and ins.args[0] == ins.args[-1]:
                v = ins.args[0]
                t = plan.values[v].tensor
                if t is not None and t.mem_id is not None and v not in io:
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
